//! The event catalog from an OpenAPI document, end to end: `importOpenapi` (YAML, a dry run,
//! then for real, then `replaceAll`) fills the catalog with each webhook's schema; with
//! `--strict-event-types` a payload its event type's schema refuses is a 422 naming the JSON
//! path; a test send without a catalog example sends one made from the schema.

mod support;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use serde_json::{Value, json};
use support::{Api, Hookd};

const TOKEN: &str = "event-catalog-test-admin-token";

const SPEC: &str = "
openapi: 3.1.0
info: {title: Shop, version: '1'}
webhooks:
  order.shipped:
    post:
      summary: An order left the warehouse
      requestBody:
        content:
          application/json:
            schema: {$ref: '#/components/schemas/Order'}
  order.cancelled:
    post:
      description: An order was cancelled
components:
  schemas:
    Order:
      type: object
      required: [orderId]
      properties:
        orderId: {type: integer, minimum: 1}
        carrier: {type: string}
";

fn names(list: &Value) -> Vec<&str> {
    let mut names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    names.sort_unstable();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_schema_holds_strict_publishes_and_makes_test_sends() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("hookd.db").display());
    let hookd = Hookd::serve_local(&database, TOKEN, &["--strict-event-types"]);
    let api = Api::new(&hookd, TOKEN);
    let import = |body: Value| async {
        let (status, out) = api.post("/event-type/import/openapi", body).await.unwrap();
        assert_eq!(status, 200, "{out}");
        out["data"].clone()
    };

    let dry = import(json!({"specRaw": SPEC, "dryRun": true})).await;
    assert_eq!(dry["modified"], json!([]));
    assert_eq!(dry["to_modify"].as_array().unwrap().len(), 2, "{dry}");
    let listed = api.get("/event-type").await.to_string();
    assert!(!listed.contains("order.shipped"), "nothing yet: {listed}");
    let applied = import(json!({"specRaw": SPEC})).await;
    assert_eq!(
        names(&applied["modified"]),
        ["order.cancelled", "order.shipped"]
    );
    let again = import(json!({"specRaw": SPEC})).await;
    assert_eq!(
        again["modified"],
        json!([]),
        "nothing changed the second time"
    );
    let shipped = api.get("/event-type/order.shipped?with_content=true").await;
    assert_eq!(shipped["description"], "An order left the warehouse");
    assert_eq!(
        shipped["schemas"]["1"]["properties"]["orderId"]["type"],
        "integer"
    );

    let receiver = Receiver::always(StatusCode::OK).await;
    let app = api.app_with_endpoint(&receiver.url).await;
    let ok = json!({"eventType": "order.shipped", "payload": {"orderId": 7}});
    let (status, body) = api.post(&format!("/app/{app}/msg"), ok).await.unwrap();
    assert_eq!(status, 202, "{body}");
    let wrong = json!({"eventType": "order.shipped", "payload": {"orderId": "seven"}});
    let (status, body) = api.post(&format!("/app/{app}/msg"), wrong).await.unwrap();
    assert_eq!(status, 422, "{body}");
    let detail = body.to_string();
    assert!(
        detail.contains("payload") && detail.contains("/orderId"),
        "{body}"
    );

    let endpoints = api.get(&format!("/app/{app}/endpoint")).await;
    let endpoint = endpoints["data"][0]["id"].as_str().unwrap().to_owned();
    let example = json!({"eventType": "order.shipped"});
    let path = format!("/app/{app}/endpoint/{endpoint}/send-example");
    let (status, sent) = api.post(&path, example).await.unwrap();
    assert!(status == 200 || status == 202, "{status} {sent}");
    receiver.wait_for(2).await;
    let bodies: Vec<Value> = receiver
        .requests()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    assert!(
        bodies.contains(&json!({"orderId": 1, "carrier": "string", "test": true})),
        "{bodies:?}"
    );

    let only_shipped = SPEC.replace(
        "  order.cancelled:\n    post:\n      description: An order was cancelled\n",
        "",
    );
    let replaced = import(json!({"specRaw": only_shipped, "replaceAll": true})).await;
    assert_eq!(names(&replaced["modified"]), ["order.cancelled"]);
    let cancelled = api.get("/event-type/order.cancelled").await;
    assert_eq!(cancelled["archived"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_document_that_cannot_be_imported_is_a_422_naming_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("hookd.db").display());
    let hookd = Hookd::serve_local(&database, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    for (body, named) in [
        (json!({}), "spec"),
        (json!({"specRaw": "openapi: 3.1.0\n"}), "webhooks"),
        (json!({"specRaw": ": : :\n- ["}), "specRaw"),
        (
            json!({"spec": {"webhooks": {"bad name!": {"post": {}}}}}),
            "bad name!",
        ),
    ] {
        let (status, out) = api.post("/event-type/import/openapi", body).await.unwrap();
        assert_eq!(status, 422, "{out}");
        assert!(out.to_string().contains(named), "{named}: {out}");
    }
}
