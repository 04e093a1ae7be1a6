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
    let mut headers = vec![
        ("webhook-id".to_owned(), message.id.to_string()),
        ("webhook-timestamp".to_owned(), timestamp.to_string()),
        ("webhook-signature".to_owned(), signature.clone()),
        ("content-type".to_owned(), "application/json".to_owned()),
    ];
    if svix_headers {
        headers.push(("svix-id".to_owned(), message.id.to_string()));
        headers.push(("svix-timestamp".to_owned(), timestamp.to_string()));
        headers.push(("svix-signature".to_owned(), signature));
    }
    let custom = endpoint.headers.iter().chain(keys.headers());
    headers.extend(custom.map(|(k, v)| (k.clone(), v.clone())));
    let timeout = timeout.clamp(Duration::from_secs(1), Duration::from_secs(30));
    Ok(OutgoingRequest {
        url: endpoint.url.clone(),
        headers,
        body: Bytes::from(body),
        timeout,
    })
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

/// What happened: the outcome, or an error that stopped the request from being made.
pub enum Happened<'a> {
    Sent(&'a SendOutcome),
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
                _ => outcome.response_body.clone(),
            },
            outcome.response_head.clone(),
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
mod tests {
    use std::collections::BTreeMap;

    use hookd_core::model::{Endpoint, Message};
    use std::sync::Arc;

    use hookd_core::{AppId, EndpointId, MessageId};
    use hookd_vault::{EndpointKeys, Keyring, Scheme};
    use webhook_signature::{Secret, Verifier};

    use super::*;

    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    fn keyring() -> &'static Keyring {
        opened_keys().0
    }

    /// The keyring the tests seal with, and the engine's opened keys under it.
    fn opened_keys() -> (&'static Keyring, &'static OpenedKeys) {
        static KEYS: std::sync::OnceLock<(Arc<Keyring>, OpenedKeys)> = std::sync::OnceLock::new();
        let (keyring, opened) = KEYS.get_or_init(|| {
            let keyring = Arc::new(Keyring::ephemeral());
            (keyring.clone(), OpenedKeys::new(keyring))
        });
        (keyring, opened)
    }

    fn claimed(attempt_count: u32) -> ClaimedDelivery {
        let at = Timestamp::from_millis(1_700_000_000_000);
        let message = Message {
            id: MessageId::new(at),
            app_id: AppId::from_stored("app_1".into()),
            event_type: "order.shipped".into(),
            event_id: None,
            channels: None,
            ordering_key: None,
            tags: None,
            deliver_at: None,
            payload: Some(br#"{"orderId": 1003}"#.to_vec()),
            created_at: at,
        };
        let id = EndpointId::new(at);
        let mut keys =
            EndpointKeys::new(&[Scheme::V1], Some(Secret::parse(SECRET).unwrap())).unwrap();
        keys.set_headers(BTreeMap::from([(
            "Authorization".into(),
            "Bearer c".into(),
        )]));
        let keys = keys.seal(keyring(), &id);
        let endpoint = Endpoint {
            id,
            app_id: message.app_id.clone(),
            uid: None,
            url: "https://example.com/hook".into(),
            description: String::new(),
            event_types: None,
            channels: None,
            disabled: false,
            disabled_reason: None,
            disabled_at: None,
            throttle_rate: None,
            timeout_secs: None,
            max_concurrency: None,
            ordering: Default::default(),
            metadata: BTreeMap::new(),
            headers: BTreeMap::from([("X-Tenant".into(), "42".into())]),
            keys,
            created_at: at,
            updated_at: at,
        };
        let delivery = Delivery {
            message_id: message.id.clone(),
            endpoint_id: endpoint.id.clone(),
            status: DeliveryStatus::Sending,
            attempt_count,
            next_attempt_at: Some(at),
            updated_at: at,
            ordering_key: None,
        };
        ClaimedDelivery {
            delivery,
            message,
            endpoint,
            manual: false,
        }
    }

    fn outcome(status: Option<u16>, retry_after: Option<&str>) -> SendOutcome {
        SendOutcome {
            status,
            duration: Duration::from_millis(12),
            response_head: String::new(),
            response_body: "body".into(),
            retry_after: retry_after.map(str::to_owned),
            error: None,
        }
    }

    #[test]
    fn the_request_is_signed_over_the_stored_bytes() {
        let claimed = claimed(0);
        let now = Timestamp::from_millis(1_700_000_123_000);
        let request = request(
            &claimed,
            opened_keys().1,
            now,
            Duration::from_secs(99),
            false,
        )
        .unwrap();
        assert_eq!(&request.body[..], br#"{"orderId": 1003}"#);
        let header = |name: &str| {
            request
                .headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(
            header("webhook-id").as_deref(),
            Some(claimed.message.id.as_str())
        );
        assert_eq!(header("webhook-timestamp").as_deref(), Some("1700000123"));
        assert_eq!(header("content-type").as_deref(), Some("application/json"));
        assert_eq!(header("X-Tenant").as_deref(), Some("42"));
        assert_eq!(
            header("Authorization").as_deref(),
            Some("Bearer c"),
            "sealed headers are sent too"
        );
        assert_eq!(header("svix-id"), None);
        assert_eq!(
            request.timeout,
            Duration::from_secs(30),
            "timeouts are clamped to 30 s"
        );
        let verifier = Verifier::new(Secret::parse(SECRET).unwrap()).now(1_700_000_123);
        let pairs: Vec<_> = request
            .headers
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_str()))
            .collect();
        verifier
            .verify(&request.body, pairs)
            .expect("the signature verifies");
    }

    #[test]
    fn svix_headers_repeat_the_webhook_headers() {
        let request = request(
            &claimed(0),
            opened_keys().1,
            Timestamp::from_millis(0),
            Duration::from_secs(15),
            true,
        )
        .unwrap();
        let header = |name: &str| {
            let mut values = request.headers.iter().filter(|(n, _)| n == name);
            let (_, value) = values.next().unwrap_or_else(|| panic!("no {name}"));
            assert!(values.next().is_none(), "one {name}");
            value.clone()
        };
        for part in ["id", "timestamp", "signature"] {
            assert_eq!(
                header(&format!("svix-{part}")),
                header(&format!("webhook-{part}")),
                "svix-{part}"
            );
        }
    }

    #[test]
    fn success_finishes_the_delivery() {
        let finished = Timestamp::from_millis(1_700_000_001_000);
        let verdict = judge(
            &claimed(0),
            Happened::Sent(&outcome(Some(204), None)),
            finished,
            &RetrySchedule::default(),
            4,
            0.0,
        );
        assert_eq!(verdict.next.status, DeliveryStatus::Success);
        assert_eq!(
            (verdict.next.attempt_count, verdict.next.next_attempt_at),
            (1, None)
        );
        assert_eq!(verdict.attempt.status, DeliveryStatus::Success);
        assert_eq!(verdict.attempt.response_status_code, 204);
        assert_eq!(verdict.disable, None);
    }

    #[test]
    fn failures_follow_the_schedule_until_it_runs_out() {
        let finished = Timestamp::from_millis(1_700_000_001_000);
        let schedule = RetrySchedule::default();
        let first = judge(
            &claimed(0),
            Happened::Sent(&outcome(Some(500), None)),
            finished,
            &schedule,
            4,
            0.0,
        );
        assert_eq!(first.next.status, DeliveryStatus::Pending);
        assert_eq!(
            first.next.next_attempt_at,
            Some(finished.plus(Duration::from_secs(5)))
        );
        let redirect = judge(
            &claimed(1),
            Happened::Sent(&outcome(Some(301), None)),
            finished,
            &schedule,
            4,
            0.0,
        );
        assert_eq!(
            redirect.next.next_attempt_at,
            Some(finished.plus(Duration::from_secs(300)))
        );
        let last = judge(
            &claimed(9),
            Happened::Sent(&outcome(Some(500), None)),
            finished,
            &schedule,
            4,
            0.0,
        );
        assert_eq!(
            (last.next.status, last.next.next_attempt_at),
            (DeliveryStatus::Fail, None)
        );
    }

    #[test]
    fn overload_answers_ask_to_slow_down_for_their_retry_after_or_a_second() {
        let slow_down = |status, retry_after| {
            let outcome = outcome(Some(status), retry_after);
            let finished = Timestamp::from_millis(1_700_000_001_000);
            let schedule = RetrySchedule::default();
            judge(
                &claimed(0),
                Happened::Sent(&outcome),
                finished,
                &schedule,
                4,
                0.0,
            )
            .slow_down
        };
        assert_eq!(slow_down(429, Some("7")), Some(Duration::from_secs(7)));
        assert_eq!(slow_down(503, Some("7")), Some(Duration::from_secs(7)));
        assert_eq!(slow_down(429, Some("3600")), Some(MAX_SLOW_DOWN));
        for status in [429, 502, 503, 504] {
            assert_eq!(slow_down(status, None), Some(SLOW_DOWN), "{status}");
        }
        assert_eq!(
            slow_down(502, Some("7")),
            Some(SLOW_DOWN),
            "Retry-After: 429, 503"
        );
        for status in [200, 400, 500] {
            assert_eq!(slow_down(status, Some("7")), None, "{status}");
        }
    }

    #[test]
    fn retry_after_delays_the_retry_of_any_failed_answer() {
        let finished = Timestamp::from_millis(1_700_000_001_000);
        let schedule = RetrySchedule::default();
        let slow_down = judge(
            &claimed(0),
            Happened::Sent(&outcome(Some(429), Some("120"))),
            finished,
            &schedule,
            4,
            0.0,
        );
        assert_eq!(
            slow_down.next.next_attempt_at,
            Some(finished.plus(Duration::from_secs(120)))
        );
        let failed = judge(
            &claimed(0),
            Happened::Sent(&outcome(Some(500), Some("120"))),
            finished,
            &schedule,
            4,
            0.0,
        );
        assert_eq!(
            failed.next.next_attempt_at,
            Some(finished.plus(Duration::from_secs(120)))
        );
        assert_eq!(failed.slow_down, None, "a 500 does not pause the endpoint");
        let shorter = judge(
            &claimed(2),
            Happened::Sent(&outcome(Some(500), Some("120"))),
            finished,
            &schedule,
            4,
            0.0,
        );
        assert_eq!(
            shorter.next.next_attempt_at,
            Some(finished.plus(Duration::from_secs(1_800))),
            "the schedule wins when it waits longer"
        );
    }

    #[test]
    fn gone_fails_the_delivery_and_disables_the_endpoint() {
        let verdict = judge(
            &claimed(0),
            Happened::Sent(&outcome(Some(410), None)),
            Timestamp::from_millis(0),
            &RetrySchedule::default(),
            4,
            0.0,
        );
        assert_eq!(verdict.next.status, DeliveryStatus::Fail);
        assert!(verdict.disable.unwrap().contains("410"));
    }

    #[test]
    fn the_operator_hears_of_failing_exhausted_and_recovered_deliveries() {
        let notice = |attempts_before: u32, status: u16, manual: bool| {
            let mut claimed = claimed(attempts_before);
            claimed.manual = manual;
            let outcome = outcome(Some(status), None);
            let schedule = RetrySchedule::default();
            let at = Timestamp::from_millis(0);
            judge(&claimed, Happened::Sent(&outcome), at, &schedule, 4, 0.0).notice
        };
        assert_eq!(
            notice(2, 500, false),
            None,
            "three failures are not yet failing"
        );
        assert_eq!(notice(3, 500, false), Some(AttemptEvent::Failing));
        assert_eq!(notice(4, 500, false), None, "failing is told once");
        assert_eq!(notice(9, 500, false), Some(AttemptEvent::Exhausted));
        assert_eq!(notice(0, 410, false), None, "410 disables instead");
        assert_eq!(
            notice(3, 204, false),
            None,
            "not failing yet: nothing recovered"
        );
        assert_eq!(notice(4, 204, false), Some(AttemptEvent::Recovered));
        assert_eq!(notice(4, 204, true), None, "a manual resend is not told");
        let never = judge(
            &claimed(3),
            Happened::Sent(&outcome(Some(500), None)),
            Timestamp::from_millis(0),
            &RetrySchedule::default(),
            0,
            0.0,
        );
        assert_eq!(never.notice, None, "failing_after 0 turns failing off");
    }

    #[test]
    fn an_unsent_attempt_is_a_failure_with_its_reason() {
        let judged = |unsendable: &Unsendable| {
            judge(
                &claimed(0),
                Happened::NotSent(unsendable),
                Timestamp::from_millis(0),
                &RetrySchedule::default(),
                4,
                0.0,
            )
        };
        let keys = judged(&Unsendable::Keys("no key signs now".into()));
        assert_eq!(keys.attempt.response_status_code, 0);
        assert_eq!(
            keys.attempt.response,
            "the endpoint's keys are unusable: no key signs now"
        );
        assert_eq!(keys.next.status, DeliveryStatus::Pending, "retried");

        let expunged = judged(&Unsendable::Expunged);
        assert_eq!(expunged.attempt.response, "the payload was expunged");
        assert_eq!(
            (expunged.next.status, expunged.next.next_attempt_at),
            (DeliveryStatus::Fail, None),
            "nothing to send, now or later"
        );
    }
}
