//! `generic-webhook`: no signature. Svix's model has no fields; hookd adds two optional checks
//! to its `config`: HTTP basic auth (`basicAuth: {username, password}`) and a required API-key
//! header (`apiKey: {header, value}`). Both are compared in constant time.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::body::Envelope;
use crate::fields::Fields;
use crate::request::RejectReason;
use crate::{Accepted, ConfigError, InboundRequest, Rejection};

/// The header a sender may put its own id for the event in.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

#[derive(Debug, Clone, Default)]
pub(crate) struct Generic {
    basic_auth: Option<BasicAuth>,
    api_key: Option<ApiKey>,
}

#[derive(Debug, Clone)]
struct BasicAuth {
    username: String,
    password: String,
}

#[derive(Debug, Clone)]
struct ApiKey {
    header: http::HeaderName,
    value: String,
}

impl Generic {
    /// `config`: absent, `null` or an object with optional `basicAuth` and `apiKey`.
    pub(crate) fn parse(config: &Value) -> Result<Self, ConfigError> {
        if config.is_null() {
            return Ok(Self::default());
        }
        let fields = Fields::new("config", config, &["basicAuth", "apiKey"])?;
        let basic_auth = fields
            .optional_object("basicAuth", &["username", "password"])?
            .map(|auth| BasicAuth::parse(&auth))
            .transpose()?;
        let api_key = fields
            .optional_object("apiKey", &["header", "value"])?
            .map(|key| ApiKey::parse(&key))
            .transpose()?;
        Ok(Self {
            basic_auth,
            api_key,
        })
    }

    /// The credentials required, without their secret halves.
    pub(crate) fn out(&self) -> Value {
        self.to_json(false)
    }

    pub(crate) fn stored(&self) -> Value {
        self.to_json(true)
    }

    fn to_json(&self, with_secrets: bool) -> Value {
        let mut config = Map::new();
        if let Some(auth) = &self.basic_auth {
            let mut value = json!({ "username": auth.username });
            if with_secrets {
                value["password"] = json!(auth.password);
            }
            config.insert("basicAuth".to_owned(), value);
        }
        if let Some(key) = &self.api_key {
            let mut value = json!({ "header": key.header.as_str() });
            if with_secrets {
                value["value"] = json!(key.value);
            }
            config.insert("apiKey".to_owned(), value);
        }
        Value::Object(config)
    }

    pub(crate) fn verify(
        &self,
        req: &InboundRequest<'_>,
        kind: &str,
    ) -> Result<Accepted, Rejection> {
        if let Some(auth) = &self.basic_auth {
            auth.check(req)?;
        }
        if let Some(key) = &self.api_key {
            key.check(req)?;
        }
        Ok(Accepted::event(
            req.header(IDEMPOTENCY_KEY)?,
            Envelope::read(req.body).kind(),
            kind,
        ))
    }
}

impl BasicAuth {
    fn parse(fields: &Fields<'_>) -> Result<Self, ConfigError> {
        let username = fields.secret("username")?;
        if username.contains(':') {
            return Err(ConfigError::new(
                "config.basicAuth.username",
                "must not contain ':' (basic auth separates it from the password with one)",
            ));
        }
        Ok(Self {
            username,
            password: fields.secret("password")?,
        })
    }

    fn check(&self, req: &InboundRequest<'_>) -> Result<(), Rejection> {
        let value = req
            .headers
            .get(http::header::AUTHORIZATION)
            .ok_or_else(|| unauthorized("missing header authorization"))?;
        let credentials = value
            .as_bytes()
            .split_at_checked(6)
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case(b"basic "))
            .and_then(|(_, encoded)| STANDARD.decode(encoded.trim_ascii()).ok())
            .ok_or_else(|| unauthorized("authorization is not Basic <base64>"))?;
        let (username, password) = match credentials.iter().position(|&b| b == b':') {
            Some(at) => (&credentials[..at], &credentials[at + 1..]),
            None => (&credentials[..], &b""[..]),
        };
        // Both halves are always compared, so the time taken says nothing of which was wrong.
        let same = same_secret(&self.username, username) & same_secret(&self.password, password);
        if same {
            Ok(())
        } else {
            Err(unauthorized("wrong basic-auth credentials"))
        }
    }
}

impl ApiKey {
    fn parse(fields: &Fields<'_>) -> Result<Self, ConfigError> {
        let header = fields.secret("header")?;
        let header = http::HeaderName::try_from(header.as_str()).map_err(|_| {
            ConfigError::new("config.apiKey.header", "must be a valid HTTP header name")
        })?;
        Ok(Self {
            header,
            value: fields.secret("value")?,
        })
    }

    fn check(&self, req: &InboundRequest<'_>) -> Result<(), Rejection> {
        let given = req
            .headers
            .get(&self.header)
            .ok_or_else(|| unauthorized(format!("missing header {}", self.header)))?;
        if same_secret(&self.value, given.as_bytes()) {
            Ok(())
        } else {
            Err(unauthorized(format!("wrong API key in {}", self.header)))
        }
    }
}

fn unauthorized(detail: impl Into<String>) -> Rejection {
    Rejection::new(RejectReason::Unauthorized, detail)
}

/// Whether `given` is `expected`, comparing digests so the time taken depends on neither the
/// contents nor the lengths.
fn same_secret(expected: &str, given: &[u8]) -> bool {
    let (expected, given) = (Sha256::digest(expected.as_bytes()), Sha256::digest(given));
    expected.as_slice().ct_eq(given.as_slice()).into()
}
