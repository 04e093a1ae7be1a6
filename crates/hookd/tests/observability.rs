//! What operators see of a running hookd: `/metrics` after real deliveries (a success, a 500
//! and an SSRF refusal to loopback receivers), read by the official Python `prometheus_client`
//! parser, with counters by outcome class, a latency histogram with buckets and no label that
//! could grow without bound; `/metrics` of an engine-only process on `--metrics-listen`; and
//! the `x-request-id` of every API response, echoed or made, and found in the request's JSON
//! log lines; and text log lines written to a file, free of terminal colour codes.

mod support;

use std::process::Stdio;

use axum::http::StatusCode;
use hookd_engine::testing::Receiver;
use serde_json::{Value, json};
use support::{Api, Hookd, eventually, run_python_script};

const TOKEN: &str = "observability-test-admin-token";
const METRICS_TOKEN: &str = "observability-test-metrics-token";

/// hookd on a fresh SQLite file, delivering to loopback once per message (no retries), logging
/// JSON at `info` to `stderr`.
fn serve(database: &str, stderr: Stdio, extra: &[&str]) -> Hookd {
    let args = [&["--retry-schedule", "0", "--log-json"], extra].concat();
    Hookd::serve_local_with(database, TOKEN, &args, &[("HOOKD_LOG", "info")], stderr)
}

async fn scrape(hookd: &Hookd, token: Option<&str>) -> reqwest::Response {
    let request = reqwest::Client::new().get(format!("{}/metrics", hookd.base_url));
    let request = match token {
        Some(token) => request.bearer_auth(token),
        None => request,
    };
    request.send().await.unwrap()
}

/// The value of the sample named `name` whose labels include `labels`.
fn sample(families: &[Value], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    families
        .iter()
        .flat_map(|f| f["samples"].as_array().unwrap())
        .find(|s| {
            s["name"] == name
                && labels
                    .iter()
                    .all(|(k, v)| s["labels"][*k].as_str() == Some(*v))
        })
        .map(|s| s["value"].as_f64().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_real_deliveries_by_outcome_as_prometheus_client_reads_them() {
    let Some(python) = support::python() else {
        return;
    };
    let ok = Receiver::always(StatusCode::OK).await;
    let broken = Receiver::always(StatusCode::INTERNAL_SERVER_ERROR).await;
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = serve(
        &database,
        Stdio::null(),
        &["--metrics-token", METRICS_TOKEN],
    );
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint(&ok.url).await;
    let broken_ep = api.endpoint(&app, &broken.url).await;
    // A link-local (cloud metadata) address: the SSRF guard refuses it before connecting.
    let refused_ep = api.endpoint(&app, "http://169.254.169.254/latest").await;
    let message = api.publish(&app, "order.shipped", json!({"n": 1})).await;

    // The token is required, and only the right one opens /metrics.
    assert_eq!(scrape(&hookd, None).await.status(), 401);
    assert_eq!(scrape(&hookd, Some("wrong")).await.status(), 401);
    let text = eventually(async || {
        let text = scrape(&hookd, Some(METRICS_TOKEN))
            .await
            .text()
            .await
            .unwrap();
        let settled = r#"hookd_deliveries_settled_total{result="failed"} 2"#;
        match text.contains(settled) {
            true => Ok(text),
            false => Err(format!("not every delivery settled yet:\n{text}")),
        }
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metrics.txt");
    std::fs::write(&path, &text).unwrap();
    let parsed = run_python_script(&python, "prometheus_parse.py", &[path.to_str().unwrap()]);
    let families: Vec<Value> = serde_json::from_str(&parsed).unwrap();

    let attempts = |outcome| {
        sample(
            &families,
            "hookd_delivery_attempts_total",
            &[("outcome", outcome)],
        )
    };
    assert_eq!(attempts("2xx"), Some(1.0), "{text}");
    assert_eq!(attempts("5xx"), Some(1.0), "{text}");
    assert_eq!(attempts("ssrf_refused"), Some(1.0), "{text}");
    let settled = |result| {
        sample(
            &families,
            "hookd_deliveries_settled_total",
            &[("result", result)],
        )
    };
    assert_eq!(
        (settled("succeeded"), settled("failed")),
        (Some(1.0), Some(2.0))
    );

    let latency = families
        .iter()
        .find(|f| f["name"] == "hookd_delivery_attempt_duration_seconds")
        .expect("the attempt latency family");
    assert_eq!(latency["type"], "histogram", "buckets, not a summary");
    let buckets = latency["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["name"] == "hookd_delivery_attempt_duration_seconds_bucket")
        .count();
    assert!(buckets > 3, "{latency}");
    let count = "hookd_delivery_attempt_duration_seconds_count";
    assert_eq!(sample(&families, count, &[("outcome", "2xx")]), Some(1.0));
    let inf = [("outcome", "5xx"), ("le", "+Inf")];
    assert_eq!(
        sample(
            &families,
            "hookd_delivery_attempt_duration_seconds_bucket",
            &inf
        ),
        Some(1.0)
    );

    // The engine's store writes: every attempt recorded, timed in millisecond buckets.
    let record = [("op", "record")];
    assert_eq!(
        sample(&families, "hookd_store_write_rows_total", &record),
        Some(3.0),
        "{text}"
    );
    let writes = sample(
        &families,
        "hookd_store_write_duration_seconds_count",
        &record,
    );
    assert!(writes.is_some_and(|n| (1.0..=3.0).contains(&n)), "{text}");
    // Each of the three answers noted its endpoint's adaptive concurrency limit, which starts
    // at 4 and grows only under load.
    let limits = "hookd_endpoint_concurrency_limit";
    let count = format!("{limits}_count");
    assert_eq!(sample(&families, &count, &[]), Some(3.0), "{text}");
    assert_eq!(
        sample(&families, &format!("{limits}_sum"), &[]),
        Some(12.0),
        "{text}"
    );
    let first = [("op", "record"), ("le", "0.0005")];
    assert!(
        sample(
            &families,
            "hookd_store_write_duration_seconds_bucket",
            &first
        )
        .is_some(),
        "sub-millisecond buckets: {text}"
    );

    // The API's own requests, by route template.
    let published = [
        ("route", "/api/v1/app/{app_id}/msg"),
        ("method", "POST"),
        ("status", "2xx"),
    ];
    assert_eq!(
        sample(&families, "hookd_api_requests_total", &published),
        Some(1.0)
    );
    // The gauges sampled from the database are there.
    for gauge in [
        "hookd_queue_depth",
        "hookd_deliveries_in_flight",
        "hookd_queue_oldest_due_age_seconds",
        "hookd_endpoints_disabled",
        "hookd_outbox_lag_seconds",
    ] {
        let family = families.iter().find(|f| f["name"] == gauge);
        assert_eq!(family.map(|f| &f["type"]), Some(&json!("gauge")), "{gauge}");
    }
    assert!(sample(&families, "hookd_queue_depth", &[("state", "due")]).is_some());

    // No label carries a URL, an address or an id.
    let ids = [
        app.as_str(),
        broken_ep.as_str(),
        refused_ep.as_str(),
        message.as_str(),
    ];
    for family in &families {
        for s in family["samples"].as_array().unwrap() {
            for (name, value) in s["labels"].as_object().unwrap() {
                let value = value.as_str().unwrap();
                assert!(
                    !value.contains("://")
                        && !value.contains("127.0.0.1")
                        && !value.contains("169.254")
                        && !ids.iter().any(|id| value.contains(id))
                        && !["app_", "ep_", "msg_", "atmpt_"]
                            .iter()
                            .any(|prefix| value.starts_with(prefix)),
                    "label {name}={value:?} on {}",
                    s["name"]
                );
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_only_process_serves_metrics_on_its_own_listener() {
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let address = format!("127.0.0.1:{port}");
    let _engine = Hookd::serve(&[
        "--database",
        &database,
        "--role",
        "engine",
        "--metrics-listen",
        &address,
    ]);
    let text = eventually(async || {
        let response = reqwest::get(format!("http://{address}/metrics")).await;
        let text = response.map_err(|e| e.to_string())?.text().await.unwrap();
        match text.contains("hookd_queue_depth{state=\"due\"} 0") {
            true => Ok(text),
            false => Err(format!("no queue depth yet:\n{text}")),
        }
    })
    .await;
    assert!(
        text.contains("# TYPE hookd_outbox_lag_seconds gauge"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_api_response_has_a_request_id_that_its_log_lines_carry() {
    let (database, dir) = hookd_store::testing::fresh_sqlite();
    let log = dir.path().join("stderr.log");
    let hookd = serve(
        &database,
        Stdio::from(std::fs::File::create(&log).unwrap()),
        &["--access-log"],
    );
    let client = reqwest::Client::new();
    let get = async |path: &str, id: Option<&str>| {
        let mut request = client
            .get(format!("{}{path}", hookd.base_url))
            .bearer_auth(TOKEN);
        if let Some(id) = id {
            request = request.header("x-request-id", id);
        }
        let response = request.send().await.unwrap();
        let header = response
            .headers()
            .get("x-request-id")
            .map(|v| v.to_str().unwrap().to_owned());
        (response.status().as_u16(), header)
    };
    let made = |header: Option<String>| {
        let id = header.expect("an x-request-id");
        assert!(
            id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
        id
    };

    assert_eq!(
        get("/api/v1/app", Some("e2e-request-1")).await,
        (200, Some("e2e-request-1".to_owned()))
    );
    let (status, header) = get("/api/v1/app", None).await;
    assert_eq!(status, 200);
    let first = made(header);
    let (_, header) = get("/api/v1/app", None).await;
    assert_ne!(made(header), first, "each request gets its own id");
    // A malformed id is not echoed (it would go into logs as it is): a new one replaces it.
    let (_, header) = get("/api/v1/app", Some("two words")).await;
    made(header);
    // Errors carry one too, even on no route at all.
    let (status, header) = get("/api/v1/no-such-route", None).await;
    assert_eq!(status, 404);
    made(header);

    // The request's audit line, as JSON, names the request id in its span.
    let line = eventually(async || {
        let text = std::fs::read_to_string(&log).unwrap();
        text.lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|line| line["span"]["request_id"] == "e2e-request-1")
            .ok_or_else(|| format!("no JSON log line with the request id in:\n{text}"))
    })
    .await;
    assert_eq!(line["target"], "hookd::audit", "{line}");
    assert_eq!(line["fields"]["action"], "token.use", "{line}");
    assert_eq!(line["span"]["route"], "/api/v1/app", "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_log_lines_written_to_a_file_have_no_colour_codes() {
    let (database, dir) = hookd_store::testing::fresh_sqlite();
    let log = dir.path().join("stderr.log");
    // `NO_COLOR` empty counts as unset (no-color.org): a runner that sets it must not hide a
    // missing terminal check.
    let hookd = Hookd::serve_local_with(
        &database,
        TOKEN,
        &["--access-log"],
        &[("HOOKD_LOG", "info"), ("NO_COLOR", "")],
        Stdio::from(std::fs::File::create(&log).unwrap()),
    );
    let api = Api::new(&hookd, TOKEN);
    api.get("/app").await;

    let text = eventually(async || {
        let text = std::fs::read_to_string(&log).unwrap();
        if text.contains("token.use") {
            Ok(text)
        } else {
            Err(format!("no audit line of the request in:\n{text}"))
        }
    })
    .await;
    assert!(
        !text.contains("\x1b["),
        "colour codes in a log file:\n{text:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_burst_at_the_default_log_level_writes_no_line_per_request() {
    const BURST: usize = 300;
    let receiver = Receiver::always(StatusCode::OK).await;
    let (database, dir) = hookd_store::testing::fresh_sqlite();
    let log = dir.path().join("stderr.log");
    let hookd = serve(
        &database,
        Stdio::from(std::fs::File::create(&log).unwrap()),
        &[],
    );
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint(&receiver.url).await;
    let before = std::fs::read_to_string(&log).unwrap().lines().count();
    for n in 0..BURST {
        api.publish(&app, "order.shipped", json!({ "n": n })).await;
    }
    receiver.wait_for(BURST).await;
    let text = std::fs::read_to_string(&log).unwrap();
    let burst_lines: Vec<&str> = text.lines().skip(before).collect();
    assert!(
        burst_lines.len() < 10,
        "{BURST} publishes and deliveries wrote {} lines:\n{}",
        burst_lines.len(),
        burst_lines.join("\n")
    );
}
