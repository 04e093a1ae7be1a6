//! Reading AWS's answers. Refusals come as JSON (`{"__type": "…#QueueDoesNotExist",
//! "message": …}`, SQS's JSON protocol) or XML (`<Error><Code>…</Code><Message>…</Message>`,
//! SNS, S3, and authentication failures of every service); both become
//! [`SinkError::Rejected`] with AWS's code, and the text says when the refusal is one to wait
//! out (throttling, a server error) rather than one to fix.

use crate::SinkError;

/// Error codes AWS services use for "slow down" (besides HTTP 429).
const THROTTLING_CODES: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "SlowDown",
    "RequestLimitExceeded",
    "KMSThrottlingException",
];

/// How much of an unreadable error body the delivery log keeps.
const RAW_BODY_LIMIT: usize = 200;

/// The refusal in an error answer with HTTP status `status`.
pub(super) fn rejection(status: u16, body: &[u8]) -> SinkError {
    let text = String::from_utf8_lossy(body);
    let (code, message) = json_error(&text)
        .or_else(|| xml_error(&text))
        .unwrap_or_else(|| (format!("HTTP{status}"), raw(&text)));
    let kind = if status == 429 || THROTTLING_CODES.contains(&code.as_str()) {
        ", throttled"
    } else if status >= 500 {
        ", server error"
    } else {
        ""
    };
    SinkError::Rejected {
        text: format!("{message} (HTTP {status}{kind})")
            .trim_start()
            .to_owned(),
        code,
    }
}

/// An acceptance this sink cannot read: `action` answered 2xx without what it always gives.
pub(super) fn unreadable(action: &str, missing: &str) -> SinkError {
    SinkError::Rejected {
        code: "UnreadableReply".to_owned(),
        text: format!("{action} answered without a {missing}"),
    }
}

/// The text of the first `<tag>` element in `xml`, entities decoded.
pub(super) fn xml_text(xml: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let start = xml.find(&open)? + open.len();
    let end = start + xml[start..].find(&format!("</{tag}>"))?;
    Some(unescape(&xml[start..end]))
}

fn json_error(text: &str) -> Option<(String, String)> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let field = |names: &[&str]| {
        names
            .iter()
            .find_map(|name| value.get(name)?.as_str())
            .map(str::to_owned)
    };
    // `com.amazonaws.sqs#QueueDoesNotExist`: the code is after the namespace.
    let code = field(&["__type", "code", "Code"])?;
    let code = code.rsplit('#').next().unwrap_or(&code).to_owned();
    let message = field(&["message", "Message"]).unwrap_or_default();
    Some((code, message))
}

fn xml_error(text: &str) -> Option<(String, String)> {
    let code = xml_text(text, "Code")?;
    Some((code, xml_text(text, "Message").unwrap_or_default()))
}

/// The start of a body that is neither AWS's JSON nor its XML (a proxy's error page).
fn raw(text: &str) -> String {
    let end = text
        .char_indices()
        .nth(RAW_BODY_LIMIT)
        .map_or(text.len(), |(at, _)| at);
    text[..end].trim().to_owned()
}

/// XML's five predefined entities and numeric character references.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let Some(end) = rest.find(';') else { break };
        match entity(&rest[1..end]) {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity(name: &str) -> Option<char> {
    match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        _ => {
            let number = name.strip_prefix('#')?;
            let code = match number.strip_prefix('x') {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => number.parse().ok()?,
            };
            char::from_u32(code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(status: u16, body: &str) -> (String, String) {
        match rejection(status, body.as_bytes()) {
            SinkError::Rejected { code, text } => (code, text),
            other => panic!("not a rejection: {other:?}"),
        }
    }

    #[test]
    fn a_json_refusal_gives_the_code_after_its_namespace() {
        let body = r#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"no queue"}"#;
        assert_eq!(
            rejected(400, body),
            ("QueueDoesNotExist".into(), "no queue (HTTP 400)".into())
        );
    }

    #[test]
    fn an_xml_refusal_gives_its_code_and_decoded_message() {
        let body = "<ErrorResponse><Error><Code>SignatureDoesNotMatch</Code>\
                    <Message>a &amp; b &lt;c&gt; &#x41;</Message></Error></ErrorResponse>";
        assert_eq!(
            rejected(403, body),
            (
                "SignatureDoesNotMatch".into(),
                "a & b <c> A (HTTP 403)".into()
            )
        );
    }

    #[test]
    fn throttling_and_server_errors_say_so() {
        let throttled = r#"{"__type":"ThrottlingException","message":"Rate exceeded"}"#;
        assert_eq!(
            rejected(400, throttled).1,
            "Rate exceeded (HTTP 400, throttled)"
        );
        assert_eq!(rejected(429, "").1, "(HTTP 429, throttled)");
        let slow = "<Error><Code>SlowDown</Code><Message>Reduce</Message></Error>";
        assert_eq!(rejected(503, slow).1, "Reduce (HTTP 503, throttled)");
        let internal = "<Error><Code>InternalError</Code><Message>x</Message></Error>";
        assert_eq!(rejected(500, internal).1, "x (HTTP 500, server error)");
    }

    #[test]
    fn an_unreadable_body_is_kept_short_under_the_status() {
        let page = format!("<html>{}</html>", "x".repeat(500));
        let (code, text) = rejected(502, &page);
        assert_eq!(code, "HTTP502");
        assert!(text.starts_with("<html>xxx") && text.ends_with("(HTTP 502, server error)"));
        assert!(text.len() < 250, "{text}");
    }
}
