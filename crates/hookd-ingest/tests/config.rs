//! A source's `type` and `config`: served types parse, every refusal names its field, the
//! stored form parses back to itself, and answers never show a secret.

use hookd_ingest::{ConfigError, SchemeKind, SourceConfig, served_types};
use serde_json::{Value, json};

fn refused(kind: &str, config: Value) -> ConfigError {
    SourceConfig::parse(kind, &config).expect_err("refused")
}

/// A valid `config` for each scheme, secrets included.
fn example(scheme: SchemeKind) -> Value {
    match scheme {
        SchemeKind::StandardWebhooks => json!({"secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}),
        SchemeKind::Stripe => json!({"secret": "whsec_stripe"}),
        SchemeKind::Github | SchemeKind::Shopify | SchemeKind::Slack => json!({"secret": "s3cret"}),
        SchemeKind::Generic => json!({
            "basicAuth": {"username": "u", "password": "pw"},
            // Header names are kept lowercase, so the example is already in stored form.
            "apiKey": {"header": "x-api-key", "value": "k3y"},
        }),
    }
}

#[test]
fn a_type_hookd_does_not_serve_is_refused_naming_type() {
    for kind in ["hubspot", "cron", "zoom", "no-such-type", "", "Stripe"] {
        let error = refused(kind, json!({"secret": "x"}));
        assert_eq!(error.field, "type");
        assert!(error.message.contains(&format!("`{kind}`")), "{error}");
        for served in served_types() {
            assert!(error.message.contains(served.kind), "{error}");
        }
    }
}

#[test]
fn every_served_type_round_trips_through_its_stored_form() {
    for served in served_types() {
        let config = SourceConfig::parse(served.kind, &example(served.scheme)).unwrap();
        assert_eq!(config.kind(), served.kind);
        assert_eq!(config.scheme(), served.scheme);
        let stored = config.to_stored();
        assert_eq!(stored, example(served.scheme), "{}", served.kind);
        let again = SourceConfig::parse(served.kind, &stored).unwrap();
        assert_eq!(again.to_stored(), stored);
    }
}

#[test]
fn answers_show_no_secret() {
    for served in served_types() {
        let config = SourceConfig::parse(served.kind, &example(served.scheme)).unwrap();
        let out = config.to_out().to_string();
        for secret in ["MfKQ9r8G", "whsec_stripe", "s3cret", "pw", "k3y"] {
            assert!(!out.contains(secret), "{}: {out}", served.kind);
        }
    }
    let generic = SourceConfig::parse("generic-webhook", &example(SchemeKind::Generic)).unwrap();
    assert_eq!(
        generic.to_out(),
        json!({"basicAuth": {"username": "u"}, "apiKey": {"header": "x-api-key"}})
    );
    let stripe = SourceConfig::parse("stripe", &example(SchemeKind::Stripe)).unwrap();
    assert_eq!(stripe.to_out(), json!({}));
}

#[test]
fn secrets_are_required_and_checked_naming_config_secret() {
    let cases = [
        ("stripe", json!({}), "is required"),
        ("stripe", json!({"secret": null}), "is required"),
        ("slack", json!({"secret": ""}), "must not be empty"),
        ("shopify", json!({"secret": 17}), "must be a string"),
        ("svix", json!({"secret": "whsec_!!!"}), "not valid base64"),
        (
            "svix",
            json!({"secret": "whpk_AAAA"}),
            "must decode to 32 bytes",
        ),
        (
            "github",
            json!({"secret": "x".repeat(1025)}),
            "at most 1024 bytes",
        ),
    ];
    for (kind, config, message) in cases {
        let error = refused(kind, config);
        assert_eq!(error.field, "config.secret", "{kind}: {error}");
        assert!(error.message.contains(message), "{kind}: {error}");
    }
}

#[test]
fn config_must_be_an_object_without_unknown_fields() {
    let error = refused("stripe", Value::Null);
    assert_eq!(
        (error.field.as_str(), error.message.as_str()),
        ("config", "must be an object")
    );
    assert_eq!(refused("svix", json!("whsec_x")).field, "config");
    let error = refused("stripe", json!({"secret": "s", "secrt": "s"}));
    assert_eq!(error.field, "config.secrt");
    assert!(error.message.contains("expected secret"), "{error}");
    let error = refused(
        "generic-webhook",
        json!({"basicAuth": {"user": "u", "password": "p"}}),
    );
    assert_eq!(error.field, "config.basicAuth.user");
    assert_eq!(
        refused("generic-webhook", json!({"apikey": {}})).field,
        "config.apikey"
    );
}

#[test]
fn github_and_generic_need_no_config() {
    let github = SourceConfig::parse("github", &json!({"secret": null})).unwrap();
    assert_eq!(github.to_stored(), json!({}));
    for config in [Value::Null, json!({}), json!({"basicAuth": null})] {
        let generic = SourceConfig::parse("generic-webhook", &config).unwrap();
        assert_eq!(generic.to_stored(), json!({}));
        assert_eq!(generic.to_out(), json!({}));
    }
}

#[test]
fn generic_credentials_are_checked_naming_their_field() {
    let cases = [
        (
            json!({"basicAuth": {"username": "u"}}),
            "config.basicAuth.password",
        ),
        (
            json!({"basicAuth": {"username": "a:b", "password": "p"}}),
            "config.basicAuth.username",
        ),
        (json!({"basicAuth": "u:p"}), "config.basicAuth"),
        (
            json!({"apiKey": {"header": "X Api", "value": "k"}}),
            "config.apiKey.header",
        ),
        (
            json!({"apiKey": {"header": "X-Api-Key"}}),
            "config.apiKey.value",
        ),
    ];
    for (config, field) in cases {
        assert_eq!(
            refused("generic-webhook", config.clone()).field,
            field,
            "{config}"
        );
    }
}
