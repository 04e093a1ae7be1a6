//! Free text the API stores is one line of what it says: the real `hookd serve` answers 422
//! naming the field for a control character (CR, LF and TAB included) in any URL, name,
//! description or metadata key or value, on every route that takes one, and for an endpoint
//! URL the URL parser would quietly rewrite (white space, `\`). An event type's description,
//! documentation, keeps its line breaks.

mod support;

use reqwest::Method;
use serde_json::{Value, json};
use support::{Api, Hookd};

const TOKEN: &str = "text-fields-admin-token";

/// Sends `body` to `path` with `method`; the status and JSON answer.
async fn send(hookd: &Hookd, method: Method, path: &str, body: Value) -> (u16, Value) {
    let response = reqwest::Client::new()
        .request(method, format!("{}/api/v1{path}", hookd.base_url))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn control_characters_are_refused_naming_the_field_on_every_route() {
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve_local(&database, TOKEN, &[]);
    let api = Api::new(&hookd, TOKEN);
    let (status, app) = api
        .post("/app", json!({"name": "Shop", "uid": "shop"}))
        .await
        .unwrap();
    assert_eq!(status, 201, "{app}");
    let (status, ep) = api
        .post(
            "/app/shop/endpoint",
            json!({"url": "https://shop.example/hook", "uid": "main"}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{ep}");
    let (status, et) = api
        .post(
            "/event-type",
            json!({"name": "order.shipped", "description": "An order left"}),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{et}");

    let paragraph = "x\r\n\r\nDear customer, your account is suspended.";
    let url = "https://shop.example/hook";
    let message = |application: Value| json!({"eventType": "order.shipped", "payload": {}, "application": application});
    let refused: Vec<(Method, &str, Value, &str, &str)> = vec![
        // Applications: name, metadata keys and values; create, replace, patch, and the
        // application a publish or a portal link makes.
        (
            Method::POST,
            "/app",
            json!({"name": paragraph}),
            "name",
            "U+000D",
        ),
        (
            Method::POST,
            "/app",
            json!({"name": "tab\there"}),
            "name",
            "U+0009",
        ),
        (
            Method::POST,
            "/app",
            json!({"name": "A", "metadata": {"team": "x\ny"}}),
            "metadata",
            "U+000A",
        ),
        (
            Method::POST,
            "/app",
            json!({"name": "A", "metadata": {"te\u{85}am": "x"}}),
            "metadata",
            "U+0085",
        ),
        (
            Method::PUT,
            "/app/shop",
            json!({"name": "\u{7f}"}),
            "name",
            "U+007F",
        ),
        (
            Method::PATCH,
            "/app/shop",
            json!({"name": paragraph}),
            "name",
            "U+000D",
        ),
        (
            Method::PATCH,
            "/app/shop",
            json!({"metadata": {"k": "\u{202E}gnp.exe"}}),
            "metadata",
            "U+202E",
        ),
        (
            Method::POST,
            "/app/lazy/msg",
            message(json!({"name": paragraph})),
            "name",
            "U+000D",
        ),
        (
            Method::POST,
            "/auth/app-portal-access/lazy",
            json!({"application": {"name": "A", "metadata": {"k": "a\u{0}"}}}),
            "metadata",
            "U+0000",
        ),
        // Endpoints: URL, description, metadata; create, replace, patch.
        (
            Method::POST,
            "/app/shop/endpoint",
            json!({"url": format!("{url}{paragraph}")}),
            "url",
            "U+000D",
        ),
        (
            Method::POST,
            "/app/shop/endpoint",
            json!({"url": format!("{url}/a b")}),
            "url",
            "white space",
        ),
        (
            Method::POST,
            "/app/shop/endpoint",
            json!({"url": "https://evil.example\\@shop.example/"}),
            "url",
            "%5C",
        ),
        (
            Method::POST,
            "/app/shop/endpoint",
            json!({"url": url, "description": paragraph}),
            "description",
            "U+000D",
        ),
        (
            Method::PUT,
            "/app/shop/endpoint/main",
            json!({"url": url, "metadata": {"k": "\t"}}),
            "metadata",
            "U+0009",
        ),
        (
            Method::PATCH,
            "/app/shop/endpoint/main",
            json!({"url": format!("\u{1}{url}")}),
            "url",
            "U+0001",
        ),
        (
            Method::PATCH,
            "/app/shop/endpoint/main",
            json!({"description": "a\u{2028}b"}),
            "description",
            "U+2028",
        ),
        (
            Method::POST,
            "/operational-webhook/endpoint",
            json!({"url": url, "description": "a\nb"}),
            "description",
            "U+000A",
        ),
        // Event types: documentation may break lines, not hold other controls.
        (
            Method::POST,
            "/event-type",
            json!({"name": "order.paid", "description": "bell\u{7}"}),
            "description",
            "U+0007",
        ),
        (
            Method::PATCH,
            "/event-type/order.shipped",
            json!({"description": "a\rb"}),
            "description",
            "U+000D",
        ),
        // Tokens.
        (
            Method::POST,
            "/auth/token",
            json!({"name": paragraph}),
            "name",
            "U+000D",
        ),
    ];
    for (method, path, body, field, why) in refused {
        let (status, answer) = send(&hookd, method.clone(), path, body).await;
        let detail = &answer["detail"][0];
        let loc = detail["loc"].as_array().cloned().unwrap_or_default();
        assert!(
            status == 422
                && loc.last() == Some(&json!(field))
                && detail["msg"].as_str().unwrap_or_default().contains(why),
            "{method} {path}: {field} with {why} expected, got {status} {answer}"
        );
    }

    // What was refused was not stored.
    let app = api.get("/app/shop").await;
    assert_eq!(app["name"], "Shop");
    let ep = api.get("/app/shop/endpoint/main").await;
    assert_eq!(ep["url"], url);
    assert_eq!(ep["description"], "");
    assert_eq!(
        api.get("/event-type/order.shipped").await["description"],
        "An order left"
    );

    // An event type's description keeps its Markdown's line breaks; a URL may carry an escaped
    // line break; a name may hold any printable text.
    let documented = "Sent when an order leaves.\r\n\n\t- `id`: the order";
    let (status, answer) = send(
        &hookd,
        Method::PATCH,
        "/event-type/order.shipped",
        json!({"description": documented}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["description"], documented);
    let (status, answer) = send(
        &hookd,
        Method::PATCH,
        "/app/shop/endpoint/main",
        json!({"url": "https://shop.example/a%20b?q=%0D%0A", "description": "Café \"main\" ✓"}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
}
