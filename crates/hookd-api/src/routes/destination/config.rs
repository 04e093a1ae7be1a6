//! A destination's `type` and `config` as the API reads and shows them: each served type's
//! fields checked (a refusal names `config.<field>`), split into what is stored in clear (a
//! [`Destination`]) and the credentials sealed with the keys, and shown back without them.

use std::collections::BTreeMap;

use hookd_core::destination::{
    AmazonS3Config, AwsAccess, Destination, KafkaConfig, NatsConfig, RabbitMqConfig,
    SECRET_ACCESS_KEY, SnsConfig, SqsConfig, URI_SECRET,
};
use hookd_core::redact;
use hookd_vault::EndpointKeys;
use serde_json::{Map, Value, json};
use webhook_signature::Secret;

use crate::routes::endpoint::HeadersOut;
use crate::{ApiError, validate};

/// The `type`s hookd serves, as the API names them.
pub(super) const SERVED: [&str; 8] = [
    "pollingEndpoint",
    "fifoEndpoint",
    "rabbitMq",
    "sqs",
    "sns",
    "amazonS3",
    "natsJetStream",
    "kafka",
];

/// The region of an AWS destination given none (Svix's SDKs require one in what they read).
const DEFAULT_REGION: &str = "us-east-1";

/// A `type` and `config` read: the destination to store and what goes with it.
pub(super) struct Parsed {
    pub(super) destination: Destination,
    /// A `fifoEndpoint`'s URL; for the other types, where messages go with secrets masked
    /// (what the delivery log shows as an attempt's URL).
    pub(super) url: String,
    /// A `fifoEndpoint`'s custom headers, if given (credential ones are sealed).
    pub(super) headers: Option<BTreeMap<String, String>>,
    /// A `fifoEndpoint`'s `whsec_` signing secret, if given.
    pub(super) key: Option<Secret>,
    /// Credentials to seal with the keys, by field.
    pub(super) secrets: BTreeMap<String, String>,
}

/// The API name of a destination's type.
pub(super) fn type_name(destination: &Destination) -> &'static str {
    match destination {
        Destination::Http => "http",
        Destination::Fifo => "fifoEndpoint",
        Destination::Polling => "pollingEndpoint",
        other => other.kind(),
    }
}

/// Refuses a `type` hookd does not serve, naming it and the served ones.
pub(super) fn served(kind: &str) -> Result<(), ApiError> {
    if SERVED.contains(&kind) {
        return Ok(());
    }
    Err(ApiError::body_field(
        "type",
        format!(
            "{kind:?} is not a destination type hookd serves; it serves {}",
            SERVED.join(", ")
        ),
    ))
}

/// Reads `config` for a destination of `kind` (one of [`SERVED`]).
pub(super) fn parse(
    kind: &str,
    config: &Map<String, Value>,
    allow_http: bool,
) -> Result<Parsed, ApiError> {
    served(kind)?;
    let fields = Fields(config);
    match kind {
        "pollingEndpoint" => {
            fields.only(&[])?;
            Ok(Parsed::plain(Destination::Polling, String::new()))
        }
        "fifoEndpoint" => fifo(&fields, allow_http),
        "rabbitMq" => rabbit_mq(&fields),
        "sqs" | "sns" | "amazonS3" => aws(kind, &fields),
        "natsJetStream" => nats(&fields),
        _ => kafka(&fields),
    }
}

impl Parsed {
    fn plain(destination: Destination, url: String) -> Self {
        Self {
            destination,
            url,
            headers: None,
            key: None,
            secrets: BTreeMap::new(),
        }
    }
}

fn fifo(fields: &Fields, allow_http: bool) -> Result<Parsed, ApiError> {
    fields.only(&["url", "headers", "key"])?;
    let url = fields.required("url")?;
    validate::endpoint_url("config.url", &url, allow_http)?;
    let headers = match fields.0.get("headers") {
        None | Some(Value::Null) => None,
        Some(value) => {
            let headers: BTreeMap<String, String> =
                serde_json::from_value(value.clone()).map_err(|_| {
                    ApiError::body_field("config.headers", "must map header names to strings")
                })?;
            validate::custom_headers("config.headers", &headers)?;
            Some(headers)
        }
    };
    let key = match fields.text("key")? {
        None => None,
        Some(text) => Some(
            Secret::parse_endpoint(&text)
                .map_err(|e| ApiError::body_field("config.key", e.to_string()))?,
        ),
    };
    Ok(Parsed {
        headers,
        key,
        ..Parsed::plain(Destination::Fifo, url)
    })
}

fn rabbit_mq(fields: &Fields) -> Result<Parsed, ApiError> {
    fields.only(&["uri", "routingKey", "mandatory"])?;
    let uri = fields.required("uri")?;
    broker_url("config.uri", &uri, &["amqp", "amqps"])?;
    let routing_key = fields
        .text("routingKey")?
        .ok_or_else(|| missing("routingKey"))?;
    if routing_key.len() > 255 {
        return Err(ApiError::body_field(
            "config.routingKey",
            "must be at most 255 bytes",
        ));
    }
    one_line("config.routingKey", &routing_key)?;
    let mandatory = match fields.0.get("mandatory") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => {
            return Err(ApiError::body_field(
                "config.mandatory",
                "must be a boolean",
            ));
        }
    };
    let (shown, secrets) = masked(&uri);
    Ok(Parsed {
        secrets,
        ..Parsed::plain(
            Destination::RabbitMq(RabbitMqConfig {
                uri: shown.clone(),
                routing_key,
                mandatory,
            }),
            shown,
        )
    })
}

fn aws(kind: &str, fields: &Fields) -> Result<Parsed, ApiError> {
    let target = match kind {
        "sqs" => "queueUrl",
        "sns" => "topicArn",
        _ => "bucket",
    };
    fields.only(&[
        target,
        "region",
        "accessKeyId",
        "secretAccessKey",
        "endpointUrl",
        "roleArn",
        "externalId",
    ])?;
    for field in ["roleArn", "externalId"] {
        if fields.text(field)?.is_some() {
            return Err(ApiError::body_field(
                &format!("config.{field}"),
                "hookd does not assume AWS roles; give accessKeyId and secretAccessKey",
            ));
        }
    }
    let region = fields
        .text("region")?
        .unwrap_or_else(|| DEFAULT_REGION.to_owned());
    aws_region(&region)?;
    let endpoint_url = fields.text("endpointUrl")?;
    if let Some(url) = &endpoint_url {
        validate::endpoint_url("config.endpointUrl", url, true)?;
    }
    let access_key_id = fields.text("accessKeyId")?;
    let secret = fields.text("secretAccessKey")?;
    match (&access_key_id, &secret) {
        (Some(_), None) => return Err(missing("secretAccessKey")),
        (None, Some(_)) => return Err(missing("accessKeyId")),
        _ => {}
    }
    for (field, value) in [
        ("accessKeyId", &access_key_id),
        ("secretAccessKey", &secret),
    ] {
        if let Some(value) = value {
            credential(field, value)?;
        }
    }
    let name = fields.required(target)?;
    let access = AwsAccess {
        region,
        access_key_id,
        endpoint_url,
    };
    let (destination, url) = match kind {
        "sqs" => {
            validate::endpoint_url("config.queueUrl", &name, true)?;
            let queue_url = name.clone();
            (Destination::Sqs(SqsConfig { queue_url, access }), name)
        }
        "sns" => {
            topic_arn(&name)?;
            let topic_arn = name.clone();
            (Destination::Sns(SnsConfig { topic_arn, access }), name)
        }
        _ => {
            bucket(&name)?;
            let url = format!("s3://{name}");
            let config = AmazonS3Config {
                bucket: name,
                access,
            };
            (Destination::AmazonS3(config), url)
        }
    };
    let secrets = secret
        .map(|s| BTreeMap::from([(SECRET_ACCESS_KEY.to_owned(), s)]))
        .unwrap_or_default();
    Ok(Parsed {
        secrets,
        ..Parsed::plain(destination, url)
    })
}

fn nats(fields: &Fields) -> Result<Parsed, ApiError> {
    fields.only(&["url", "subject"])?;
    let url = fields.required("url")?;
    // `tls://` is refused: the connection is made to the address the SSRF guard checked, and
    // the NATS client would verify the certificate against that address, not the name.
    broker_url("config.url", &url, &["nats"])?;
    let subject = fields.required("subject")?;
    if subject.len() > 256
        || subject
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '*' || c == '>')
        || subject.split('.').any(str::is_empty)
    {
        return Err(ApiError::body_field(
            "config.subject",
            "must be a NATS subject: dot-separated tokens, no white space or wildcards \
             (* and >), at most 256 characters",
        ));
    }
    let (shown, secrets) = masked(&url);
    Ok(Parsed {
        secrets,
        ..Parsed::plain(
            Destination::NatsJetStream(NatsConfig {
                url: shown.clone(),
                subject,
            }),
            shown,
        )
    })
}

fn kafka(fields: &Fields) -> Result<Parsed, ApiError> {
    fields.only(&["bootstrapServers", "topic"])?;
    let field = "config.bootstrapServers";
    let servers: Vec<String> = match fields.0.get("bootstrapServers") {
        None | Some(Value::Null) => return Err(missing("bootstrapServers")),
        Some(value) => serde_json::from_value(value.clone())
            .map_err(|_| ApiError::body_field(field, "must be a list of host:port"))?,
    };
    if servers.is_empty() || servers.len() > 16 {
        return Err(ApiError::body_field(field, "must list 1 to 16 brokers"));
    }
    for server in &servers {
        let port = server
            .rsplit_once(':')
            .map(|(host, port)| (host, port.parse::<u16>()));
        if !matches!(port, Some((host, Ok(_))) if !host.is_empty() && !host.contains(['/', '@', ' ']))
        {
            return Err(ApiError::body_field(
                field,
                format!("{server:?} is not host:port"),
            ));
        }
    }
    let topic = fields.required("topic")?;
    let legal = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if topic.len() > 249 || !topic.chars().all(legal) {
        return Err(ApiError::body_field(
            "config.topic",
            "must be a Kafka topic: at most 249 of a-z, A-Z, 0-9, `.`, `_` and `-`",
        ));
    }
    let url = format!("kafka://{}/{topic}", servers.join(","));
    Ok(Parsed::plain(
        Destination::Kafka(KafkaConfig {
            bootstrap_servers: servers,
            topic,
        }),
        url,
    ))
}

/// The config of a stored destination as the API reads one, its credentials put back: what a
/// PATCH's fields are laid over before the whole is read again.
pub(super) fn as_input(
    destination: &Destination,
    url: &str,
    keys: &EndpointKeys,
) -> Map<String, Value> {
    let mut config = match destination {
        Destination::Fifo => json!({ "url": url }),
        other => stored_json(other),
    };
    let secrets = keys.destination_secrets();
    if let Some(map) = config.as_object_mut() {
        if let Some(uri) = secrets.get(URI_SECRET) {
            let field = match destination {
                Destination::RabbitMq(_) => "uri",
                _ => "url",
            };
            map.insert(field.to_owned(), Value::String(uri.clone()));
        }
        if let Some(secret) = secrets.get(SECRET_ACCESS_KEY) {
            map.insert(SECRET_ACCESS_KEY.to_owned(), Value::String(secret.clone()));
        }
    }
    match config {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// The config as the API shows it: never a credential (a URI's password is masked; a fifo
/// destination's credential headers are named in `sensitive`, their values left out).
pub(super) fn shown(
    destination: &Destination,
    url: &str,
    headers: &BTreeMap<String, String>,
    keys: &EndpointKeys,
) -> Value {
    match destination {
        Destination::Fifo => json!({
            "url": url,
            "headers": HeadersOut {
                headers: headers.clone(),
                sensitive: keys.headers().keys().cloned().collect(),
            },
        }),
        other => stored_json(other),
    }
}

/// The destination's clear configuration as JSON (`{}` for types without one).
fn stored_json(destination: &Destination) -> Value {
    destination.stored_config().map_or_else(
        || json!({}),
        |text| serde_json::from_str(&text).unwrap_or_default(),
    )
}

/// The fields of a `config` object.
struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    /// Refuses a field not in `known`.
    fn only(&self, known: &[&str]) -> Result<(), ApiError> {
        match self.0.keys().find(|k| !known.contains(&k.as_str())) {
            None => Ok(()),
            Some(unknown) => Err(ApiError::body_field(
                &format!("config.{unknown}"),
                if known.is_empty() {
                    "this type takes no configuration".to_owned()
                } else {
                    format!("not a field of this type; its fields: {}", known.join(", "))
                },
            )),
        }
    }

    /// A text field, if given (`null` is not given).
    fn text(&self, field: &str) -> Result<Option<String>, ApiError> {
        match self.0.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(_) => Err(ApiError::body_field(
                &format!("config.{field}"),
                "must be a string",
            )),
        }
    }

    /// A text field that must be given and not be empty.
    fn required(&self, field: &str) -> Result<String, ApiError> {
        match self.text(field)? {
            Some(text) if !text.is_empty() => Ok(text),
            _ => Err(missing(field)),
        }
    }
}

fn missing(field: &str) -> ApiError {
    ApiError::body_field(&format!("config.{field}"), "is required")
}

fn one_line(field: &str, value: &str) -> Result<(), ApiError> {
    hookd_core::validate::one_line(value).map_err(|e| ApiError::body_field(field, e.to_string()))
}

/// A broker's URL: one of `schemes`, with a host.
fn broker_url(field: &str, value: &str, schemes: &[&str]) -> Result<(), ApiError> {
    one_line(field, value)?;
    let url = url::Url::parse(value)
        .map_err(|e| ApiError::body_field(field, format!("not a valid URL: {e}")))?;
    if !schemes.contains(&url.scheme()) {
        return Err(ApiError::body_field(
            field,
            format!("must be a URL of scheme {}", schemes.join(" or ")),
        ));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(ApiError::body_field(field, "must name a host"));
    }
    Ok(())
}

/// `uri` as shown (its password masked), and the credentials to seal: the whole URI when it
/// has a password.
fn masked(uri: &str) -> (String, BTreeMap<String, String>) {
    let has_password = url::Url::parse(uri).is_ok_and(|u| u.password().is_some());
    if has_password {
        let secrets = BTreeMap::from([(URI_SECRET.to_owned(), uri.to_owned())]);
        (redact::url(uri), secrets)
    } else {
        (uri.to_owned(), BTreeMap::new())
    }
}

fn aws_region(region: &str) -> Result<(), ApiError> {
    let legal = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if region.is_empty() || region.len() > 32 || !region.chars().all(legal) {
        return Err(ApiError::body_field(
            "config.region",
            "must be an AWS region such as us-east-1",
        ));
    }
    Ok(())
}

fn credential(field: &str, value: &str) -> Result<(), ApiError> {
    if value.is_empty() || value.len() > 256 || !value.chars().all(|c| c.is_ascii_graphic()) {
        return Err(ApiError::body_field(
            &format!("config.{field}"),
            "must be 1 to 256 printable characters without spaces",
        ));
    }
    Ok(())
}

fn topic_arn(arn: &str) -> Result<(), ApiError> {
    let parts: Vec<&str> = arn.split(':').collect();
    if parts.len() != 6 || parts[0] != "arn" || parts[2] != "sns" || parts[5].is_empty() {
        return Err(ApiError::body_field(
            "config.topicArn",
            "must be an SNS topic ARN: arn:aws:sns:<region>:<account>:<topic>",
        ));
    }
    one_line("config.topicArn", arn)
}

fn bucket(name: &str) -> Result<(), ApiError> {
    let legal = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-';
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if !(3..=63).contains(&name.len())
        || !name.chars().all(legal)
        || !ends(name.chars().next())
        || !ends(name.chars().last())
    {
        return Err(ApiError::body_field(
            "config.bucket",
            "must be an S3 bucket name: 3 to 63 of a-z, 0-9, `.` and `-`, starting and \
             ending with a letter or digit",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    fn refused_field(kind: &str, value: Value) -> Vec<String> {
        match parse(kind, &config(value), true) {
            Err(ApiError::Validation { location, .. }) => location,
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("accepted"),
        }
    }

    #[test]
    fn a_uri_password_is_sealed_and_masked_where_it_is_shown() {
        let parsed = parse(
            "rabbitMq",
            &config(json!({"uri": "amqp://guest:pw@127.0.0.1:5672/%2f", "routingKey": "k"})),
            false,
        )
        .unwrap();
        assert_eq!(
            parsed.secrets.get("uri").map(String::as_str),
            Some("amqp://guest:pw@127.0.0.1:5672/%2f")
        );
        let shown = serde_json::to_string(&parsed.destination.stored_config()).unwrap();
        assert!(!shown.contains("pw@"), "{shown}");
        assert!(!parsed.url.contains("pw@"));
    }

    #[test]
    fn an_aws_secret_is_sealed_and_a_missing_region_is_the_default() {
        let parsed = parse(
            "sqs",
            &config(
                json!({"queueUrl": "http://127.0.0.1:5000/1/q", "accessKeyId": "AK",
                           "secretAccessKey": "SK"}),
            ),
            false,
        )
        .unwrap();
        assert_eq!(parsed.secrets["secretAccessKey"], "SK");
        let stored = parsed.destination.stored_config().unwrap();
        assert!(!stored.contains("SK"), "{stored}");
        assert!(stored.contains("us-east-1"), "{stored}");
    }

    #[test]
    fn a_bad_field_is_refused_by_its_name() {
        let field = |kind, value| refused_field(kind, value).join(".");
        assert_eq!(field("sqs", json!({})), "body.config.queueUrl");
        assert_eq!(
            field("sqs", json!({"queueUrl": "not a url"})),
            "body.config.queueUrl"
        );
        assert_eq!(
            field("rabbitMq", json!({"uri": "http://h/", "routingKey": "k"})),
            "body.config.uri"
        );
        assert_eq!(
            field("rabbitMq", json!({"uri": "amqp://h/"})),
            "body.config.routingKey"
        );
        assert_eq!(
            field("amazonS3", json!({"bucket": "No_Such"})),
            "body.config.bucket"
        );
        assert_eq!(
            field(
                "sns",
                json!({"topicArn": "arn:aws:sns:us-east-1:1:t", "roleArn": "r"})
            ),
            "body.config.roleArn"
        );
        assert_eq!(
            field("kafka", json!({"bootstrapServers": ["h"], "topic": "t"})),
            "body.config.bootstrapServers"
        );
        assert_eq!(field("pollingEndpoint", json!({"x": 1})), "body.config.x");
        assert_eq!(field("bigQuery", json!({})), "body.type");
    }
}
