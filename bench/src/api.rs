//! The few admin calls a benchmark makes to set hookd up (applications, endpoints), over the
//! same pooled HTTP client the load uses.

use anyhow::{Context, bail};
use reqwest::header::{AUTHORIZATION, HeaderValue};
use serde_json::{Value, json};

use crate::hookd::Hookd;

/// hookd's v1 API, as its admin.
#[derive(Clone)]
pub struct Api {
    client: reqwest::Client,
    base: String,
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
            authorization,
        })
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// The `Authorization` header value every call carries.
    pub fn authorization(&self) -> &HeaderValue {
        &self.authorization
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

    /// Publishes one message to `app`; returns its id.
    pub async fn publish(&self, app: &str, message: Value) -> anyhow::Result<String> {
        let message = self.post(&format!("/app/{app}/msg"), message).await?;
        id_of(&message)
    }

    /// How many endpoints message `msg` of `app` was routed to (its delivery rows).
    pub async fn destinations(&self, app: &str, msg: &str) -> anyhow::Result<usize> {
        let path = format!("/app/{app}/msg/{msg}/endpoint");
        let response = self
            .client
            .get(self.url(&path))
            .header(AUTHORIZATION, self.authorization.clone())
            .send()
            .await
            .with_context(|| format!("GET {path}"))?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            bail!("GET {path} answered {status}: {text}");
        }
        let list: Value =
            serde_json::from_str(&text).with_context(|| format!("GET {path} answered {text}"))?;
        list["data"]
            .as_array()
            .map(Vec::len)
            .with_context(|| format!("no data list in {text}"))
    }

    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        let response = self
            .client
            .post(self.url(path))
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

fn id_of(object: &Value) -> anyhow::Result<String> {
    object["id"]
        .as_str()
        .map(str::to_owned)
        .with_context(|| format!("no id in {object}"))
}
