//! One AWS service endpoint as a destination reaches it. Before every call the host is
//! resolved through the SSRF guard, and the call goes to exactly the addresses the guard
//! allowed (pinned in the reqwest client), never to a second lookup's answer; redirects are
//! not followed, so an answer cannot send the request elsewhere.

use std::net::SocketAddr;
use std::sync::{Mutex, PoisonError};

use aws_credential_types::Credentials;
use bytes::Bytes;
use reqwest::header::HeaderMap;
use reqwest::{Method, redirect, retry};
use url::Url;

use super::{AwsAccess, AwsContext, reply, signing};
use crate::SinkError;

/// A service endpoint (`https://sqs.us-east-1.amazonaws.com/`, or the configured
/// `endpointUrl`) with the credentials calls are signed with.
pub(super) struct AwsClient {
    /// The signing name: `sqs`, `sns`, `s3`.
    service: &'static str,
    base: Url,
    host: String,
    port: u16,
    region: String,
    credentials: Credentials,
    context: AwsContext,
    /// The last addresses the guard allowed and the client pinned to them, reused (with its
    /// open connections) while the guard answers the same.
    pinned: Mutex<Option<(Vec<SocketAddr>, reqwest::Client)>>,
}

/// One request to the service, before signing.
pub(super) struct Call {
    pub method: Method,
    pub url: Url,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
}

/// A successful answer.
pub(super) struct Answer {
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl AwsClient {
    /// A client for `service` at the access's `endpoint_url`, or at `aws_url` (the regional
    /// AWS endpoint) without one.
    pub(super) fn new(
        service: &'static str,
        access: &AwsAccess,
        aws_url: impl FnOnce(&str) -> String,
        context: AwsContext,
    ) -> Result<Self, SinkError> {
        check_region(&access.region)?;
        let text = match &access.endpoint_url {
            Some(url) => url.clone(),
            None => aws_url(&access.region),
        };
        let base = Url::parse(&text)
            .map_err(|error| SinkError::Config(format!("endpoint URL {text:?}: {error}")))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(SinkError::Config(format!(
                "endpoint URL {text:?} is not http or https"
            )));
        }
        let host = base
            .host_str()
            .ok_or_else(|| SinkError::Config(format!("endpoint URL {text:?} has no host")))?
            .trim_matches(['[', ']'])
            .to_owned();
        let port = base.port_or_known_default().unwrap_or(443);
        let credentials = Credentials::new(
            &access.access_key_id,
            &access.secret_access_key,
            None,
            None,
            "hookd destination",
        );
        Ok(Self {
            service,
            base,
            host,
            port,
            region: access.region.clone(),
            credentials,
            context,
            pinned: Mutex::new(None),
        })
    }

    /// The service endpoint calls are made to.
    pub(super) fn base(&self) -> &Url {
        &self.base
    }

    /// Signs and sends `call`: the answer when the service accepted it, its error code and
    /// message when it refused, or why it could not be asked.
    pub(super) async fn send(&self, call: Call) -> Result<Answer, SinkError> {
        let client = self.pinned_client().await?;
        let at = self.context.clock.now();
        let signed = signing::headers(&call, self.service, &self.region, &self.credentials, at)?;
        let request = call
            .headers
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
            .chain(
                signed
                    .iter()
                    .map(|(name, value)| (name.as_str(), value.as_str())),
            )
            .fold(
                client.request(call.method, call.url),
                |request, (name, value)| request.header(name, value),
            );
        let response = request.body(call.body).send().await.map_err(transport)?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes().await.map_err(transport)?;
        if status.is_success() {
            Ok(Answer { headers, body })
        } else {
            Err(reply::rejection(status.as_u16(), &body))
        }
    }

    /// The client pinned to the addresses the guard allows for the host now.
    async fn pinned_client(&self) -> Result<reqwest::Client, SinkError> {
        let mut addrs = self.context.guard.resolve(&self.host, self.port).await?;
        if addrs.is_empty() {
            return Err(SinkError::Connect(format!("{} has no address", self.host)));
        }
        // Resolvers rotate their answers; the same set keeps the same client.
        addrs.sort_unstable();
        addrs.dedup();
        let mut pinned = self.pinned.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((checked, client)) = pinned.as_ref()
            && *checked == addrs
        {
            return Ok(client.clone());
        }
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(redirect::Policy::none())
            .retry(retry::never())
            .connect_timeout(self.context.timeout)
            .timeout(self.context.timeout)
            .resolve_to_addrs(&self.host, &addrs)
            .build()
            .map_err(|error| SinkError::Config(format!("HTTP client: {error}")))?;
        *pinned = Some((addrs, client.clone()));
        Ok(client)
    }
}

/// The region goes into AWS host names, so it may only be a region's name (`eu-west-1`).
fn check_region(region: &str) -> Result<(), SinkError> {
    let valid = !region.is_empty()
        && region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(SinkError::Config(format!(
            "region {region:?} is not a region name (like us-east-1)"
        )))
    }
}

/// A failure to get an answer: no answer in time, or none at all (with every cause, which is
/// where reqwest keeps the useful part: "connection refused").
fn transport(error: reqwest::Error) -> SinkError {
    if error.is_timeout() {
        return SinkError::Timeout;
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    SinkError::Connect(text)
}
