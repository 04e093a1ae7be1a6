//! The few admin calls a benchmark makes to set hookd up (applications, endpoints, their
//! secrets, ingest sources), over the same pooled HTTP client the load uses, and the requests
//! the load generator repeats: a publish, or a provider's signed webhook to an ingest source.

use std::sync::{Arc, Mutex};

use anyhow::{Context, bail};
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde_json::{Value, json};
use webhook_signature::stripe;

use crate::hookd::Hookd;
use crate::load::{Outcome, Requests};
use crate::publish::{Bodies, message};

/// What a publisher records per accepted message: its id (from the 202 answer) and when its
/// publish was sent, in unix nanoseconds (the clock the receiver stamps receipts with).
pub type SendLog = Arc<Mutex<Vec<(String, u64)>>>;

/// Now, in nanoseconds since the Unix epoch.
pub fn unix_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// hookd's v1 API, as its admin.
#[derive(Clone)]
pub struct Api {
    client: reqwest::Client,
    /// hookd's `/api/v1`.
    base: String,
    /// hookd's `/ingest/api/v1`.
    ingest: String,
    /// hookd's `/metrics`.
    metrics: String,
    authorization: HeaderValue,
}

impl Api {
    /// A client for `hookd` that keeps up to `pool` idle connections.
    pub fn new(hookd: &Hookd, pool: usize) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(pool)
            .tcp_nodelay(true)
            .build()
            .context("cannot build the HTTP client")?;
        let authorization = HeaderValue::from_str(&format!("Bearer {}", hookd.admin_token))?;
        Ok(Self {
            client,
            base: format!("{}/api/v1", hookd.base_url),
            ingest: format!("{}/ingest/api/v1", hookd.base_url),
            metrics: format!("{}/metrics", hookd.base_url),
            authorization,
        })
    }

    /// The absolute URL of `path` under `/api/v1`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Creates an application; returns its id.
    pub async fn create_app(&self, name: &str) -> anyhow::Result<String> {
        let app = self
            .post("/app", json!({ "name": name, "uid": name }))
            .await?;
        id_of(&app)
    }

    /// Creates an endpoint of `app` subscribed to every event type; returns its id.
    pub async fn create_endpoint(&self, app: &str, url: &str) -> anyhow::Result<String> {
        let endpoint = self
            .post(
                &format!("/app/{app}/endpoint"),
                json!({ "url": url, "description": "hookd-bench receiver" }),
            )
            .await?;
        id_of(&endpoint)
    }

    /// Creates `count` endpoints of `app`, pointing nowhere until [`Api::set_endpoint_url`]
    /// aims them (a verifying receiver needs their secrets before it starts); returns each
    /// one's id and secret.
    pub async fn endpoints_with_secrets(
        &self,
        app: &str,
        count: usize,
    ) -> anyhow::Result<Vec<(String, String)>> {
        let mut endpoints = Vec::with_capacity(count);
        for _ in 0..count {
            let id = self
                .create_endpoint(app, "http://127.0.0.1:9/unset")
                .await?;
            let secret = self.endpoint_secret(app, &id).await?;
            endpoints.push((id, secret));
        }
        Ok(endpoints)
    }

    /// Creates a destination of `app` of type `kind` (`rabbitMq`, `pollingEndpoint`, …) with
    /// `config`; returns its id.
    pub async fn create_destination(
        &self,
        app: &str,
        kind: &str,
        config: Value,
    ) -> anyhow::Result<String> {
        let destination = self
            .post(
                &format!("/app/{app}/destination"),
                json!({ "type": kind, "config": config }),
            )
            .await?;
        id_of(&destination)
    }

    /// The signing secret of destination `destination` of `app`.
    pub async fn destination_secret(&self, app: &str, destination: &str) -> anyhow::Result<String> {
        let secret = self
            .get(&format!("/app/{app}/destination/{destination}/secret"))
            .await?;
        key_of(&secret)
    }

    /// One page of polling destination `destination` of `app`: up to `limit` messages after
    /// `iterator` (from the destination's creation without one).
    pub async fn poll(
        &self,
        app: &str,
        destination: &str,
        iterator: Option<&str>,
        limit: usize,
    ) -> anyhow::Result<PollPage> {
        let after = iterator.map_or(String::new(), |i| format!("&iterator={i}"));
        self.get_as(&format!(
            "/app/{app}/poller/{destination}?limit={limit}{after}"
        ))
        .await
    }

    /// Publishes one message to `app`; returns its id.
    pub async fn publish(&self, app: &str, message: Value) -> anyhow::Result<String> {
        let message = self.post(&format!("/app/{app}/msg"), message).await?;
        id_of(&message)
    }

    /// The signing secret (`whsec_…`) of endpoint `endpoint` of `app`.
    pub async fn endpoint_secret(&self, app: &str, endpoint: &str) -> anyhow::Result<String> {
        let secret = self
            .get(&format!("/app/{app}/endpoint/{endpoint}/secret"))
            .await?;
        key_of(&secret)
    }

    /// Points endpoint `endpoint` of `app` at `url`.
    pub async fn set_endpoint_url(
        &self,
        app: &str,
        endpoint: &str,
        url: &str,
    ) -> anyhow::Result<()> {
        self.patch_endpoint(app, endpoint, json!({ "url": url }))
            .await
    }

    /// Subscribes endpoint `endpoint` of `app` to `event_type` only.
    pub async fn filter_endpoint(
        &self,
        app: &str,
        endpoint: &str,
        event_type: &str,
    ) -> anyhow::Result<()> {
        self.patch_endpoint(app, endpoint, json!({ "eventTypes": [event_type] }))
            .await
    }

    async fn patch_endpoint(&self, app: &str, endpoint: &str, patch: Value) -> anyhow::Result<()> {
        let path = format!("/app/{app}/endpoint/{endpoint}");
        let response = self
            .client
            .patch(self.url(&path))
            .header(AUTHORIZATION, self.authorization.clone())
            .json(&patch)
            .send()
            .await
            .with_context(|| format!("PATCH {path}"))?;
        let status = response.status();
        if !status.is_success() {
            bail!(
                "PATCH {path} answered {status}: {}",
                response.text().await.unwrap_or_default()
            );
        }
        Ok(())
    }

    /// The request the load generator repeats: publish [`message`] `i` (one of [`Bodies`]) to
    /// `app`, expect 202.
    /// With a log, each accepted message's id and send time are added to it.
    pub fn publisher(&self, app: &str, log: Option<SendLog>) -> anyhow::Result<Requests> {
        self.publisher_of(app, log, Bodies::new(|i| message(i).to_string()))
    }

    /// Publishes messages `numbers` to `app`, `concurrency` at a time; returns the outcome
    /// and each accepted message's id and send time.
    pub async fn publish_logged(
        &self,
        app: &str,
        concurrency: usize,
        numbers: std::ops::Range<u64>,
    ) -> anyhow::Result<(Outcome, Vec<(String, u64)>)> {
        let log: SendLog = Arc::new(Mutex::new(Vec::new()));
        let publishes = crate::load::run(
            concurrency,
            numbers,
            self.publisher(app, Some(log.clone()))?,
        )
        .await;
        let sent = std::mem::take(&mut *log.lock().expect("the send log"));
        Ok((publishes, sent))
    }

    /// [`Api::publisher`] publishing `bodies` instead.
    pub fn publisher_of(
        &self,
        app: &str,
        log: Option<SendLog>,
        bodies: Bodies,
    ) -> anyhow::Result<Requests> {
        let url = reqwest::Url::parse(&self.url(&format!("/app/{app}/msg")))
            .context("the publish URL")?;
        let authorization = self.authorization.clone();
        Ok(self.accepted_posts(url, log, move |i, request| {
            request
                .header(AUTHORIZATION, authorization.clone())
                .body(bodies.get(i))
        }))
    }

    /// The request the ingest benchmark repeats: Stripe event `i` (one of `events`, signed
    /// with `secret` when sent) to the ingest URL `url`, expect 202. With a log, each accepted
    /// message's id and send time are added to it.
    pub fn stripe_sender(
        &self,
        url: &str,
        secret: String,
        log: Option<SendLog>,
        events: Bodies,
    ) -> anyhow::Result<Requests> {
        let url = reqwest::Url::parse(url).context("the ingest URL")?;
        Ok(self.accepted_posts(url, log, move |i, request| {
            let event = events.get(i);
            let now = unix_nanos() / 1_000_000_000;
            request
                .header("stripe-signature", stripe::sign(&secret, now, &event))
                .body(event)
        }))
    }

    /// JSON POSTs to `url`, each completed by `build(i, request)`, that must be answered 202
    /// with the id of the message they made; with a log, each id and send time is added to it.
    fn accepted_posts(
        &self,
        url: reqwest::Url,
        log: Option<SendLog>,
        build: impl Fn(u64, reqwest::RequestBuilder) -> reqwest::RequestBuilder + Send + Sync + 'static,
    ) -> Requests {
        let client = self.client.clone();
        let json = HeaderValue::from_static("application/json");
        Arc::new(move |i| {
            let request = build(
                i,
                client.post(url.clone()).header(CONTENT_TYPE, json.clone()),
            );
            let log = log.clone();
            // When the load generator asked for it, which may be before a connection is free.
            let sent = unix_nanos();
            Box::pin(async move {
                let response = request
                    .send()
                    .await
                    .map_err(|e| crate::load::transport_error(&e))?;
                let status = response.status();
                let body = response
                    .bytes()
                    .await
                    .map_err(|e| format!("reading the answer: {e}"))?;
                if status != StatusCode::ACCEPTED {
                    return Err(format!("HTTP {}", status.as_u16()));
                }
                if let Some(log) = log {
                    // Only the id: the rest of the answer is left unparsed.
                    let accepted = serde_json::from_slice::<Accepted>(&body)
                        .map_err(|_| "202 without a message id")?;
                    log.lock().expect("the send log").push((accepted.id, sent));
                }
                Ok(())
            })
        })
    }

    /// Creates an ingest source of type `kind` with `config`; returns its id and ingest URL.
    pub async fn create_source(
        &self,
        name: &str,
        kind: &str,
        config: Value,
    ) -> anyhow::Result<(String, String)> {
        let body = json!({ "name": name, "type": kind, "config": config });
        let source: Value = self.post_to(&self.ingest, "/source", body).await?;
        let url = source["ingestUrl"]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("no ingestUrl in {source}"))?;
        Ok((id_of(&source)?, url))
    }

    /// Creates a forwarding target of ingest source `source` at `url`, signing with `secret`;
    /// returns its id.
    pub async fn create_ingest_endpoint(
        &self,
        source: &str,
        url: &str,
        secret: &str,
    ) -> anyhow::Result<String> {
        let body = json!({ "url": url, "secret": secret, "description": "hookd-bench receiver" });
        let path = format!("/source/{source}/endpoint");
        let endpoint: Value = self.post_to(&self.ingest, &path, body).await?;
        id_of(&endpoint)
    }

    /// Starts `replay-missing` for endpoint `endpoint` of `app`: a background task queueing it
    /// every message of `app` created since `since` (RFC 3339) that it never had; returns the
    /// task's id.
    pub async fn replay_missing(
        &self,
        app: &str,
        endpoint: &str,
        since: &str,
    ) -> anyhow::Result<String> {
        let path = format!("/app/{app}/endpoint/{endpoint}/replay-missing");
        let task = self.post(&path, json!({ "since": since })).await?;
        id_of(&task)
    }

    /// Background task `id`, as `GET /background-task/{id}` shows it.
    pub async fn background_task(&self, id: &str) -> anyhow::Result<Value> {
        self.get(&format!("/background-task/{id}")).await
    }

    /// How many endpoints message `msg` of `app` was routed to (its delivery rows).
    pub async fn destinations(&self, app: &str, msg: &str) -> anyhow::Result<usize> {
        let list = self.get(&format!("/app/{app}/msg/{msg}/endpoint")).await?;
        list["data"]
            .as_array()
            .map(Vec::len)
            .with_context(|| format!("no data list in {list}"))
    }

    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.get_as(path).await
    }

    async fn get_as<T: serde::de::DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        let response = self
            .client
            .get(self.url(path))
            .header(AUTHORIZATION, self.authorization.clone())
            .send()
            .await
            .with_context(|| format!("GET {path}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            bail!("GET {path} answered {status}: {text}");
        }
        serde_json::from_str(&text).with_context(|| format!("GET {path} answered {text}"))
    }

    /// hookd's `/metrics`, as text.
    async fn metrics_text(&self) -> anyhow::Result<String> {
        let response = self.client.get(&self.metrics).send().await;
        let response = response.and_then(reqwest::Response::error_for_status);
        Ok(response.context("GET /metrics")?.text().await?)
    }

    /// The value of one series of `/metrics` (its name with its labels, as printed), 0 when
    /// hookd has not printed it yet.
    pub async fn metric(&self, series: &str) -> anyhow::Result<f64> {
        let text = self.metrics_text().await?;
        let prefix = format!("{series} ");
        Ok(text
            .lines()
            .find_map(|line| line.strip_prefix(&prefix)?.parse::<f64>().ok())
            .unwrap_or(0.0))
    }

    /// The engine's claims and record batches so far, from one read of hookd's `/metrics`.
    pub async fn engine_writes(&self) -> anyhow::Result<EngineWrites> {
        let text = self.metrics_text().await?;
        let counter = |name: &str, op: &str| {
            let prefix = format!("{name}{{op=\"{op}\"}} ");
            text.lines()
                .find_map(|line| line.strip_prefix(&prefix)?.parse::<f64>().ok())
                .map_or(0, |n| n as u64)
        };
        let of = |op| StoreWrites {
            writes: counter("hookd_store_write_duration_seconds_count", op),
            rows: counter("hookd_store_write_rows_total", op),
        };
        Ok(EngineWrites {
            claims: of("claim"),
            records: of("record"),
        })
    }

    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.post_to(&self.base, path, body).await
    }

    /// POSTs `body` to `path` under `base` (`/api/v1` or `/ingest/api/v1`), as the admin.
    async fn post_to(&self, base: &str, path: &str, body: Value) -> anyhow::Result<Value> {
        let response = self
            .client
            .post(format!("{base}{path}"))
            .header(AUTHORIZATION, self.authorization.clone())
            .json(&body)
            .send()
            .await
            .with_context(|| format!("POST {path}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            bail!("POST {path} answered {status}: {text}");
        }
        serde_json::from_str(&text).with_context(|| format!("POST {path} answered {text}"))
    }
}

/// The one field of a publish's answer the load generator reads (and of a polled message).
#[derive(serde::Deserialize)]
pub struct Accepted {
    pub id: String,
}

/// The engine's claims and record batches, with the deliveries they carried.
#[derive(Clone, Copy, Debug, Default)]
pub struct EngineWrites {
    pub claims: StoreWrites,
    pub records: StoreWrites,
}

impl std::ops::Sub for EngineWrites {
    type Output = Self;

    fn sub(self, before: Self) -> Self {
        Self {
            claims: self.claims - before.claims,
            records: self.records - before.records,
        }
    }
}

/// A count of the engine's store writes of one kind, and of the rows they carried.
#[derive(Clone, Copy, Debug, Default)]
pub struct StoreWrites {
    pub writes: u64,
    pub rows: u64,
}

impl std::ops::Sub for StoreWrites {
    type Output = Self;

    fn sub(self, before: Self) -> Self {
        Self {
            writes: self.writes.saturating_sub(before.writes),
            rows: self.rows.saturating_sub(before.rows),
        }
    }
}

impl std::iter::Sum for StoreWrites {
    fn sum<I: Iterator<Item = Self>>(writes: I) -> Self {
        writes.fold(Self::default(), |all, w| Self {
            writes: all.writes + w.writes,
            rows: all.rows + w.rows,
        })
    }
}

impl StoreWrites {
    /// Rows per write, as the report shows it.
    pub fn rows_per_write(self) -> String {
        if self.writes == 0 {
            return "-".into();
        }
        format!("{:.1}", self.rows as f64 / self.writes as f64)
    }
}

/// A page a poller answered; of each message only its id is read.
#[derive(serde::Deserialize)]
pub struct PollPage {
    pub data: Vec<Accepted>,
    pub iterator: String,
    pub done: bool,
}

/// The `key` of a secret's answer.
fn key_of(secret: &Value) -> anyhow::Result<String> {
    secret["key"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("no key in {secret}"))
}

fn id_of(object: &Value) -> anyhow::Result<String> {
    object["id"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("no id in {object}"))
}
