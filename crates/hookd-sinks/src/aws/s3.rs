//! The `amazonS3` destination: one object per batch, written with `PutObject`.
//!
//! # Object
//! Key: `{key_prefix}{first message id}.jsonl`, for example
//! `app_2pQ…/ep_2pR…/msg_2pS….jsonl` with the prefix `{app id}/{destination id}/`. Message ids
//! sort by creation time, so listing a prefix lists its objects oldest first; and the key
//! depends only on the batch's first message, so a batch that is retried writes the same
//! object again instead of a second one.
//!
//! Body (`application/x-ndjson`): one line per message, in the batch's order:
//! `{"id": "msg_…", "eventType": "…", "timestamp": "<RFC 3339 of webhook-timestamp>",
//! "headers": {"webhook-id": …, "webhook-timestamp": …, "webhook-signature": …},
//! "payload": <the payload JSON, embedded as it was sent>}`. A consumer verifies a line by
//! handing the `payload` text and the `headers` to any Standard Webhooks library. A line break
//! inside a payload (pretty-printed JSON; it can only be whitespace between tokens) becomes a
//! space so that each message stays one line: the same JSON value, but not the bytes that
//! were signed.
//!
//! With `endpointUrl` the object is addressed path-style (`{endpointUrl}/{bucket}/{key}`), as
//! S3-compatible services expect; at AWS, virtual-hosted style
//! (`https://{bucket}.s3.{region}.amazonaws.com/{key}`), or path-style
//! (`https://s3.{region}.amazonaws.com/{bucket}/{key}`) for a bucket name with dots, which
//! AWS's certificate does not cover as a host name. The delivery log shows
//! `{"key": …, "etag": …, "messages": n}`.

use std::collections::BTreeMap;

use async_trait::async_trait;
use reqwest::Method;
use serde::Serialize;
use serde_json::value::RawValue;
use url::Url;

use super::client::{AwsClient, Call};
use super::{AwsAccess, AwsContext};
use crate::{Publication, Published, Sink, SinkError};

/// An `amazonS3` destination's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct S3Config {
    /// The bucket's name.
    pub bucket: String,
    /// What every key starts with; `{app id}/{destination id}/` keeps destinations sharing a
    /// bucket apart.
    pub key_prefix: String,
    /// Region, credentials, and the S3-compatible endpoint if any.
    pub access: AwsAccess,
}

/// Writes each batch of publications to a bucket as one object.
pub struct S3Sink {
    client: AwsClient,
    bucket: String,
    key_prefix: String,
    path_style: bool,
}

/// One line of an object.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Line<'a> {
    id: &'a str,
    event_type: &'a str,
    timestamp: String,
    headers: BTreeMap<&'a str, &'a str>,
    payload: &'a RawValue,
}

impl S3Sink {
    /// A sink for `config`'s bucket, reached through `context`; nothing is sent yet.
    pub fn new(config: S3Config, context: AwsContext) -> Result<Self, SinkError> {
        check_bucket(&config.bucket)?;
        // A dotted name would not match AWS's wildcard certificate as a host name.
        let path_style = config.access.endpoint_url.is_some() || config.bucket.contains('.');
        let bucket = &config.bucket;
        let aws_url = |region: &str| match path_style {
            true => format!("https://s3.{region}.amazonaws.com/"),
            false => format!("https://{bucket}.s3.{region}.amazonaws.com/"),
        };
        let client = AwsClient::new("s3", &config.access, aws_url, context)?;
        Ok(Self {
            client,
            bucket: config.bucket,
            key_prefix: config.key_prefix,
            path_style,
        })
    }

    /// The object's URL for `key`.
    fn object_url(&self, key: &str) -> Url {
        let mut url = self.client.base().clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty();
            if self.path_style {
                path.push(&self.bucket);
            }
            path.extend(key.split('/'));
        }
        url
    }
}

#[async_trait]
impl Sink for S3Sink {
    async fn publish(&self, batch: &[Publication]) -> Result<Published, SinkError> {
        let first = batch
            .first()
            .ok_or_else(|| SinkError::Config("an empty batch makes no object".to_owned()))?;
        let key = format!("{}{}.jsonl", self.key_prefix, first.message_id);
        let call = Call {
            method: Method::PUT,
            url: self.object_url(&key),
            headers: vec![("content-type", "application/x-ndjson".to_owned())],
            body: ndjson(batch)?,
        };
        let answer = self.client.send(call).await?;
        let etag = answer
            .headers
            .get("etag")
            .and_then(|value| value.to_str().ok());
        let summary = serde_json::json!({ "key": key, "etag": etag, "messages": batch.len() });
        Ok(Published {
            summary: summary.to_string(),
        })
    }
}

/// The object's body: a line per publication.
fn ndjson(batch: &[Publication]) -> Result<Vec<u8>, SinkError> {
    let mut body = Vec::new();
    for publication in batch {
        let payload = one_line(publication)?;
        let payload: &RawValue =
            serde_json::from_str(&payload).map_err(|error| SinkError::Rejected {
                code: "InvalidPayload".to_owned(),
                text: format!(
                    "the payload of {} is not JSON: {error}",
                    publication.message_id
                ),
            })?;
        let line = Line {
            id: &publication.message_id,
            event_type: &publication.event_type,
            timestamp: timestamp(publication)?,
            headers: publication
                .headers
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str()))
                .collect(),
            payload,
        };
        serde_json::to_writer(&mut body, &line).expect("a line serialises to memory");
        body.push(b'\n');
    }
    Ok(body)
}

/// The payload's text with its line breaks (JSON whitespace) made spaces.
fn one_line(publication: &Publication) -> Result<String, SinkError> {
    let text = super::payload_text(publication)?;
    Ok(text.replace(['\n', '\r'], " "))
}

/// `webhook-timestamp` as RFC 3339.
fn timestamp(publication: &Publication) -> Result<String, SinkError> {
    let seconds = publication
        .headers
        .iter()
        .find(|(name, _)| name == "webhook-timestamp")
        .and_then(|(_, value)| value.parse::<i64>().ok())
        .ok_or_else(|| {
            SinkError::Config(format!(
                "publication {} has no webhook-timestamp",
                publication.message_id
            ))
        })?;
    Ok(hookd_core::Timestamp::from_millis(seconds.saturating_mul(1000)).to_rfc3339())
}

/// Bucket names go into host names and paths: S3's rules (3 to 63 lowercase letters, digits,
/// dots and hyphens).
fn check_bucket(bucket: &str) -> Result<(), SinkError> {
    let valid = (3..=63).contains(&bucket.len())
        && bucket
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(SinkError::Config(format!(
            "bucket {bucket:?} is not a bucket name (3 to 63 of a-z, 0-9, '.', '-')"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn publication(body: &str) -> Publication {
        Publication {
            message_id: "msg_1".to_owned(),
            event_type: "a.b".to_owned(),
            ordering_key: None,
            body: body.to_owned().into(),
            headers: vec![("webhook-timestamp".to_owned(), "1700000000".to_owned())],
        }
    }

    #[test]
    fn a_payload_with_line_breaks_stays_one_line_of_the_same_value() {
        let payload = "{\r\n  \"a\": \"x\\ny\",\n  \"b\": [1,\n 2]\n}";
        let body = ndjson(&[publication(payload)]).unwrap();
        let text = String::from_utf8(body).unwrap();
        assert_eq!(text.matches('\n').count(), 1, "{text}");
        let line: serde_json::Value = serde_json::from_str(&text).unwrap();
        let sent: serde_json::Value = serde_json::from_str(payload).unwrap();
        assert_eq!(line["payload"], sent);
        assert_eq!(line["timestamp"], "2023-11-14T22:13:20Z");
    }

    #[test]
    fn a_payload_that_is_not_json_is_rejected() {
        let refused = ndjson(&[publication("{not json")]);
        assert!(
            matches!(refused, Err(SinkError::Rejected { code, .. }) if code == "InvalidPayload")
        );
    }
}
