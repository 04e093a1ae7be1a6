//! The official Svix Rust SDK (the `svix` crate, 2.9.x), code we did not write, drives the real
//! hookd binary through the calls `scripts/crosscheck/svix_sdk_check.py` makes with the Python
//! SDK: applications, event types (with an OpenAPI import), endpoints with their secrets,
//! headers and statistics, messages (one carrying its application inline), the delivery log of
//! real deliveries to loopback receivers, resend, recover, send-example, precheck, expunging,
//! the portal token,
//! operational-webhook endpoints, replay-missing, bulk replay, expunge-all-contents, background
//! tasks and usage statistics; and the SDK's typed errors for 404, 409 (`Error::Http`) and 422
//! (`Error::Validation`, naming the field). The Rust SDK deserializes every answer into its
//! strict models (required fields, closed enums), so a field hookd leaves out or a value it
//! spells differently fails the call here even where the Python SDK lets it pass.
//!
//! Every delivery a receiver gets is verified with the reference `standardwebhooks` crate and
//! the endpoint's secret as the SDK reads it.
//!
//! The Rust SDK 2.9.x has every call the Python check makes. Of its calls of the same API
//! groups, hookd serves neither `message.bulk_expunge_content` (`POST …/msg/bulk-expunge`) nor
//! `endpoint.get_attempt_stats` (`GET …/endpoint/{ep}/attempt-stats`), and neither check makes
//! them.

mod support;

use std::collections::{BTreeMap, BTreeSet};

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use serde_json::json;
use support::{Hookd, eventually};
use svix::api::{
    ApplicationListOptions, BackgroundTaskListOptions, MessageGetOptions, MessageListOptions, Svix,
    SvixOptions,
};
use svix::error::Error;
use svix::models::{
    AppPortalAccessIn, AppUsageStatsIn, ApplicationIn, ApplicationPatch, BackgroundTaskOut,
    BackgroundTaskStatus, BackgroundTaskType, BulkReplayIn, EndpointHeadersIn,
    EndpointHeadersPatchIn, EndpointIn, EndpointOut, EndpointPatch, EndpointSecretRotateIn,
    EndpointUpsertIn, EventExampleIn, EventTypeImportOpenApiIn, EventTypeIn, EventTypePatch,
    EventTypeUpsertIn, MessageAttemptOut, MessageIn, MessagePrecheckIn, MessageStatus,
    OperationalWebhookEndpointHeadersIn, OperationalWebhookEndpointIn,
    OperationalWebhookEndpointSecretIn, OperationalWebhookEndpointUpsertIn, RecoverIn, ReplayIn,
};

const TOKEN: &str = "svix-rust-sdk-admin-token";

#[tokio::test]
async fn svix_rust_sdk_drives_hookd_on_sqlite() {
    let (url, _dir) = hookd_store::testing::fresh_sqlite();
    drive(&url).await;
}

#[tokio::test]
async fn svix_rust_sdk_drives_hookd_on_postgres() {
    let Some((url, _db)) =
        hookd_store::testing::fresh_postgres("svix_rust_sdk_drives_hookd_on_postgres").await
    else {
        return;
    };
    drive(&url).await;
}

/// Runs every part of the check against a hookd serving `database`.
async fn drive(database: &str) {
    let hookd = Hookd::serve_local(database, TOKEN, &[]);
    let svix = client(&hookd.base_url, TOKEN);
    let app = applications(&svix).await;
    let event_type = event_types(&svix).await;
    let ep = endpoints(&svix, &app, &event_type).await;
    messages(&svix, &app, &ep, &event_type).await;
    deliveries(&svix, &app, &event_type).await;
    expunging(&svix, &app, &event_type).await;
    portal(&svix, &hookd.base_url, &app, &ep).await;
    clean_up(&svix, &app, &ep, &event_type).await;
    inline_application(&svix).await;
    operational_endpoints(&svix).await;
    background_tasks(&svix).await;
    event_catalog(&svix).await;
    svix.health().get().await.expect("health.get");
}

/// The SDK pointed at hookd, retrying nothing: a failure is the answer under test.
fn client(base_url: &str, token: &str) -> Svix {
    let options = SvixOptions {
        server_url: Some(base_url.to_owned()),
        retry_schedule: Some(Vec::new()),
        ..SvixOptions::default()
    };
    Svix::new(token.to_owned(), Some(options))
}

/// An RFC 3339 time as the SDK's models take it (chrono's type, which this test need not name).
fn time<T: serde::de::DeserializeOwned>(rfc3339: &str) -> T {
    serde_json::from_value(json!(rfc3339)).expect("an RFC 3339 time")
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The status of the SDK's `Error::Http`; any other error fails the test.
fn http_status<T: std::fmt::Debug>(outcome: Result<T, Error>) -> u16 {
    match outcome {
        Err(Error::Http(e)) => e.status.as_u16(),
        other => panic!("expected Error::Http, got {other:?}"),
    }
}

/// The field the SDK's `Error::Validation` (a 422) names last; any other outcome fails.
fn invalid_field<T: std::fmt::Debug>(outcome: Result<T, Error>) -> String {
    match outcome {
        Err(Error::Validation(e)) => {
            let detail = e.payload.expect("a 422 body the SDK parses").detail;
            detail[0].loc.last().expect("a location").clone()
        }
        other => panic!("expected Error::Validation, got {other:?}"),
    }
}

async fn applications(svix: &Svix) -> String {
    let uid = "acme".to_owned();
    let app = svix
        .application()
        .create(
            ApplicationIn {
                uid: Some(uid.clone()),
                metadata: Some(map(&[("tier", "gold")])),
                ..ApplicationIn::new("Acme".into())
            },
            None,
        )
        .await
        .expect("application.create");
    assert!(app.id.starts_with("app_"));
    assert_eq!(app.metadata, map(&[("tier", "gold")]));
    let by_uid = svix.application().get(uid.clone()).await.unwrap();
    assert_eq!(by_uid.id, app.id, "application.get by uid");
    let same = svix
        .application()
        .get_or_create(
            ApplicationIn {
                uid: Some(uid.clone()),
                ..ApplicationIn::new("Acme".into())
            },
            None,
        )
        .await
        .expect("application.get_or_create");
    assert_eq!(same.id, app.id, "get_or_create returns the existing app");
    let renamed = svix
        .application()
        .upsert(
            app.id.clone(),
            ApplicationIn {
                uid: Some(uid.clone()),
                ..ApplicationIn::new("Acme Inc".into())
            },
        )
        .await
        .expect("application.upsert");
    assert_eq!(renamed.name, "Acme Inc");
    let patched = svix
        .application()
        .patch(
            app.id.clone(),
            ApplicationPatch {
                metadata: Some(map(&[("tier", "platinum")])),
                ..ApplicationPatch::new()
            },
        )
        .await
        .expect("application.patch");
    assert_eq!(
        (patched.metadata, patched.name.as_str()),
        (map(&[("tier", "platinum")]), "Acme Inc")
    );
    let listed = svix
        .application()
        .list(Some(ApplicationListOptions {
            limit: Some(250),
            ..Default::default()
        }))
        .await
        .expect("application.list");
    assert!(listed.data.iter().any(|a| a.id == app.id));
    let duplicate = ApplicationIn {
        uid: Some(uid),
        ..ApplicationIn::new("Dup".into())
    };
    let refused = svix.application().create(duplicate, None).await;
    assert_eq!(http_status(refused), 409, "a duplicate uid");
    let missing = svix.application().get("no-such-app".into()).await;
    assert_eq!(http_status(missing), 404, "an unknown app");
    app.id
}

async fn event_types(svix: &Svix) -> String {
    let name = "order.shipped".to_owned();
    let et = svix
        .event_type()
        .create(
            EventTypeIn::new(name.clone(), "An order was shipped".into()),
            None,
        )
        .await
        .expect("event_type.create");
    assert!(et.name == name && !et.deprecated);
    let got = svix.event_type().get(name.clone()).await.unwrap();
    assert_eq!(got.description, "An order was shipped", "event_type.get");
    let upserted = svix
        .event_type()
        .upsert(name.clone(), EventTypeUpsertIn::new("Shipped".into()))
        .await
        .expect("event_type.upsert");
    assert_eq!(upserted.description, "Shipped");
    let patch = EventTypePatch {
        deprecated: Some(true),
        ..EventTypePatch::new()
    };
    let patched = svix.event_type().patch(name.clone(), patch).await.unwrap();
    assert!(patched.deprecated, "event_type.patch");
    let listed = svix.event_type().list(None).await.expect("event_type.list");
    assert!(listed.data.iter().any(|e| e.name == name));
    name
}

/// Endpoints, their secrets and headers, and the 422s naming a field; returns an endpoint
/// that receives nothing (port 9, discard).
async fn endpoints(svix: &Svix, app: &str, event_type: &str) -> String {
    let uid = "orders".to_owned();
    let ep = svix
        .endpoint()
        .create(
            app.into(),
            EndpointIn {
                uid: Some(uid.clone()),
                event_types: Some(set(&[event_type])),
                description: Some("orders".into()),
                ..EndpointIn::new("http://127.0.0.1:9/hook".into())
            },
            None,
        )
        .await
        .expect("endpoint.create");
    assert!(ep.id.starts_with("ep_"));
    assert_eq!(ep.event_types, Some(set(&[event_type])));
    let by_uid = svix.endpoint().get(app.into(), uid).await.unwrap();
    assert_eq!(by_uid.id, ep.id, "endpoint.get by uid");
    let upsert = EndpointUpsertIn {
        event_types: Some(set(&[event_type])),
        ..EndpointUpsertIn::new("http://127.0.0.1:9/v2".into())
    };
    let upserted = svix
        .endpoint()
        .upsert(app.into(), ep.id.clone(), upsert)
        .await
        .expect("endpoint.upsert");
    assert_eq!(upserted.url, "http://127.0.0.1:9/v2");
    let patch = EndpointPatch {
        description: Some("patched".into()),
        ..EndpointPatch::new()
    };
    let patched = svix
        .endpoint()
        .patch(app.into(), ep.id.clone(), patch)
        .await
        .expect("endpoint.patch");
    assert!(patched.description == "patched" && patched.url.ends_with("/v2"));
    let listed = svix.endpoint().list(app.into(), None).await.unwrap();
    let ids: Vec<&str> = listed.data.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, [ep.id.as_str()], "endpoint.list");
    secrets(svix, app, &ep.id).await;
    headers(svix, app, &ep.id).await;
    let bad = svix
        .endpoint()
        .create(
            app.into(),
            EndpointIn::new("ftp://example.com".into()),
            None,
        )
        .await;
    assert_eq!(invalid_field(bad), "url", "a bad url is a 422 naming url");
    ep.id
}

async fn secrets(svix: &Svix, app: &str, ep: &str) {
    let endpoint = svix.endpoint();
    let secret = endpoint.get_secret(app.into(), ep.into()).await.unwrap();
    assert!(secret.key.starts_with("whsec_"), "endpoint.get_secret");
    let rotated = endpoint
        .rotate_secret(app.into(), ep.into(), EndpointSecretRotateIn::new(), None)
        .await
        .expect("endpoint.rotate_secret");
    assert!(rotated.key.starts_with("whsec_") && rotated.key != secret.key);
    let current = endpoint.get_secret(app.into(), ep.into()).await.unwrap();
    assert_eq!(current.key, rotated.key, "the rotated secret is current");
    let own = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let theirs = EndpointSecretRotateIn {
        key: Some(own.into()),
        grace_period_seconds: Some(3600),
    };
    let rotated = endpoint
        .rotate_secret(app.into(), ep.into(), theirs, None)
        .await
        .expect("rotate_secret with the caller's key and grace period");
    assert_eq!(rotated.key, own);
    let too_long = EndpointSecretRotateIn {
        grace_period_seconds: Some(8 * 86_400),
        ..EndpointSecretRotateIn::new()
    };
    let refused = endpoint
        .rotate_secret(app.into(), ep.into(), too_long, None)
        .await;
    assert_eq!(invalid_field(refused), "gracePeriodSeconds");
}

async fn headers(svix: &Svix, app: &str, ep: &str) {
    let endpoint = svix.endpoint();
    let set_to = EndpointHeadersIn::new(map(&[("X-Tenant", "42")]));
    endpoint
        .set_headers(app.into(), ep.into(), set_to)
        .await
        .expect("endpoint.set_headers");
    let patch = EndpointHeadersPatchIn::new(map(&[("X-Region", "eu")]));
    endpoint
        .patch_headers(app.into(), ep.into(), patch)
        .await
        .expect("endpoint.patch_headers");
    let shown = endpoint.get_headers(app.into(), ep.into()).await.unwrap();
    assert_eq!(
        shown.headers,
        map(&[("X-Tenant", "42"), ("X-Region", "eu")]),
        "endpoint headers"
    );
}

/// Publishing, reading back (by id and `eventId`), a taken `eventId`, the message list, and the
/// delivery log's views of a message routed to the endpoint that receives nothing.
async fn messages(svix: &Svix, app: &str, ep: &str, event_type: &str) {
    let event_id = "evt-1003".to_owned();
    let message = || MessageIn {
        event_id: Some(event_id.clone()),
        ..MessageIn::new(event_type.into(), json!({"orderId": 1003}))
    };
    let msg = svix
        .message()
        .create(app.into(), message(), None)
        .await
        .expect("message.create");
    assert!(msg.id.starts_with("msg_") && msg.event_type == event_type);
    let with_content = Some(MessageGetOptions {
        with_content: Some(true),
    });
    let fetched = svix
        .message()
        .get(app.into(), msg.id.clone(), with_content)
        .await
        .expect("message.get");
    assert_eq!(fetched.event_id.as_deref(), Some(event_id.as_str()));
    assert_eq!(fetched.payload, json!({"orderId": 1003}));
    let by_event_id = svix.message().get(app.into(), event_id.clone(), None).await;
    assert_eq!(by_event_id.unwrap().id, msg.id, "message.get by eventId");
    let again = svix.message().create(app.into(), message(), None).await;
    assert_eq!(http_status(again), 409, "a taken eventId");
    let filter = MessageListOptions {
        event_types: Some(set(&[event_type])),
        ..Default::default()
    };
    let listed = svix.message().list(app.into(), Some(filter)).await.unwrap();
    let ids: Vec<&str> = listed.data.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(
        ids,
        [msg.id.as_str()],
        "message.list filtered by event type"
    );

    let attempts = svix.message_attempt();
    let destinations = attempts
        .list_attempted_destinations(app.into(), msg.id.clone(), None)
        .await
        .expect("message_attempt.list_attempted_destinations");
    let ids: Vec<&str> = destinations.data.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, [ep]);
    attempts
        .list_by_msg(app.into(), msg.id.clone(), None)
        .await
        .expect("message_attempt.list_by_msg");
    attempts
        .list_by_endpoint(app.into(), ep.into(), None)
        .await
        .expect("message_attempt.list_by_endpoint");
    let attempted = attempts
        .list_attempted_messages(app.into(), ep.into(), None)
        .await
        .expect("message_attempt.list_attempted_messages");
    let ids: Vec<&str> = attempted.data.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, [msg.id.as_str()]);
}

/// A receiver, and an endpoint of `app` delivering to it.
async fn receiving_endpoint(
    svix: &Svix,
    app: &str,
    event_types: &[&str],
) -> (Receiver, EndpointOut) {
    let receiver = Receiver::always(StatusCode::OK).await;
    let input = EndpointIn {
        event_types: (!event_types.is_empty()).then(|| set(event_types)),
        ..EndpointIn::new(receiver.url.clone())
    };
    let ep = svix
        .endpoint()
        .create(app.into(), input, None)
        .await
        .expect("endpoint.create");
    (receiver, ep)
}

/// The attempts of message `msg` to endpoint `ep`, as the SDK lists them.
async fn attempts_to(svix: &Svix, app: &str, msg: &str, ep: &str) -> Vec<MessageAttemptOut> {
    let listed = svix
        .message_attempt()
        .list_by_msg(app.into(), msg.into(), None)
        .await
        .expect("message_attempt.list_by_msg");
    listed
        .data
        .into_iter()
        .filter(|a| a.endpoint_id == ep)
        .collect()
}

/// Waits (bounded) until message `msg` has `n` attempts to endpoint `ep`; returns them.
async fn wait_for_attempts(
    svix: &Svix,
    app: &str,
    msg: &str,
    ep: &str,
    n: usize,
) -> Vec<MessageAttemptOut> {
    eventually(async || {
        let attempts = attempts_to(svix, app, msg, ep).await;
        if attempts.len() >= n {
            Ok(attempts)
        } else {
            Err(format!(
                "{msg} has {} of {n} attempts to {ep}",
                attempts.len()
            ))
        }
    })
    .await
}

/// Verifies every request `receiver` got with the reference `standardwebhooks` crate and the
/// endpoint's current secret, as the SDK reads it; returns their `webhook-id`s and bodies.
async fn verified(svix: &Svix, app: &str, ep: &str, receiver: &Receiver) -> Vec<(String, String)> {
    let secret = svix
        .endpoint()
        .get_secret(app.into(), ep.into())
        .await
        .expect("endpoint.get_secret");
    let reference = standardwebhooks::Webhook::new(&secret.key).expect("a whsec_ secret");
    receiver
        .requests()
        .iter()
        .map(|request| {
            let checked = reference.verify(&request.body, &request.headers);
            assert!(
                checked.is_ok(),
                "standardwebhooks refused {request:?}: {checked:?}"
            );
            let body = String::from_utf8(request.body.to_vec()).expect("a UTF-8 body");
            (request.header("webhook-id").to_owned(), body)
        })
        .collect()
}

/// The engine delivers; the SDK reads the attempts, resends, recovers and sends an example,
/// and every request the receiver got verifies.
async fn deliveries(svix: &Svix, app: &str, event_type: &str) {
    let (receiver, ep) = receiving_endpoint(svix, app, &[event_type]).await;
    let precheck = async |event_type: &str| {
        let input = MessagePrecheckIn::new(event_type.into());
        let answer = svix.message().precheck(app.into(), input, None).await;
        answer.expect("message.precheck").active
    };
    assert!(precheck(event_type).await, "active");
    assert!(!precheck("nobody.listens").await, "not active");
    let payload = json!({"orderId": 1});
    let msg = svix
        .message()
        .create(app.into(), MessageIn::new(event_type.into(), payload), None)
        .await
        .unwrap();
    let first = wait_for_attempts(svix, app, &msg.id, &ep.id, 1)
        .await
        .remove(0);
    assert!((200..300).contains(&first.response_status_code));
    assert_eq!(first.status, MessageStatus::Success);
    let got = svix
        .message_attempt()
        .get(app.into(), msg.id.clone(), first.id.clone(), None)
        .await
        .expect("message_attempt.get");
    assert_eq!(got.id, first.id);
    svix.message_attempt()
        .resend(app.into(), msg.id.clone(), ep.id.clone(), None)
        .await
        .expect("message_attempt.resend");
    wait_for_attempts(svix, app, &msg.id, &ep.id, 2).await;
    let recovered = svix
        .endpoint()
        .recover(
            app.into(),
            ep.id.clone(),
            RecoverIn::new(time("2000-01-01T00:00:00Z")),
            None,
        )
        .await
        .expect("endpoint.recover");
    assert_eq!(recovered.status, BackgroundTaskStatus::Finished);
    let example = svix
        .endpoint()
        .send_example(
            app.into(),
            ep.id.clone(),
            EventExampleIn::new(event_type.into()),
            None,
        )
        .await
        .expect("endpoint.send_example");
    wait_for_attempts(svix, app, &example.id, &ep.id, 1).await;
    let by_endpoint = svix
        .message_attempt()
        .list_by_endpoint(app.into(), ep.id.clone(), None)
        .await
        .unwrap();
    assert_eq!(by_endpoint.data.len(), 3, "all three attempts");
    let stats = svix
        .endpoint()
        .get_stats(app.into(), ep.id.clone(), None)
        .await
        .expect("endpoint.get_stats");
    assert_eq!((stats.success, stats.fail), (2, 0), "{stats:?}");
    receiver.wait_for(3).await;
    let received = verified(svix, app, &ep.id, &receiver).await;
    let ids: Vec<&str> = received.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(
        ids,
        [&msg.id, &msg.id, &example.id],
        "the same webhook-id on a resend"
    );
    assert_eq!(received[0].1, r#"{"orderId":1}"#, "the payload's bytes");
}

/// A message's own retention is taken; an attempt's response and a message's payload are
/// expunged on request and read back as Svix shows them.
async fn expunging(svix: &Svix, app: &str, event_type: &str) {
    let (receiver, ep) = receiving_endpoint(svix, app, &[event_type]).await;
    let input = MessageIn {
        payload_retention_period: Some(5),
        ..MessageIn::new(event_type.into(), json!({"card": "4242"}))
    };
    let msg = svix
        .message()
        .create(app.into(), input, None)
        .await
        .expect("message.create with payload_retention_period");
    let attempt = wait_for_attempts(svix, app, &msg.id, &ep.id, 1)
        .await
        .remove(0);
    receiver.wait_for(1).await;
    verified(svix, app, &ep.id, &receiver).await;
    let attempts = svix.message_attempt();
    attempts
        .expunge_content(app.into(), msg.id.clone(), attempt.id.clone())
        .await
        .expect("message_attempt.expunge_content");
    let shown = attempts
        .get(app.into(), msg.id.clone(), attempt.id, None)
        .await
        .unwrap();
    assert_eq!(shown.response, "EXPUNGED");
    svix.message()
        .expunge_content(app.into(), msg.id.clone())
        .await
        .expect("message.expunge_content");
    let with_content = Some(MessageGetOptions {
        with_content: Some(true),
    });
    let fetched = svix.message().get(app.into(), msg.id, with_content).await;
    assert_eq!(fetched.unwrap().payload, json!({"expired": true}));
    let missing = svix
        .message()
        .expunge_content(app.into(), "msg_nope".into())
        .await;
    assert_eq!(http_status(missing), 404, "expunging a missing message");
    svix.endpoint().delete(app.into(), ep.id).await.unwrap();
}

/// A portal link for one application: its token reads that application only, until it logs
/// out.
async fn portal(svix: &Svix, base_url: &str, app: &str, ep: &str) {
    let access = svix
        .authentication()
        .app_portal_access(app.into(), AppPortalAccessIn::new(), None)
        .await
        .expect("authentication.app_portal_access");
    assert_eq!(
        access.url,
        format!("{base_url}/portal/login#token={}", access.token)
    );
    let customer = client(base_url, &access.token);
    let listed = customer.endpoint().list(app.into(), None).await.unwrap();
    assert!(
        listed.data.iter().any(|e| e.id == ep),
        "its own application"
    );
    let elsewhere = customer.application().list(None).await;
    assert_eq!(http_status(elsewhere), 403, "scoped: 403 elsewhere");
    customer
        .authentication()
        .logout(None)
        .await
        .expect("authentication.logout");
    let after = customer.endpoint().list(app.into(), None).await;
    assert_eq!(http_status(after), 401, "a logged-out token is refused");
}

async fn clean_up(svix: &Svix, app: &str, ep: &str, event_type: &str) {
    svix.endpoint()
        .delete(app.into(), ep.into())
        .await
        .expect("endpoint.delete");
    svix.event_type()
        .delete(event_type.into(), None)
        .await
        .expect("event_type.delete");
    svix.application()
        .delete(app.into())
        .await
        .expect("application.delete");
    let gone = svix.application().get(app.into()).await;
    assert_eq!(http_status(gone), 404, "a deleted app is gone");
}

/// `message.create` carrying its application makes it when the path names none, and leaves an
/// existing one as it is.
async fn inline_application(svix: &Svix) {
    let uid = "inline-shop".to_owned();
    let carrying = |name: &str| MessageIn {
        application: Some(ApplicationIn {
            uid: Some(uid.clone()),
            ..ApplicationIn::new(name.into())
        }),
        ..MessageIn::new("order.shipped".into(), json!({}))
    };
    svix.message()
        .create(uid.clone(), carrying("Inline"), None)
        .await
        .expect("message.create with its application");
    svix.message()
        .create(uid.clone(), carrying("Renamed"), None)
        .await
        .expect("message.create into the application it made");
    let app = svix.application().get(uid.clone()).await.unwrap();
    assert_eq!(app.name, "Inline", "an existing application is left alone");
    let listed = svix.message().list(uid.clone(), None).await.unwrap();
    assert_eq!(listed.data.len(), 2);
    svix.application().delete(uid).await.unwrap();
}

/// Svix's operational-webhook endpoint API, on the reserved application's endpoints.
async fn operational_endpoints(svix: &Svix) {
    let ops = svix.operational_webhook().endpoint();
    let url = "http://127.0.0.1:9/ops".to_owned();
    let input = OperationalWebhookEndpointIn {
        event_types: Some(set(&["endpoint.created"])),
        description: Some("ops".into()),
        ..OperationalWebhookEndpointIn::new(url.clone())
    };
    let created = ops.create(input, None).await.expect("create");
    assert!(created.id.starts_with("ep_"));
    assert_eq!(created.event_types, Some(set(&["endpoint.created"])));
    assert_eq!(ops.get(created.id.clone()).await.expect("get").url, url);
    let listed = ops.list(None).await.expect("operational endpoint list");
    assert!(listed.data.iter().any(|e| e.id == created.id));
    let upsert = OperationalWebhookEndpointUpsertIn {
        description: Some("ops, renamed".into()),
        ..OperationalWebhookEndpointUpsertIn::new(url)
    };
    let updated = ops
        .upsert(created.id.clone(), upsert)
        .await
        .expect("upsert");
    assert_eq!(updated.description, "ops, renamed");
    let secret = ops
        .get_secret(created.id.clone())
        .await
        .expect("get_secret");
    assert!(secret.key.starts_with("whsec_"));
    let rotate = OperationalWebhookEndpointSecretIn::new();
    ops.rotate_secret(created.id.clone(), rotate, None)
        .await
        .expect("rotate_secret");
    let rotated = ops.get_secret(created.id.clone()).await.unwrap();
    assert_ne!(rotated.key, secret.key, "rotate_secret makes a new secret");
    let headers = OperationalWebhookEndpointHeadersIn::new(map(&[("X-Team", "ops")]));
    ops.set_headers(created.id.clone(), headers)
        .await
        .expect("set_headers");
    let shown = ops
        .get_headers(created.id.clone())
        .await
        .expect("get_headers");
    assert_eq!(shown.headers, map(&[("X-Team", "ops")]));
    ops.delete(created.id.clone()).await.expect("delete");
    assert_eq!(http_status(ops.get(created.id).await), 404, "deleted");
}

/// Waits (bounded) for background task `id` to finish; returns it.
async fn finished(svix: &Svix, id: &str) -> BackgroundTaskOut {
    eventually(async || {
        let task = svix
            .background_task()
            .get(id.into())
            .await
            .expect("background_task.get");
        match task.status {
            BackgroundTaskStatus::Finished => Ok(task),
            _ => Err(format!("task {id} has not finished: {task:?}")),
        }
    })
    .await
}

/// Replaying what an endpoint missed, a bulk replay, usage statistics and expunging every
/// payload run as background tasks the SDK starts, follows and lists; the replays' deliveries
/// verify.
async fn background_tasks(svix: &Svix) {
    let app = svix
        .application()
        .create(ApplicationIn::new("Tasks".into()), None)
        .await
        .unwrap()
        .id;
    for n in 0..2 {
        let input = MessageIn::new("order.shipped".into(), json!({"n": n}));
        svix.message()
            .create(app.clone(), input, None)
            .await
            .unwrap();
    }
    // Made after the messages: it never had them.
    let (receiver, ep) = receiving_endpoint(svix, &app, &[]).await;
    let since = || time("2020-01-01T00:00:00Z");
    let started = svix
        .endpoint()
        .replay_missing(app.clone(), ep.id.clone(), ReplayIn::new(since()), None)
        .await
        .expect("endpoint.replay_missing");
    assert_eq!(started.task, BackgroundTaskType::EndpointReplay);
    let done = finished(svix, &started.id).await;
    assert_eq!(done.data["messagesSent"], 2, "the replay sent both");
    let replays = BackgroundTaskListOptions {
        task: Some(BackgroundTaskType::EndpointReplay),
        ..Default::default()
    };
    let listed = svix.background_task().list(Some(replays)).await;
    let listed = listed.expect("background_task.list");
    assert!(listed.data.iter().any(|t| t.id == started.id));
    receiver.wait_for(2).await;
    wait_until_all_succeeded(svix, &app, &ep.id, 2).await;
    let bulk = BulkReplayIn {
        status: Some(MessageStatus::Success),
        ..BulkReplayIn::new(since())
    };
    let bulk = svix
        .endpoint()
        .bulk_replay(app.clone(), ep.id.clone(), bulk, None)
        .await
        .expect("endpoint.bulk_replay");
    assert_eq!(bulk.task, BackgroundTaskType::EndpointBulkReplay);
    let resent = finished(svix, &bulk.id).await;
    assert_eq!(
        resent.data["messagesSent"], 2,
        "the bulk replay sent both again"
    );
    receiver.wait_for(4).await;
    assert_eq!(verified(svix, &app, &ep.id, &receiver).await.len(), 4);
    statistics(svix, &app).await;
    let purge = svix
        .message()
        .expunge_all_contents(app.clone(), None)
        .await
        .expect("message.expunge_all_contents");
    assert_eq!(purge.task, BackgroundTaskType::ApplicationPurgeContent);
    let purged = finished(svix, &purge.id).await;
    assert_eq!(purged.data["messagesPurged"], 2);
    svix.application().delete(app).await.unwrap();
}

/// Waits (bounded) until the endpoint's `n` attempted messages all show success.
async fn wait_until_all_succeeded(svix: &Svix, app: &str, ep: &str, n: usize) {
    eventually(async || {
        let attempted = svix
            .message_attempt()
            .list_attempted_messages(app.into(), ep.into(), None)
            .await
            .expect("message_attempt.list_attempted_messages");
        let statuses: Vec<MessageStatus> = attempted.data.iter().map(|m| m.status).collect();
        if statuses.len() == n && statuses.iter().all(|s| *s == MessageStatus::Success) {
            Ok(())
        } else {
            Err(format!("not all {n} delivered yet: {statuses:?}"))
        }
    })
    .await
}

/// `statistics.aggregate_app_stats` and `aggregate_event_types`, counted by hookd as tasks.
async fn statistics(svix: &Svix, app: &str) {
    let input = AppUsageStatsIn {
        app_ids: Some(set(&[app, "no-such-app"])),
        ..AppUsageStatsIn::new(time("2020-01-01T00:00:00Z"), time("2100-01-01T00:00:00Z"))
    };
    let usage = svix
        .statistics()
        .aggregate_app_stats(input, None)
        .await
        .expect("statistics.aggregate_app_stats");
    assert_eq!(usage.unresolved_app_ids, set(&["no-such-app"]));
    let counted = finished(svix, &usage.id).await;
    assert_eq!(
        counted.data["appStats"],
        json!([{"appId": app, "appUid": null, "messageDestinations": 2}])
    );
    let aggregate = svix
        .statistics()
        .aggregate_event_types()
        .await
        .expect("statistics.aggregate_event_types");
    let listed = finished(svix, &aggregate.id).await;
    let lines = listed.data["event_types"].as_array().expect("event_types");
    let mine: Vec<&serde_json::Value> = lines.iter().filter(|l| l["appId"] == app).collect();
    assert_eq!(
        mine,
        [&json!({"appId": app, "explicitlySubscribedEventTypes": [], "hasCatchAllEndpoint": true})]
    );
}

/// An OpenAPI document's webhooks become event types with their schemas.
async fn event_catalog(svix: &Svix) {
    let name = "parcel.sent".to_owned();
    let spec = json!({
        "openapi": "3.1.0", "info": {"title": "Shop", "version": "1"},
        "webhooks": {&name: {"post": {"summary": "A parcel was sent", "requestBody": {"content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/Parcel"}}}}}}},
        "components": {"schemas": {"Parcel": {"type": "object", "properties": {"id": {"type": "integer"}}}}},
    });
    let import = |dry_run: bool| EventTypeImportOpenApiIn {
        spec: Some(spec.clone()),
        dry_run: Some(dry_run),
        ..EventTypeImportOpenApiIn::new()
    };
    let dry = svix
        .event_type()
        .import_openapi(import(true), None)
        .await
        .expect("event_type.import_openapi, a dry run");
    let would: Vec<String> = dry
        .data
        .to_modify
        .unwrap_or_default()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!((would, dry.data.modified), (vec![name.clone()], vec![]));
    let done = svix
        .event_type()
        .import_openapi(import(false), None)
        .await
        .expect("event_type.import_openapi");
    assert_eq!(done.data.modified, std::slice::from_ref(&name));
    let imported = svix.event_type().get(name).await.unwrap();
    let schemas = imported.schemas.expect("the imported schemas");
    assert_eq!(schemas["1"]["properties"]["id"], json!({"type": "integer"}));
}
