//! Request extractors that turn every kind of bad input into a precise [`ApiError`].
//!
//! axum's own `Json` and `Query` answer rejections in plain text and without the failing
//! field's path; these answer in hookd's error shape and name the field (via
//! `serde_path_to_error`), so a caller always learns what to fix.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::ApiError;

/// A JSON body deserialized into `T`.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(body_rejection)?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// Parses `bytes` as `T`: 400 for text that is not JSON, 422 naming the field otherwise.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    // Tracking the path costs every parse; only a body that fails needs it, to name the field.
    serde_json::from_slice(bytes).or_else(|_| parse_json_tracking_path(bytes))
}

fn parse_json_tracking_path<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(json_error)?;
    deserializer
        .end()
        .map_err(|e| ApiError::BadRequest(format!("malformed JSON body: {e}")))?;
    Ok(value)
}

fn json_error(error: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let inner = error.inner();
    if !inner.is_data() {
        return ApiError::BadRequest(format!("malformed JSON body: {inner}"));
    }
    let mut field = error.path().to_string();
    let message = inner.to_string();
    // "missing field `url`" is reported at the parent; name the field itself.
    if let Some(missing) = message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split('`').next())
    {
        field = if field == "." {
            missing.to_owned()
        } else {
            format!("{field}.{missing}")
        };
    }
    let message = message
        .split(" at line ")
        .next()
        .unwrap_or_default()
        .to_owned();
    ApiError::body_field(field.trim_start_matches('.'), message)
}

fn body_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::PayloadTooLarge("the request body is larger than this server accepts".into())
    } else {
        ApiError::BadRequest(rejection.body_text())
    }
}

/// The query string as name/value pairs; names may repeat (`event_types=a&event_types=b`).
pub struct QueryParams(Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        serde_urlencoded::from_str(query)
            .map(QueryParams)
            .map_err(|e| ApiError::BadRequest(format!("malformed query string: {e}")))
    }
}

impl QueryParams {
    /// The last value given for `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, with comma-separated lists split (the SDKs send both forms).
    pub fn list(&self, name: &str) -> Option<Vec<String>> {
        let values: Vec<String> = self
            .0
            .iter()
            .filter(|(n, _)| n == name || n.strip_suffix("[]") == Some(name))
            .flat_map(|(_, v)| v.split(','))
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .collect();
        (!values.is_empty()).then_some(values)
    }

    /// `name` parsed as a `T`, or a 422 naming it.
    pub fn parse<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, ApiError> {
        self.get(name)
            .map(|v| {
                v.parse()
                    .map_err(|_| ApiError::query_param(name, format!("{v:?} is not a valid value")))
            })
            .transpose()
    }

    /// `name` as an RFC 3339 timestamp.
    pub fn timestamp(&self, name: &str) -> Result<Option<hookd_core::Timestamp>, ApiError> {
        self.get(name)
            .map(|v| {
                hookd_core::Timestamp::parse_rfc3339(v)
                    .map_err(|e| ApiError::query_param(name, e.to_string()))
            })
            .transpose()
    }

    /// `name` as a delivery status code (Svix's `MessageStatus`: 0 success, 1 pending, 2 fail,
    /// 3 sending).
    pub fn delivery_status(
        &self,
        name: &str,
    ) -> Result<Option<hookd_core::model::DeliveryStatus>, ApiError> {
        match self.parse::<i64>(name)? {
            Some(code @ 0..=3) => Ok(Some(hookd_core::model::DeliveryStatus::from_code(code))),
            Some(_) => Err(ApiError::query_param(name, "must be 0, 1, 2 or 3")),
            None => Ok(None),
        }
    }

    /// `name` as a boolean (`true`/`false`), defaulting to `default`.
    pub fn flag(&self, name: &str, default: bool) -> Result<bool, ApiError> {
        Ok(self.parse(name)?.unwrap_or(default))
    }
}

/// `Option<Option<T>>` for PATCH bodies: absent (`None`), `null` (`Some(None)`) or a value.
pub fn patch_field<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    serde::Deserialize::deserialize(deserializer).map(Some)
}

/// Metadata, refusing control characters in keys and values (metadata is shown in the portal
/// and logs as one line each), and a `notifyEmail` that is not an e-mail address (it is where
/// hookd's e-mail notices go: a typo there would lose them silently).
pub fn metadata<'de, D>(deserializer: D) -> Result<hookd_core::model::Metadata, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let metadata: hookd_core::model::Metadata = serde::Deserialize::deserialize(deserializer)?;
    for (key, value) in &metadata {
        let refused = |what: &str, e: hookd_core::validate::ControlCharacter| -> D::Error {
            serde::de::Error::custom(format!("{what} {key:?}: {e}"))
        };
        hookd_core::validate::one_line(key).map_err(|e| refused("key", e))?;
        hookd_core::validate::one_line(value).map_err(|e| refused("the value of", e))?;
    }
    match metadata.get(hookd_core::model::NOTIFY_EMAIL) {
        Some(address) if !is_email_address(address) => Err(serde::de::Error::custom(format!(
            "{} {address:?} is not an e-mail address",
            hookd_core::model::NOTIFY_EMAIL
        ))),
        _ => Ok(metadata),
    }
}

/// [`metadata`] for PATCH bodies, where it may be absent.
pub fn metadata_patch<'de, D>(
    deserializer: D,
) -> Result<Option<hookd_core::model::Metadata>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    metadata(deserializer).map(Some)
}

/// `local@domain.tld`, as a mail server would take it: one `@`, no spaces or controls, a
/// dotted domain, within SMTP's lengths.
fn is_email_address(text: &str) -> bool {
    let Some((local, domain)) = text.split_once('@') else {
        return false;
    };
    let plain = |part: &str| {
        !part.is_empty()
            && !part
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == '@')
    };
    plain(local)
        && plain(domain)
        && local.len() <= 64
        && text.len() <= 254
        && domain.split('.').count() >= 2
        && domain.split('.').all(|label| !label.is_empty())
}

#[cfg(test)]
mod email_tests {
    use super::is_email_address;

    #[test]
    fn addresses_are_told_from_typos() {
        for good in ["ops@example.com", "a.b+tag@mail.example.co.uk"] {
            assert!(is_email_address(good), "{good}");
        }
        for bad in [
            "",
            "ops",
            "ops@",
            "@example.com",
            "ops@example",
            "o ps@example.com",
            "a@b@c.d",
            "ops@example..com",
        ] {
            assert!(!is_email_address(bad), "{bad}");
        }
    }
}
