//! The experiments of the seed `000_…` (sending webhooks for Bookstore), each reproduced with
//! `hookd serve --dev` and `hookd listen` alone, as docs/receiving.md shows a reader: a slow
//! endpoint, a failure then retries, a redirect, `Retry-After: 600`, `410 Gone`, and two
//! deliveries in flight per customer. Each test prints the seed's answer beside hookd's and
//! asserts hookd's. Retry delays are read on hookd's clock, which the tests move.

mod support;

use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};
use support::process::Announced;
use support::{Api, Hookd, TestTime, eventually, wait_until};

const TOKEN: &str = "seed-experiments-admin-token";

/// A `hookd serve --dev` on a fresh SQLite file and a clock the test moves.
struct Lab {
    api: Api,
    time: TestTime,
    _hookd: Hookd,
    _dir: tempfile::TempDir,
}

impl Lab {
    fn start() -> Self {
        let (database, dir) = hookd_store::testing::fresh_sqlite();
        let time = TestTime::start();
        let hookd = time.serve(&["--dev", "--database", &database, "--admin-token", TOKEN]);
        Self {
            api: Api::new(&hookd, TOKEN),
            time,
            _hookd: hookd,
            _dir: dir,
        }
    }

    /// A new application with one endpoint at `url` (plus the `extra` endpoint fields);
    /// returns the application's and the endpoint's ids.
    async fn customer(&self, url: &str, extra: Value) -> (String, String) {
        let (status, app) = self
            .api
            .post("/app", json!({"name": "school"}))
            .await
            .unwrap();
        assert_eq!(status, 201, "{app}");
        let app = app["id"].as_str().unwrap().to_owned();
        let mut endpoint = json!({"url": url});
        endpoint
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let (status, ep) = self
            .api
            .post(&format!("/app/{app}/endpoint"), endpoint)
            .await
            .unwrap();
        assert_eq!(status, 201, "{ep}");
        (app, ep["id"].as_str().unwrap().to_owned())
    }

    /// Publishes the seed's `order.shipped` envelope to `app`; returns the message id.
    async fn ship(&self, app: &str) -> String {
        let payload = json!({
            "type": "order.shipped",
            "timestamp": "2026-11-14T09:53:14Z",
            "data": {"orderId": 1003, "shipmentId": "SHP-1003"},
        });
        self.api.publish(app, "order.shipped", payload).await
    }

    /// The delivery of `msg` to `endpoint` as `GET …/msg/{msg}/endpoint` shows it.
    async fn delivery(&self, app: &str, msg: &str, endpoint: &str) -> Value {
        let list = self
            .api
            .get(&format!("/app/{app}/msg/{msg}/endpoint"))
            .await;
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["id"] == endpoint)
            .cloned()
            .unwrap_or_else(|| panic!("no delivery to {endpoint}: {list}"))
    }
}

fn listen(args: &[&str]) -> Announced {
    let mut command = Command::new(env!("CARGO_BIN_EXE_hookd"));
    command.args(["listen", "--port", "0"]).args(args);
    Announced::start(command)
}

/// Prints one of the seed's questions with its answer and hookd's.
fn compare(question: &str, seed: &str, hookd: &str) {
    println!("{question}\n  seed:  {seed}\n  hookd: {hookd}");
}

/// The value of `name` in each of `listen`'s reports, in arrival order.
fn header_values(output: &str, name: &str) -> Vec<String> {
    let prefix = format!("{name}: ");
    output
        .lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn a_20_second_endpoint_does_not_hold_up_the_publish_and_meets_the_15_second_timeout() {
    let lab = Lab::start();
    let slow = listen(&["--delay", "20s"]);
    let (app, endpoint) = lab.customer(&format!("{}/hook", slow.url), json!({})).await;

    let started = Instant::now();
    let msg = lab.ship(&app).await;
    let publish_took = started.elapsed();
    assert!(
        !slow.output().contains("hung up"),
        "the publish returned only after the delivery ended"
    );

    // hookd's default attempt timeout is 15 s: the listener sees the sender hang up then.
    let output = eventually_long(&slow, "the sender hung up after").await;
    let hung_up = output
        .lines()
        .find_map(|l| l.split("the sender hung up after ").nth(1))
        .and_then(|rest| rest.split('s').next())
        .and_then(|seconds| seconds.parse::<f64>().ok())
        .expect("hang-up time printed");
    assert!((14.0..20.0).contains(&hung_up), "{output}");
    let attempts = wait_until(&lab.api, &format!("/app/{app}/attempt/msg/{msg}"), |a| {
        a["data"].as_array().is_some_and(|d| !d.is_empty())
    })
    .await;
    let attempt = &attempts["data"][0];
    assert_eq!(attempt["status"], 2, "failed: {attempt}");
    assert_eq!(attempt["endpointId"], endpoint.as_str(), "{attempt}");
    compare(
        "How long does the request that ships the order take?",
        "3.5 ms; the webhook goes out in the background and hits the 15-second timeout",
        &format!(
            "the publish took {publish_took:.1?}; the delivery was cut after {hung_up:.1} s \
             and recorded as failed"
        ),
    );
}

#[tokio::test]
async fn a_failed_attempt_is_retried_with_the_same_webhook_id_and_a_new_timestamp_and_signature() {
    let lab = Lab::start();
    let flaky = listen(&["--fail", "2"]);
    let (app, _) = lab
        .customer(&format!("{}/hook", flaky.url), json!({}))
        .await;
    let msg = lab.ship(&app).await;

    flaky.wait_for_output("answered: 500", 1).await;
    lab.time.set(6_000); // past the second attempt's 5 s (+ up to 10 % jitter)
    flaky.wait_for_output("answered: 500", 2).await;
    lab.time.set(6_000 + 331_000); // past the third's 5 minutes (+ up to 10 %)
    let output = flaky.wait_for_output("answered: 200", 1).await;

    let ids = header_values(&output, "webhook-id");
    assert_eq!(ids, vec![msg.clone(); 3], "{output}");
    let timestamps = header_values(&output, "webhook-timestamp");
    let signatures = header_values(&output, "webhook-signature");
    for values in [&timestamps, &signatures] {
        let mut distinct = values.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "three different values: {values:?}");
    }
    let delays = retry_delays(&output);
    assert_eq!(delays.len(), 2, "{output}");
    // Each attempt is sent once hookd's clock passes its due time: the delays are the
    // schedule's (5 s, 5 min, each up to 10 % longer) plus the seconds this test takes.
    assert!((5..=15).contains(&delays[0]), "{delays:?}");
    assert!((300..=345).contains(&delays[1]), "{delays:?}");
    compare(
        "After a 500, do webhook-id, webhook-timestamp and the signature stay the same?",
        "requests=3, webhook-ids=1, timestamps=3; delays of 5 s and 5 min plus jitter",
        &format!(
            "requests=3, webhook-ids=1, timestamps=3, signatures=3; delays {} s and {} s",
            delays[0], delays[1]
        ),
    );
}

#[tokio::test]
async fn a_301_is_not_followed_and_counts_as_a_failed_attempt() {
    let lab = Lab::start();
    let moved = listen(&["--status", "301", "--location", "/moved-here"]);
    let (app, _) = lab.customer(&format!("{}/old", moved.url), json!({})).await;
    let msg = lab.ship(&app).await;
    let attempts = wait_until(&lab.api, &format!("/app/{app}/attempt/msg/{msg}"), |a| {
        a["data"].as_array().is_some_and(|d| !d.is_empty())
    })
    .await;
    let attempt = &attempts["data"][0];
    assert_eq!(attempt["responseStatusCode"], 301, "{attempt}");
    assert_eq!(attempt["status"], 2, "failed: {attempt}");
    let output = moved.output();
    assert!(output.contains("POST /old "), "{output}");
    assert!(
        !output.contains("/moved-here "),
        "the redirect was followed: {output}"
    );
    compare(
        "The endpoint answers 301 Moved Permanently: follow it?",
        "no; a 3xx is a failed delivery",
        "not followed; the attempt is recorded as failed with status 301",
    );
}

#[tokio::test]
async fn a_503_with_retry_after_600_waits_ten_minutes_not_five_seconds() {
    let lab = Lab::start();
    let busy = listen(&["--status", "503", "--retry-after", "600"]);
    let (app, endpoint) = lab.customer(&format!("{}/hook", busy.url), json!({})).await;
    let msg = lab.ship(&app).await;
    busy.wait_for_output("answered: 503", 1).await;
    let delivery = eventually(async || {
        let delivery = lab.delivery(&app, &msg, &endpoint).await;
        match delivery["nextAttempt"].as_str() {
            Some(_) => Ok(delivery),
            None => Err(format!("no next attempt yet: {delivery}")),
        }
    })
    .await;
    let attempts = lab.api.get(&format!("/app/{app}/attempt/msg/{msg}")).await;
    let wait = seconds_between(
        attempts["data"][0]["timestamp"].as_str().unwrap(),
        delivery["nextAttempt"].as_str().unwrap(),
    );
    assert!((599..=601).contains(&wait), "next attempt in {wait} s");

    compare(
        "503 with Retry-After: 600: is the next attempt 5 seconds or 10 minutes away?",
        "(left to the reader)",
        &format!("{wait} s away (the delivery log's nextAttempt)"),
    );
}

#[tokio::test]
async fn a_410_disables_the_endpoint() {
    let lab = Lab::start();
    let gone = listen(&["--status", "410"]);
    let (app, endpoint) = lab.customer(&format!("{}/hook", gone.url), json!({})).await;
    lab.ship(&app).await;
    let ep = wait_until(&lab.api, &format!("/app/{app}/endpoint/{endpoint}"), |ep| {
        ep["disabled"] == true
    })
    .await;
    compare(
        "The endpoint answers 410 Gone.",
        "the subscription is disabled: Endpoint answered 410 Gone",
        &format!("endpoint disabled: {}", ep["disabled"]),
    );
}

#[tokio::test]
async fn two_in_flight_per_customer_and_other_customers_are_not_held_up() {
    let lab = Lab::start();
    let school = listen(&["--delay", "1s"]);
    let library = listen(&[]);
    let (school_app, _) = lab
        .customer(
            &format!("{}/hook", school.url),
            json!({"maxConcurrency": 2}),
        )
        .await;
    let (library_app, _) = lab
        .customer(&format!("{}/hook", library.url), json!({}))
        .await;
    const PILE: usize = 8;
    for _ in 0..PILE {
        lab.ship(&school_app).await;
    }
    lab.ship(&library_app).await;
    library.wait_for_output("answered: 200", 1).await;
    let school_done_then = school.output().matches("answered: 200 after").count();
    assert!(
        school_done_then < PILE,
        "the other customer waited for the whole pile"
    );

    let output = school.wait_for_output("answered: 200 after", PILE).await;
    let in_flight: Vec<u32> = output
        .lines()
        .filter_map(|l| l.strip_prefix("in flight: "))
        .filter_map(|rest| rest.split(' ').next()?.parse().ok())
        .collect();
    assert_eq!(in_flight.len(), PILE, "{output}");
    assert_eq!(in_flight.iter().max(), Some(&2), "{in_flight:?}");
    compare(
        "At most 2 deliveries in flight per customer; are the others held up?",
        "(left to the reader: a test with 100 messages piled up for one customer)",
        &format!(
            "in flight at the receiver: {in_flight:?}; the other customer's delivery arrived \
             with {school_done_then} of {PILE} done"
        ),
    );
}

/// Waits up to 40 s for `pattern` (longer than [`eventually`], for a 15 s timeout to pass).
async fn eventually_long(listener: &Announced, pattern: &str) -> String {
    let deadline = Instant::now() + std::time::Duration::from_secs(40);
    loop {
        let output = listener.output();
        if output.contains(pattern) {
            return output;
        }
        assert!(
            Instant::now() < deadline,
            "never printed {pattern:?}: {output}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Whole seconds from one RFC 3339 time to another.
fn seconds_between(from: &str, to: &str) -> i64 {
    let parse = |text: &str| {
        hookd_core::Timestamp::parse_rfc3339(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .as_millis()
    };
    (parse(to) - parse(from)) / 1000
}

/// The retry delays `listen` printed ("…, N s after the previous"), in arrival order.
fn retry_delays(output: &str) -> Vec<i64> {
    output
        .lines()
        .filter(|line| line.starts_with("in flight: "))
        .filter_map(|l| l.split(", ").nth(1)?.split(" s after the previous").next())
        .filter_map(|seconds| seconds.parse().ok())
        .collect()
}
