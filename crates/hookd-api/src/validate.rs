//! Field checks shared by the resource routes; each failure names its field.

use std::collections::BTreeMap;

use axum::http::HeaderName;
use hookd_core::{Timestamp, validate};

use crate::ApiError;

/// A `since` and optional `until` RFC 3339 range, `until` later than `since`.
pub fn time_range(
    since: &str,
    until: Option<&str>,
) -> Result<(Timestamp, Option<Timestamp>), ApiError> {
    let since = time("since", since)?;
    let until = until.map(|until| later_than(since, until)).transpose()?;
    Ok((since, until))
}

/// A `since` and `until` RFC 3339 range, `until` later than `since`.
pub fn closed_time_range(since: &str, until: &str) -> Result<(Timestamp, Timestamp), ApiError> {
    let since = time("since", since)?;
    Ok((since, later_than(since, until)?))
}

/// An `until` later than `since`.
fn later_than(since: Timestamp, until: &str) -> Result<Timestamp, ApiError> {
    let until = time("until", until)?;
    if until <= since {
        return Err(ApiError::body_field("until", "must be later than `since`"));
    }
    Ok(until)
}

/// An RFC 3339 time.
fn time(field: &str, value: &str) -> Result<Timestamp, ApiError> {
    Timestamp::parse_rfc3339(value).map_err(|e| ApiError::body_field(field, e.to_string()))
}

/// An optional uid (or event id) field.
pub fn uid(field: &str, value: Option<&str>) -> Result<(), ApiError> {
    value.map_or(Ok(()), |v| name(field, v))
}

/// A uid, event id or event-type name.
pub fn name(field: &str, value: &str) -> Result<(), ApiError> {
    validate::name(value).map_err(|e| ApiError::body_field(field, e.to_string()))
}

/// A non-empty line of human-readable text (a name) of at most `max` characters.
pub fn text(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::body_field(field, "must not be empty"));
    }
    line(field, value, max)
}

/// A line of human-readable text of at most `max` characters, possibly empty (an endpoint's
/// description): no control characters, line breaks and TAB included.
pub fn line(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    at_most(field, value, max)?;
    validate::one_line(value).map_err(|e| ApiError::body_field(field, e.to_string()))
}

/// Non-empty documentation (an event type's description) of at most `max` characters: line
/// breaks and TAB allowed, as in the Markdown an OpenAPI document carries; other control
/// characters not.
pub fn documentation(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.trim().is_empty() {
        return Err(ApiError::body_field(field, "must not be empty"));
    }
    at_most(field, value, max)?;
    validate::multi_line(value).map_err(|e| ApiError::body_field(field, e.to_string()))
}

fn at_most(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.chars().count() > max {
        return Err(ApiError::body_field(
            field,
            format!("must be at most {max} characters"),
        ));
    }
    Ok(())
}

/// An endpoint's `ordering`: `perKey` or `strict`.
pub fn ordering(value: &str) -> Result<hookd_core::model::Ordering, ApiError> {
    hookd_core::model::Ordering::parse(value)
        .ok_or_else(|| ApiError::body_field("ordering", "must be perKey or strict"))
}

/// An optional list of event-type names.
pub fn event_types(field: &str, values: Option<&[String]>) -> Result<(), ApiError> {
    for value in values.unwrap_or_default() {
        name(field, value)?;
    }
    Ok(())
}

/// An optional list of at most 10 channels.
pub fn channels(field: &str, values: Option<&[String]>) -> Result<(), ApiError> {
    short_list(field, values, 10, "channels", validate::channel)
}

/// A message's tags: at most 5, each a valid tag.
pub fn tags(field: &str, values: Option<&[String]>) -> Result<(), ApiError> {
    short_list(field, values, 5, "tags", validate::tag)
}

/// An optional list of at most `max` `items`, each passing `check`.
fn short_list(
    field: &str,
    values: Option<&[String]>,
    max: usize,
    items: &str,
    check: fn(&str) -> Result<(), validate::NameError>,
) -> Result<(), ApiError> {
    let values = values.unwrap_or_default();
    if values.len() > max {
        return Err(ApiError::body_field(
            field,
            format!("at most {max} {items}"),
        ));
    }
    for value in values {
        check(value).map_err(|e| ApiError::body_field(field, e.to_string()))?;
    }
    Ok(())
}

/// An endpoint URL: http(s) with a host, no credentials, https unless plain http is allowed;
/// stored as sent, so nothing the URL parser would quietly drop or rewrite is taken (white
/// space and control characters, which it strips or removes; `\`, which it reads as `/`).
pub fn endpoint_url(field: &str, value: &str, allow_http: bool) -> Result<(), ApiError> {
    let invalid = |why: &str| ApiError::body_field(field, why.to_owned());
    if value.len() > 65_536 {
        return Err(invalid("must be at most 65536 characters"));
    }
    validate::one_line(value).map_err(|e| invalid(&e.to_string()))?;
    if value.contains(char::is_whitespace) {
        return Err(invalid(
            "must not contain white space (write a space as %20)",
        ));
    }
    if value.contains('\\') {
        return Err(invalid("must not contain `\\` (write it as %5C)"));
    }
    let url = url::Url::parse(value).map_err(|e| invalid(&format!("not a valid URL: {e}")))?;
    match url.scheme() {
        "https" => {}
        "http" if allow_http => {}
        "http" => {
            return Err(invalid(
                "must use https (this server does not allow plain http)",
            ));
        }
        _ => return Err(invalid("must be an http or https URL")),
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(invalid("must name a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("must not contain credentials"));
    }
    Ok(())
}

/// An optional per-endpoint attempt timeout: 1 to 30 seconds (the delivery rules' ceiling).
pub fn timeout_seconds(field: &str, value: Option<u16>) -> Result<(), ApiError> {
    match value {
        Some(1..=30) | None => Ok(()),
        Some(_) => Err(ApiError::body_field(
            field,
            "must be between 1 and 30 seconds",
        )),
    }
}

/// An optional per-endpoint ceiling on attempts in flight: 1 to 1000.
pub fn max_concurrency(field: &str, value: Option<u16>) -> Result<(), ApiError> {
    match value {
        Some(1..=1000) | None => Ok(()),
        Some(_) => Err(ApiError::body_field(field, "must be between 1 and 1000")),
    }
}

/// A rate limit given on create or replace: at least one delivery per second, as Svix's
/// `EndpointIn`, `EndpointUpdate` and `ApplicationIn` say. (A `PATCH` may send 0, as Svix's
/// patch schemas allow; hookd reads a rate of 0 as no limit.)
pub fn throttle_rate(field: &str, value: Option<u16>) -> Result<(), ApiError> {
    match value {
        Some(0) => Err(ApiError::body_field(
            field,
            "must be at least 1 (deliveries per second); leave it out for no limit",
        )),
        _ => Ok(()),
    }
}

/// Names hookd sets itself or that HTTP reserves for the connection.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "user-agent",
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
];

/// Custom endpoint headers: valid HTTP, and none that collide with what hookd sends.
pub fn custom_headers(field: &str, headers: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if headers.len() > 20 {
        return Err(ApiError::body_field(field, "at most 20 custom headers"));
    }
    for (name, value) in headers {
        let at = format!("{field}.{name}");
        let parsed = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ApiError::body_field(&at, "not a valid header name"))?;
        let lower = parsed.as_str();
        if RESERVED_HEADERS.contains(&lower)
            || lower.starts_with("webhook-")
            || lower.starts_with("svix-")
        {
            return Err(ApiError::body_field(
                &at,
                format!("{lower} is set by hookd and cannot be overridden"),
            ));
        }
        axum::http::HeaderValue::from_str(value)
            .map_err(|_| ApiError::body_field(&at, "not a valid header value"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_urls_must_be_http_with_host_and_no_credentials() {
        assert!(endpoint_url("url", "https://example.com/hook", false).is_ok());
        assert!(endpoint_url("url", "http://example.com/hook", false).is_err());
        assert!(endpoint_url("url", "http://example.com/hook", true).is_ok());
        assert!(endpoint_url("url", "ftp://example.com", true).is_err());
        assert!(endpoint_url("url", "https://user:pw@example.com", true).is_err());
        assert!(endpoint_url("url", "not a url", true).is_err());
    }

    #[test]
    fn endpoint_urls_the_parser_would_rewrite_are_refused() {
        for (url, why) in [
            ("https://example.com/a\r\nb", "U+000D"),
            ("https://example.com/\tx", "U+0009"),
            ("\u{1}https://example.com/", "U+0001"),
            ("https://example.com/\u{202E}", "U+202E"),
            ("https://example.com/a b", "white space"),
            (" https://example.com/", "white space"),
            ("https://example.com/\u{3000}", "white space"),
            ("https://evil.example\\@good.example/", "%5C"),
        ] {
            let refused = endpoint_url("url", url, true).unwrap_err();
            let body = refused.to_string();
            assert!(body.contains(why), "{url:?}: {body}");
        }
        assert!(endpoint_url("url", "https://example.com/a%20b?q=%0A", false).is_ok());
    }

    #[test]
    fn text_fields_refuse_control_characters() {
        assert!(text("name", "Acme Café", 256).is_ok());
        assert!(text("name", "Acme\nDear customer", 256).is_err());
        assert!(text("name", "tab\tname", 256).is_err());
        assert!(line("description", "", 256).is_ok());
        assert!(line("description", "\u{85}", 256).is_err());
        assert!(documentation("description", "# Title\n\n\tbody\r\n", 256).is_ok());
        assert!(documentation("description", "bell\u{7}", 256).is_err());
        assert!(documentation("description", " \n", 256).is_err());
    }

    #[test]
    fn headers_that_collide_with_ours_are_refused() {
        for name in [
            "Webhook-Signature",
            "svix-id",
            "Host",
            "Content-Type",
            "Transfer-Encoding",
        ] {
            let headers = BTreeMap::from([(name.to_owned(), "x".to_owned())]);
            assert!(
                custom_headers("headers", &headers).is_err(),
                "{name} should be refused"
            );
        }
        let fine = BTreeMap::from([("X-Tenant".to_owned(), "42".to_owned())]);
        assert!(custom_headers("headers", &fine).is_ok());
    }
}
