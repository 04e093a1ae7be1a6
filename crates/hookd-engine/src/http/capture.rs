//! What the attempt log keeps of a response: a capped head and a capped body prefix.
//!
//! Receivers are untrusted: a response may be endless, huge or trickled. The body is read chunk
//! by chunk and reading stops once the cap is reached; the rest is never read, and dropping the
//! response closes the connection.

use std::pin::pin;

use bytes::Buf;
use http::header::RETRY_AFTER;
use http::{Response, Version};
use http_body::Body;
use http_body_util::BodyExt;
use tokio::time::{Instant, timeout_at};

/// The parts of a response kept for the attempt log and the scheduler.
pub(super) struct Captured {
    pub(super) status: u16,
    pub(super) head: String,
    pub(super) body: String,
    pub(super) retry_after: Option<String>,
}

/// Byte caps on what is kept.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) head_bytes: usize,
    pub(super) body_bytes: usize,
}

/// Reads the status, headers and at most `limits.body_bytes` of the body, until `deadline`. A
/// body that fails or times out part way is kept as far as it was read: the status already
/// answered the attempt.
pub(super) async fn capture<B: Body>(
    response: Response<B>,
    limits: Limits,
    deadline: Instant,
) -> Captured {
    let head = truncate(format_head(&response), limits.head_bytes);
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).into_owned());
    let status = response.status().as_u16();
    let body = read_prefix(response.into_body(), limits.body_bytes, deadline).await;
    Captured {
        status,
        head,
        body: lossy(body),
        retry_after,
    }
}

/// `HTTP/1.1 503 Service Unavailable\r\nname: value\r\n…`, header values decoded lossily.
/// Written piece by piece into a buffer sized for it: the formatting machinery costs more
/// than the copying.
fn format_head<B>(response: &Response<B>) -> String {
    let status = response.status();
    let reason = status.canonical_reason().unwrap_or_default();
    let headers = response.headers();
    let size = headers
        .iter()
        .fold(16 + reason.len(), |size, (name, value)| {
            size + 4 + name.as_str().len() + value.len()
        });
    let mut head = String::with_capacity(size);
    head.push_str(version(response.version()));
    head.push(' ');
    head.push_str(status.as_str());
    head.push(' ');
    head.push_str(reason);
    for (name, value) in headers {
        head.push_str("\r\n");
        head.push_str(name.as_str());
        head.push_str(": ");
        head.push_str(&String::from_utf8_lossy(value.as_bytes()));
    }
    head
}

/// The version as its `Debug` prints it (`HTTP/1.1`), which the attempt log has always shown.
fn version(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_11 => "HTTP/1.1",
        Version::HTTP_2 => "HTTP/2.0",
        Version::HTTP_3 => "HTTP/3.0",
        _ => "HTTP/?",
    }
}

async fn read_prefix<B: Body>(body: B, cap: usize, deadline: Instant) -> Vec<u8> {
    let mut body = pin!(body);
    let mut kept = Vec::new();
    while kept.len() < cap {
        let Ok(Some(Ok(frame))) = timeout_at(deadline, body.frame()).await else {
            break;
        };
        // Trailers carry no body bytes.
        let Ok(mut data) = frame.into_data() else {
            continue;
        };
        while data.has_remaining() && kept.len() < cap {
            let chunk = data.chunk();
            let take = chunk.len().min(cap - kept.len());
            kept.extend_from_slice(&chunk[..take]);
            data.advance(take);
        }
    }
    kept
}

/// `bytes` as text, without a copy when they are valid UTF-8.
fn lossy(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes)
        .unwrap_or_else(|invalid| String::from_utf8_lossy(invalid.as_bytes()).into_owned())
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn truncate_keeps_whole_characters() {
        assert_eq!(truncate("abc".into(), 5), "abc");
        assert_eq!(truncate("abcdef".into(), 3), "abc");
        assert_eq!(truncate("aé".into(), 2), "a");
        assert_eq!(truncate("aé".into(), 3), "aé");
    }
}
