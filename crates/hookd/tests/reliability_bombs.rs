//! Promise: no request costs hookd more than a bounded amount. Each "bomb" (a small request
//! that expands, nests or backtracks without bound on a naive parser or validator) is answered
//! with a 4xx within a second by a hookd whose address space is capped a little above what it
//! uses at rest, and hookd stays up: `/health` answers and a normal publish is accepted after.
//!
//! The bombs: a YAML alias bomb ("billion laughs"), 20,000 levels of nesting in YAML and in
//! JSON (an import's `specRaw`, a JSON body, a publish's payload), `$ref` fan-out in an import,
//! a schema `pattern` with a backreference, a backtracking-catastrophic pattern, and under
//! `--strict-event-types` a recursive `anyOf` whose error costs 2^depth to find.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use support::{Api, Hookd};

const TOKEN: &str = "bombs-admin-token";
/// Address space hookd may take beyond what it has mapped once started.
const HEADROOM: u64 = 768 << 20;
/// The bound on each answer: generous for a loaded machine, far below what a bomb costs.
const BOUND: Duration = Duration::from_secs(1);

/// Caps the address space of the process `pid` at what it maps now plus `headroom` bytes: an
/// allocation past it fails, and hookd aborts rather than grow.
fn cap_address_space(pid: u32, headroom: u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    let mapped_kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmSize:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmSize in /proc/<pid>/status");
    let cap = mapped_kib * 1024 + headroom;
    let limit = libc::rlimit {
        rlim_cur: cap,
        rlim_max: cap,
    };
    let pid = libc::pid_t::try_from(pid).expect("a pid");
    // SAFETY: `limit` outlives the call; no old limit is asked for.
    let result = unsafe { libc::prlimit(pid, libc::RLIMIT_AS, &limit, std::ptr::null_mut()) };
    assert_eq!(result, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// Sends `body` (JSON text, which may nest past what a `serde_json::Value` here could) to
/// `path`; asserts a 4xx within [`BOUND`]; returns the answer's text.
async fn refused(hookd: &Hookd, path: &str, body: String) -> String {
    let started = Instant::now();
    let response = reqwest::Client::new()
        .post(format!("{}/api/v1{path}", hookd.base_url))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {path}: hookd did not answer: {e}"));
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    let took = started.elapsed();
    eprintln!("POST {path}: {status} in {took:?}");
    assert!((400..500).contains(&status), "POST {path}: {status} {text}");
    assert!(took < BOUND, "POST {path} took {took:?}: {text}");
    text
}

fn import(document: Value) -> String {
    json!({ "spec": document }).to_string()
}

fn import_raw(text: &str) -> String {
    json!({ "specRaw": text }).to_string()
}

/// The "billion laughs" in 521 bytes: nine levels of nine aliases, 9^9 strings once expanded.
fn alias_bomb() -> String {
    let mut text = String::from(
        "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    for (below, level) in "abcdefgh".chars().zip("bcdefghi".chars()) {
        let aliases = vec![format!("*{below}"); 9].join(",");
        text.push_str(&format!("{level}: &{level} [{aliases}]\n"));
    }
    text
}

/// A document whose one webhook's schema holds ten `$ref`s to a schema of ten `$ref`s, seven
/// levels deep: 10^7 values from about 2 KB.
fn ref_fan_out() -> Value {
    let mut schemas = Map::new();
    schemas.insert("L0".into(), json!({"type": "string"}));
    for level in 1..=7 {
        let below = json!({"$ref": format!("#/components/schemas/L{}", level - 1)});
        schemas.insert(format!("L{level}"), json!({"allOf": vec![below; 10]}));
    }
    json!({
        "openapi": "3.1.0",
        "components": {"schemas": schemas},
        "webhooks": {"bomb.fanout": {"post": {"requestBody": {"content": {"application/json":
            {"schema": {"$ref": "#/components/schemas/L7"}}}}}}}
    })
}

fn nested_json(levels: usize) -> String {
    "[".repeat(levels) + &"]".repeat(levels)
}

/// A schema whose `tree` is an `anyOf` of two branches that both recurse into the items.
fn doubling_schema() -> Value {
    let branch = |size| json!({"type": "array", "maxItems": size, "items": {"$ref": "#/$defs/t"}});
    json!({"1": {
        "type": "object",
        "properties": {"tree": {"$ref": "#/$defs/t"}},
        "$defs": {"t": {"anyOf": [branch(1), branch(2), {"type": "integer"}]}}
    }})
}

fn nested_value(levels: usize, bottom: Value) -> Value {
    (0..levels).fold(bottom, |inner, _| json!([inner]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bomb_is_refused_within_a_second_by_a_capped_hookd_that_stays_up() {
    let (database, _dir) = hookd_store::testing::fresh_sqlite();
    let hookd = Hookd::serve_local(&database, TOKEN, &["--strict-event-types"]);
    cap_address_space(hookd.pid(), HEADROOM);
    let api = Api::new(&hookd, TOKEN);
    let app = api.app_with_endpoint("http://127.0.0.1:9/hook").await;
    let create = |name: &str, schemas: Value| {
        json!({"name": name, "description": "d", "schemas": schemas}).to_string()
    };

    let bomb = alias_bomb();
    assert!(bomb.len() <= 521, "{} bytes", bomb.len());
    let answer = refused(&hookd, "/event-type/import/openapi", import_raw(&bomb)).await;
    assert!(
        answer.contains("specRaw") && answer.contains("aliases"),
        "{answer}"
    );

    let deep_yaml = "- ".repeat(20_000) + "x";
    let answer = refused(&hookd, "/event-type/import/openapi", import_raw(&deep_yaml)).await;
    assert!(
        answer.contains("specRaw") && answer.contains("deeper"),
        "{answer}"
    );
    let deep_json = nested_json(20_000);
    let answer = refused(&hookd, "/event-type/import/openapi", import_raw(&deep_json)).await;
    assert!(answer.contains("specRaw"), "{answer}");
    let answer = refused(
        &hookd,
        "/event-type/import/openapi",
        format!("{{\"spec\": {deep_json}}}"),
    )
    .await;
    assert!(answer.contains("recursion limit"), "{answer}");
    let deep_payload = format!("{{\"eventType\": \"a.b\", \"payload\": {{\"a\": {deep_json}}}}}");
    let answer = refused(&hookd, &format!("/app/{app}/msg"), deep_payload).await;
    assert!(
        answer.contains("payload") && answer.contains("deeper"),
        "{answer}"
    );
    let deep_schema = format!(
        "{{\"name\": \"a.b\", \"description\": \"d\", \"schemas\": {{\"1\": {deep_json}}}}}"
    );
    refused(&hookd, "/event-type", deep_schema).await;

    let answer = refused(&hookd, "/event-type/import/openapi", import(ref_fan_out())).await;
    assert!(
        answer.contains("spec") && answer.contains("$ref"),
        "{answer}"
    );

    let backreference = json!({"1": {"properties": {"s": {"pattern": "^(a+)\\1$"}}}});
    let answer = refused(&hookd, "/event-type", create("bomb.backref", backreference)).await;
    assert!(
        answer.contains("schemas") && answer.contains("backreferences"),
        "{answer}"
    );

    // Accepted (it is a valid schema), and checked in linear time.
    let backtracking = json!({"1": {"properties": {"s": {"pattern": "^(a+)+$"}}}});
    let (status, answer) = api
        .post(
            "/event-type",
            serde_json::from_str(&create("bomb.backtrack", backtracking)).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{answer}");
    let evil = json!({"eventType": "bomb.backtrack", "payload": {"s": format!("{}!", "a".repeat(10_000))}});
    let answer = refused(&hookd, &format!("/app/{app}/msg"), evil.to_string()).await;
    assert!(answer.contains("payload"), "{answer}");

    let (status, answer) = api
        .post(
            "/event-type",
            serde_json::from_str(&create("bomb.tree", doubling_schema())).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(status, 201, "{answer}");
    let tree = json!({"eventType": "bomb.tree", "payload": {"tree": nested_value(60, json!("x"))}});
    let answer = refused(&hookd, &format!("/app/{app}/msg"), tree.to_string()).await;
    assert!(answer.contains("payload"), "{answer}");

    let health = reqwest::get(format!("{}/api/v1/health", hookd.base_url))
        .await
        .unwrap();
    assert!(health.status().is_success(), "{}", health.status());
    api.publish(
        &app,
        "bomb.tree",
        json!({"tree": nested_value(60, json!(1))}),
    )
    .await;
}
