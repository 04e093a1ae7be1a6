//! Each scheme on fixed vectors (the project's signature reference and Slack's documented
//! example): accepted with the provider's event id and type, and each kind of bad request
//! refused with its reason.

use hookd_ingest::{Accepted, InboundRequest, RejectReason, Rejection, SourceConfig};
use serde_json::{Value, json};
use webhook_signature::{Secret, Signer, SigningKey};

const SECRET_1: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const ID_1: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TS_1: i64 = 1614265330;
const BODY_1: &[u8] = br#"{"test": 2432232314}"#;
const SIG_1: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
const STRIPE_1: &str =
    "t=1614265330,v1=2e37df5d4a028c51a7f3133d64ae1e300d2c2c900f1b1d49d4369ad2530f8964";
const GITHUB_SECRET: &str = "It's a Secret to Everybody";
const GITHUB_SIG: &str = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
const SHOPIFY_BODY: &[u8] = br#"{"id":820982911946154508,"email":"jon@doe.ca"}"#;
const SHOPIFY_SIG: &str = "fp5HwmAHEVGQQwJU1KRpk57Ts2YHF6/TLOCczCtB5bs=";
const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const SLACK_TS: i64 = 1531420618;
const SLACK_BODY: &[u8] = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
const SLACK_SIG: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

fn source(kind: &str, config: Value) -> SourceConfig {
    SourceConfig::parse(kind, &config).unwrap()
}

fn check(
    source: &SourceConfig,
    headers: &[(&str, &str)],
    body: &[u8],
    now: i64,
) -> Result<Accepted, Rejection> {
    let headers = headers
        .iter()
        .map(|(name, value)| (name.parse().unwrap(), value.parse().unwrap()))
        .collect();
    source.verify(&InboundRequest {
        headers: &headers,
        body,
        now,
    })
}

fn event(id: Option<&str>, kind: &str) -> Result<Accepted, Rejection> {
    Ok(Accepted::Event {
        event_id: id.map(str::to_owned),
        event_type: kind.to_owned(),
    })
}

fn reason(result: Result<Accepted, Rejection>) -> RejectReason {
    result.expect_err("refused").reason
}

#[test]
fn standard_webhooks_vector_under_both_header_namings() {
    let svix = source("svix", json!({"secret": SECRET_1}));
    for prefix in ["webhook", "Svix"] {
        let headers = [
            (format!("{prefix}-id"), ID_1),
            (format!("{prefix}-timestamp"), "1614265330"),
            (format!("{prefix}-signature"), SIG_1),
        ];
        let headers: Vec<_> = headers.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        assert_eq!(
            check(&svix, &headers, BODY_1, TS_1),
            event(Some(ID_1), "svix")
        );
    }
}

#[test]
fn standard_webhooks_type_comes_from_the_body_and_v1a_verifies() {
    let body = br#"{"type":"user.created","data":{}}"#;
    let headers = Signer::new([SigningKey::parse(SECRET_1).unwrap()])
        .headers("msg_2", 1_700_000_000, body)
        .unwrap();
    let clerk = source("clerk", json!({"secret": SECRET_1}));
    assert_eq!(
        check(&clerk, &headers.pairs(), body, 1_700_000_000),
        event(Some("msg_2"), "user.created")
    );

    let whsk = "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";
    let whpk = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=";
    let v1a = "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==";
    let resend = source("resend", json!({"secret": whpk}));
    let headers = [
        ("webhook-id", ID_1),
        ("webhook-timestamp", "1614265330"),
        ("webhook-signature", v1a),
    ];
    assert_eq!(
        check(&resend, &headers, BODY_1, TS_1),
        event(Some(ID_1), "resend")
    );
    let from_secret_key = source("resend", json!({"secret": whsk}));
    assert!(check(&from_secret_key, &headers, BODY_1, TS_1).is_ok());
}

#[test]
fn standard_webhooks_refusals_name_their_reason() {
    let svix = source("svix", json!({"secret": SECRET_1}));
    let good = [
        ("webhook-id", ID_1),
        ("webhook-timestamp", "1614265330"),
        ("webhook-signature", SIG_1),
    ];
    let at = |headers: &[(&str, &str)], body: &[u8], now| reason(check(&svix, headers, body, now));
    assert_eq!(
        at(&good, b"{\"test\": 2432232315}", TS_1),
        RejectReason::BadSignature
    );
    assert_eq!(at(&good, BODY_1, TS_1 + 301), RejectReason::StaleTimestamp);
    assert_eq!(at(&good, BODY_1, TS_1 - 301), RejectReason::StaleTimestamp);
    assert_eq!(at(&good[..2], BODY_1, TS_1), RejectReason::MissingSignature);
    assert_eq!(at(&[], BODY_1, TS_1), RejectReason::MissingSignature);
    let bad_time = [good[0], ("webhook-timestamp", "hello"), good[2]];
    assert_eq!(at(&bad_time, BODY_1, TS_1), RejectReason::Malformed);
    let other_key = source("svix", json!({"secret": Secret::generate().to_string()}));
    assert_eq!(
        reason(check(&other_key, &good, BODY_1, TS_1)),
        RejectReason::BadSignature
    );
    let missing = check(&svix, &good[1..], BODY_1, TS_1).unwrap_err();
    assert_eq!(missing.detail, "missing header webhook-id");
    assert_eq!(
        missing.to_string(),
        "missing_signature: missing header webhook-id"
    );
}

#[test]
fn stripe_vector_and_refusals() {
    let stripe = source("stripe", json!({"secret": SECRET_1}));
    let headers = [("Stripe-Signature", STRIPE_1)];
    assert_eq!(
        check(&stripe, &headers, BODY_1, TS_1),
        event(None, "stripe")
    );

    let body = br#"{"id":"evt_1","object":"event","type":"payment_intent.succeeded"}"#;
    let header = webhook_signature::stripe::sign(SECRET_1, 1_700_000_000, body);
    assert_eq!(
        check(
            &stripe,
            &[("stripe-signature", &header)],
            body,
            1_700_000_100
        ),
        event(Some("evt_1"), "payment_intent.succeeded")
    );
    let at =
        |headers: &[(&str, &str)], body: &[u8], now| reason(check(&stripe, headers, body, now));
    assert_eq!(at(&headers, b"{}", TS_1), RejectReason::BadSignature);
    assert_eq!(
        at(&headers, BODY_1, TS_1 + 301),
        RejectReason::StaleTimestamp
    );
    assert_eq!(at(&[], BODY_1, TS_1), RejectReason::MissingSignature);
    assert_eq!(
        at(&[("stripe-signature", "v1=00")], BODY_1, TS_1),
        RejectReason::Malformed
    );
    let other = source("stripe", json!({"secret": "whsec_other"}));
    assert_eq!(
        reason(check(&other, &headers, BODY_1, TS_1)),
        RejectReason::BadSignature
    );
}

#[test]
fn github_vector_delivery_and_event() {
    let github = source("github", json!({"secret": GITHUB_SECRET}));
    let headers = [
        ("X-Hub-Signature-256", GITHUB_SIG),
        ("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
        ("X-GitHub-Event", "push"),
    ];
    assert_eq!(
        check(&github, &headers, b"Hello, World!", 0),
        event(Some("72d3162e-cc78-11e3-81ab-4c9367dc0958"), "push")
    );
    assert_eq!(
        reason(check(&github, &headers, b"Hello, World?", 0)),
        RejectReason::BadSignature
    );
    assert_eq!(
        reason(check(&github, &headers[1..], b"Hello, World!", 0)),
        RejectReason::MissingSignature
    );
    let other = source("github", json!({"secret": "another"}));
    assert_eq!(
        reason(check(&other, &headers, b"Hello, World!", 0)),
        RejectReason::BadSignature
    );
    // A webhook set up in GitHub without a secret is sent unsigned.
    let unsigned = source("github", json!({}));
    assert_eq!(
        check(&unsigned, &headers[2..], b"{}", 0),
        event(None, "push")
    );
}

#[test]
fn shopify_vector_topic_and_event_id() {
    let shopify = source("shopify", json!({"secret": "hush"}));
    let mut headers = vec![
        ("X-Shopify-Hmac-Sha256", SHOPIFY_SIG),
        ("X-Shopify-Topic", "orders/create"),
        (
            "X-Shopify-Webhook-Id",
            "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043",
        ),
    ];
    assert_eq!(
        check(&shopify, &headers, SHOPIFY_BODY, 0),
        event(
            Some("b54557e4-bdd9-4b37-8a5f-bf7d70bcd043"),
            "orders.create"
        )
    );
    headers.push(("X-Shopify-Event-Id", "98880550-7158-44d4-b7cd-2c97c8a091b5"));
    assert_eq!(
        check(&shopify, &headers, SHOPIFY_BODY, 0),
        event(
            Some("98880550-7158-44d4-b7cd-2c97c8a091b5"),
            "orders.create"
        )
    );
    assert_eq!(
        reason(check(&shopify, &headers, b"{}", 0)),
        RejectReason::BadSignature
    );
    assert_eq!(
        reason(check(&shopify, &headers[1..], SHOPIFY_BODY, 0)),
        RejectReason::MissingSignature
    );
    let other = source("shopify", json!({"secret": "hush!"}));
    assert_eq!(
        reason(check(&other, &headers, SHOPIFY_BODY, 0)),
        RejectReason::BadSignature
    );
}

#[test]
fn slack_documented_example_and_refusals() {
    let slack = source("slack", json!({"secret": SLACK_SECRET}));
    let headers = [
        ("X-Slack-Request-Timestamp", "1531420618"),
        ("X-Slack-Signature", SLACK_SIG),
    ];
    // A slash command's form body names no event: the source's type stands in.
    assert_eq!(
        check(&slack, &headers, SLACK_BODY, SLACK_TS),
        event(None, "slack")
    );
    let at = |headers: &[(&str, &str)], body: &[u8], now| reason(check(&slack, headers, body, now));
    assert_eq!(
        at(&headers, b"token=x", SLACK_TS),
        RejectReason::BadSignature
    );
    assert_eq!(
        at(&headers, SLACK_BODY, SLACK_TS + 301),
        RejectReason::StaleTimestamp
    );
    assert_eq!(
        at(&headers[..1], SLACK_BODY, SLACK_TS),
        RejectReason::MissingSignature
    );
    assert_eq!(
        at(&headers[1..], SLACK_BODY, SLACK_TS),
        RejectReason::MissingSignature
    );
    let other = source("slack", json!({"secret": "another"}));
    assert_eq!(
        reason(check(&other, &headers, SLACK_BODY, SLACK_TS)),
        RejectReason::BadSignature
    );
}

#[test]
fn slack_answers_url_verification_and_reads_event_callbacks() {
    let slack = source("slack", json!({"secret": SLACK_SECRET}));
    let signed = |body: &[u8]| {
        let signature = webhook_signature::slack::sign(SLACK_SECRET, 1_700_000_000, body);
        check(
            &slack,
            &[
                ("x-slack-request-timestamp", "1700000000"),
                ("x-slack-signature", &signature),
            ],
            body,
            1_700_000_000,
        )
    };
    assert_eq!(
        signed(br#"{"token":"t","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}"#),
        Ok(Accepted::Challenge {
            content_type: "text/plain",
            body: b"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P".to_vec(),
        })
    );
    assert_eq!(
        reason(signed(br#"{"type":"url_verification"}"#)),
        RejectReason::Malformed
    );
    assert_eq!(
        signed(br#"{"type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention","text":"hi"}}"#),
        event(Some("Ev08MFMKH6"), "app_mention")
    );
    assert_eq!(
        signed(br#"{"type":"app_rate_limited","team_id":"T1"}"#),
        event(None, "app_rate_limited")
    );
}

#[test]
fn generic_webhook_checks_only_what_it_is_given() {
    let open = source("generic-webhook", Value::Null);
    assert_eq!(
        check(
            &open,
            &[("Idempotency-Key", "order-17")],
            br#"{"type":"order.paid"}"#,
            0
        ),
        event(Some("order-17"), "order.paid")
    );
    assert_eq!(
        check(&open, &[], b"plain text", 0),
        event(None, "generic-webhook")
    );

    let guarded = source(
        "generic-webhook",
        json!({
            "basicAuth": {"username": "shop", "password": "pa:ss"},
            "apiKey": {"header": "X-Api-Key", "value": "k3y"},
        }),
    );
    // base64("shop:pa:ss"): the password is everything after the first colon.
    let auth = "Basic c2hvcDpwYTpzcw==";
    let ok = [("authorization", auth), ("x-api-key", "k3y")];
    assert_eq!(
        check(&guarded, &ok, b"{}", 0),
        event(None, "generic-webhook")
    );
    let lowercase_scheme = [("authorization", "basic c2hvcDpwYTpzcw=="), ok[1]];
    assert!(check(&guarded, &lowercase_scheme, b"{}", 0).is_ok());
    // base64("shop:pass"), base64("shop"), a bearer token, a wrong key, nothing.
    for headers in [
        vec![("authorization", "Basic c2hvcDpwYXNz"), ok[1]],
        vec![("authorization", "Basic c2hvcA=="), ok[1]],
        vec![("authorization", "Bearer k3y"), ok[1]],
        vec![ok[0], ("x-api-key", "k3y ")],
        vec![ok[0]],
        vec![ok[1]],
        vec![],
    ] {
        let refused = check(&guarded, &headers, b"{}", 0).unwrap_err();
        assert_eq!(refused.reason, RejectReason::Unauthorized, "{headers:?}");
        assert!(!refused.detail.contains("k3y") && !refused.detail.contains("pa:ss"));
    }
}

#[test]
fn reasons_have_distinct_labels() {
    let labels: Vec<_> = RejectReason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(
        labels,
        [
            "missing_signature",
            "bad_signature",
            "stale_timestamp",
            "unauthorized",
            "malformed"
        ]
    );
}

#[test]
fn a_header_that_is_not_visible_ascii_is_malformed() {
    let github = source("github", json!({"secret": GITHUB_SECRET}));
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "x-hub-signature-256",
        http::HeaderValue::from_bytes(b"sha256=\xff").unwrap(),
    );
    let refused = github
        .verify(&InboundRequest {
            headers: &headers,
            body: b"",
            now: 0,
        })
        .unwrap_err();
    assert_eq!(refused.reason, RejectReason::Malformed);
}
