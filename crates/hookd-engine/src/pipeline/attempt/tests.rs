//! The attempt rules, checked as pure functions: the signed request over the stored bytes,
//! and what each outcome means for the delivery, the endpoint and the operator.

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

/// A claimed first delivery (or later: `attempt_count`) of a small order event to an HTTPS
/// endpoint with a custom header and an HMAC key.
pub(crate) fn claimed(attempt_count: u32) -> ClaimedDelivery {
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
    let mut keys = EndpointKeys::new(&[Scheme::V1], Some(Secret::parse(SECRET).unwrap())).unwrap();
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
        destination: Default::default(),
        batch_size: 1,
        max_wait_secs: 0,
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
        let value = request.headers.get(name)?;
        Some(value.to_str().unwrap().to_owned())
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
        .map(|(n, v)| (n.as_str(), v.to_str().unwrap()))
        .collect();
    verifier
        .verify(&request.body, pairs)
        .expect("the signature verifies");
}

/// The request of a first attempt that also carries the `svix-*` headers.
fn with_svix_headers() -> OutgoingRequest {
    request(
        &claimed(0),
        opened_keys().1,
        Timestamp::from_millis(0),
        Duration::from_secs(15),
        true,
    )
    .unwrap()
}

#[test]
fn svix_headers_repeat_the_webhook_headers() {
    let request = with_svix_headers();
    let header = |name: &str| {
        let mut values = request.headers.get_all(name).iter();
        let value = values.next().unwrap_or_else(|| panic!("no {name}"));
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
fn the_headers_go_in_the_order_receivers_have_always_seen() {
    let request = with_svix_headers();
    let names: Vec<&str> = request.headers.keys().map(|n| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "webhook-id",
            "webhook-timestamp",
            "webhook-signature",
            "content-type",
            "svix-id",
            "svix-timestamp",
            "svix-signature",
            "x-tenant",
            "authorization",
        ]
    );
}

#[test]
fn an_invalid_stored_header_makes_the_request_unsendable_as_the_sender_said() {
    let mut claimed = claimed(0);
    claimed
        .endpoint
        .headers
        .insert("bad header".into(), "x".into());
    let refused = request(
        &claimed,
        opened_keys().1,
        Timestamp::from_millis(0),
        Duration::from_secs(15),
        false,
    );
    let error = refused.expect_err("the header is refused");
    assert_eq!(error, Unsendable::Header("bad header".into()));
    assert_eq!(
        error.to_string(),
        r#"request failed: invalid header "bad header""#
    );
}

#[test]
fn success_finishes_the_delivery() {
    let finished = Timestamp::from_millis(1_700_000_001_000);
    let verdict = judge(
        &claimed(0),
        Happened::Sent(outcome(Some(204), None)),
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
        Happened::Sent(outcome(Some(500), None)),
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
        Happened::Sent(outcome(Some(301), None)),
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
        Happened::Sent(outcome(Some(500), None)),
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
            Happened::Sent(outcome),
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
        Happened::Sent(outcome(Some(429), Some("120"))),
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
        Happened::Sent(outcome(Some(500), Some("120"))),
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
        Happened::Sent(outcome(Some(500), Some("120"))),
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
        Happened::Sent(outcome(Some(410), None)),
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
        judge(&claimed, Happened::Sent(outcome), at, &schedule, 4, 0.0).notice
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
        Happened::Sent(outcome(Some(500), None)),
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
