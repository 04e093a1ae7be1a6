//! One attempt, from a claimed delivery to the rows that record it: the signed request, and
//! what the outcome means for the delivery (done, retry when, or failed for good), for the
//! endpoint (disable on `410 Gone`) and for the operator (a `message.attempt.*` operational
//! webhook).
//!
//! Everything here is a pure function of its inputs (the clock reading and the jitter are
//! passed in), so the rules are tested without a network or a database.

use std::time::Duration;

use bytes::Bytes;
use hookd_core::model::{Attempt, Delivery, DeliveryStatus, TriggerType};
use hookd_core::operations::AttemptEvent;
use hookd_core::{AppId, AttemptId, Timestamp};
use hookd_store::ClaimedDelivery;
use hookd_vault::OpenedKeys;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use webhook_signature::header;

use crate::http::{OutgoingRequest, SendOutcome};
use crate::pipeline::schedule::{RetrySchedule, parse_retry_after};

/// Why an attempt could not be made at all; the attempt log shows it as the response.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unsendable {
    /// The message's payload was expunged (or purged) while the delivery was queued.
    #[error("the payload was expunged")]
    Expunged,
    #[error("the endpoint's keys are unusable: {0}")]
    Keys(String),
    #[error("cannot sign: {0}")]
    Sign(String),
    /// A custom header (stored before names and values were checked) is not a valid header;
    /// told as the sender told it when it was the one to find out.
    #[error("request failed: invalid header {0:?}")]
    Header(String),
}

impl Unsendable {
    /// Whether a later attempt could not do better. A payload does not come back, so retrying
    /// would only fail on the schedule for days and hold the endpoint's failure streak open.
    fn is_final(&self) -> bool {
        matches!(self, Self::Expunged)
    }
}

/// The signed POST for a claimed delivery, stamped `now`, allowed `timeout` (clamped to the
/// 1..=30 s hookd accepts). The body is the stored bytes. Every key of the endpoint that signs
/// at `now` adds an entry to the signature: during a rotation's overlap, the old and the new.
/// The endpoint's custom headers follow ours: those kept in clear, then the credential ones
/// sealed with its keys.
pub fn request(
    claimed: &ClaimedDelivery,
    keys: &OpenedKeys,
    now: Timestamp,
    timeout: Duration,
    svix_headers: bool,
) -> Result<OutgoingRequest, Unsendable> {
    let message = &claimed.message;
    let endpoint = &claimed.endpoint;
    let body = message.payload.clone().ok_or(Unsendable::Expunged)?;
    let keys = keys
        .open(&endpoint.id, &endpoint.keys)
        .map_err(|e| Unsendable::Keys(e.to_string()))?;
    let signer = keys
        .signer_at(now)
        .map_err(|e| Unsendable::Keys(e.to_string()))?;
    let timestamp = now.as_secs().max(0) as u64;
    let signature = signer
        .signature(message.id.as_str(), timestamp, &body)
        .map_err(|e| Unsendable::Sign(e.to_string()))?;
    let signed = [
        HeaderValue::from_str(message.id.as_str()).map_err(|_| invalid("webhook-id"))?,
        HeaderValue::from(timestamp),
        HeaderValue::try_from(signature).map_err(|_| invalid("webhook-signature"))?,
    ];
    // Destinations beyond HTTP carry only the signed headers (see `destinations`).
    let custom = (endpoint.destination.is_http())
        .then(|| endpoint.headers.iter().chain(keys.headers()))
        .into_iter()
        .flatten();
    let mut headers = HeaderMap::with_capacity(SENT_HEADERS + custom.clone().count());
    let svix = svix_headers.then(|| SVIX_HEADERS.into_iter().zip(signed.clone()));
    headers.extend(WEBHOOK_HEADERS.into_iter().zip(signed));
    headers.append(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.extend(svix.into_iter().flatten());
    for (name, value) in custom {
        let parsed = HeaderName::from_bytes(name.as_bytes()).ok();
        let header = parsed.zip(HeaderValue::from_str(value).ok());
        let (name, value) = header.ok_or_else(|| invalid(name))?;
        headers.append(name, value);
    }
    let timeout = timeout.clamp(Duration::from_secs(1), Duration::from_secs(30));
    Ok(OutgoingRequest {
        url: endpoint.url.clone(),
        headers,
        body: Bytes::from(body),
        timeout,
    })
}

/// `webhook-id`, `webhook-timestamp` and `webhook-signature`.
const WEBHOOK_HEADERS: [HeaderName; 3] = [
    HeaderName::from_static(header::ID),
    HeaderName::from_static(header::TIMESTAMP),
    HeaderName::from_static(header::SIGNATURE),
];

/// The same three under Svix's names, for receivers that look for those.
const SVIX_HEADERS: [HeaderName; 3] = [
    HeaderName::from_static("svix-id"),
    HeaderName::from_static("svix-timestamp"),
    HeaderName::from_static("svix-signature"),
];

/// The most headers a request has besides the endpoint's: ours, Svix's, and what the sender
/// adds (`traceparent`, `host`, `authorization`, `user-agent`, `accept`); sized once for all.
const SENT_HEADERS: usize = 4 + 3 + 5;

fn invalid(name: &str) -> Unsendable {
    Unsendable::Header(name.to_owned())
}

/// What an attempt's outcome means.
#[derive(Debug, PartialEq)]
pub struct Verdict {
    /// The row for the delivery log.
    pub attempt: Attempt,
    /// The delivery after this attempt.
    pub next: Delivery,
    /// The end of the lease the attempt was made under: the delivery moves to `next` only if
    /// no other claim has taken it since (see [`hookd_store::AttemptRecord::lease`]).
    pub lease: Option<Timestamp>,
    /// The endpoint must be disabled, for this reason.
    pub disable: Option<String>,
    /// The endpoint asked hookd to slow down (429, 502, 503, 504): take no new work for it
    /// for this long (at most [`MAX_SLOW_DOWN`]).
    pub slow_down: Option<Duration>,
    /// The `message.attempt.*` operational webhook this attempt causes, if any.
    pub notice: Option<AttemptEvent>,
    /// Whom the attempt was for, as operational webhooks name them.
    pub app_id: AppId,
    pub endpoint_uid: Option<String>,
    pub msg_event_id: Option<String>,
}

/// How long an endpoint that asks hookd to slow down gets no new work when it does not say
/// (`Retry-After`).
pub const SLOW_DOWN: Duration = Duration::from_secs(1);

/// The longest an endpoint asking to slow down gets no new work, whatever its `Retry-After`
/// (the delivery that was told waits for that on its own schedule).
pub const MAX_SLOW_DOWN: Duration = Duration::from_secs(60);

/// What happened: the outcome (its response moves into the attempt row), or an error that
/// stopped the request from being made.
pub enum Happened<'a> {
    Sent(SendOutcome),
    NotSent(&'a Unsendable),
}

/// Turns an attempt's result into the attempt row, the delivery's next state, whether the
/// endpoint is gone and what the operator is told. `jitter` in `[0, 1)` spreads the retry;
/// `failing_after` failed attempts in a row make a delivery "failing" (0: never).
pub fn judge(
    claimed: &ClaimedDelivery,
    happened: Happened<'_>,
    finished: Timestamp,
    schedule: &RetrySchedule,
    failing_after: u32,
    jitter: f64,
) -> Verdict {
    let hopeless = matches!(happened, Happened::NotSent(error) if error.is_final());
    let (status_code, response, response_head, duration, retry_after) = match happened {
        Happened::Sent(outcome) => (
            outcome.status,
            match &outcome.error {
                Some(error) if outcome.status.is_none() => error.to_string(),
                _ => outcome.response_body,
            },
            outcome.response_head,
            outcome.duration,
            outcome
                .retry_after
                .as_deref()
                .and_then(|v| parse_retry_after(v, finished)),
        ),
        Happened::NotSent(error) => (None, error.to_string(), String::new(), Duration::ZERO, None),
    };
    let succeeded = status_code.is_some_and(|s| (200..300).contains(&s));
    let attempts_made = claimed.delivery.attempt_count + 1;
    let gone = status_code == Some(410);
    // Any failed answer may ask for a later retry; only overload answers pause the endpoint,
    // and only 429 and 503 say for how long.
    let pause = retry_after.filter(|_| matches!(status_code, Some(429 | 503)));
    let slow_down = matches!(status_code, Some(429 | 502 | 503 | 504))
        .then(|| pause.unwrap_or(SLOW_DOWN).min(MAX_SLOW_DOWN));
    let (status, next_attempt_at) = if succeeded {
        (DeliveryStatus::Success, None)
    } else if gone || hopeless {
        (DeliveryStatus::Fail, None)
    } else {
        match schedule.next_delay(attempts_made, jitter, retry_after) {
            Some(delay) => (DeliveryStatus::Pending, Some(finished.plus(delay))),
            None => (DeliveryStatus::Fail, None),
        }
    };
    let attempt = Attempt {
        id: AttemptId::new(finished),
        message_id: claimed.message.id.clone(),
        endpoint_id: claimed.endpoint.id.clone(),
        url: claimed.endpoint.url.clone(),
        response_status_code: status_code.map_or(0, |s| s as i16),
        response,
        response_head,
        response_duration_ms: duration.as_millis() as i64,
        status: if succeeded {
            DeliveryStatus::Success
        } else {
            DeliveryStatus::Fail
        },
        trigger_type: if claimed.manual {
            TriggerType::Manual
        } else {
            TriggerType::Scheduled
        },
        created_at: finished,
    };
    let next = Delivery {
        status,
        attempt_count: attempts_made,
        next_attempt_at,
        updated_at: finished,
        ..claimed.delivery.clone()
    };
    let disable = gone.then(|| "the endpoint answered 410 Gone".to_owned());
    let notice = notice(claimed, &next, gone, failing_after);
    Verdict {
        attempt,
        next,
        lease: claimed.delivery.next_attempt_at,
        disable,
        slow_down,
        notice,
        app_id: claimed.endpoint.app_id.clone(),
        endpoint_uid: claimed.endpoint.uid.clone(),
        msg_event_id: claimed.message.event_id.clone(),
    }
}

/// Svix's rules for `message.attempt.*`, per message and endpoint: `exhausted` when the
/// schedule runs out (not on 410, which disables the endpoint instead); `failing` once, on the
/// `failing_after`-th failure while retries go on; `recovered` on a scheduled success after
/// that (a manual resend's success is the operator's own doing and not told).
fn notice(
    claimed: &ClaimedDelivery,
    next: &Delivery,
    gone: bool,
    failing_after: u32,
) -> Option<AttemptEvent> {
    let told_failing = failing_after > 0;
    match next.status {
        DeliveryStatus::Fail if !gone => Some(AttemptEvent::Exhausted),
        DeliveryStatus::Pending if told_failing && next.attempt_count == failing_after => {
            Some(AttemptEvent::Failing)
        }
        DeliveryStatus::Success
            if told_failing
                && !claimed.manual
                && claimed.delivery.attempt_count >= failing_after =>
        {
            Some(AttemptEvent::Recovered)
        }
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests;
