//! What the broker tests share: a guard that allows loopback only and remembers what it was
//! asked, signed publications and their check by the reference Standard Webhooks library, a
//! loopback TCP relay a test can cut, and finding the broker a test needs (or skipping).

#![allow(dead_code)] // Each test file uses its own part.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use hookd_sinks::{AddressGuard, Publication, Sink, SinkError};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use webhook_signature::{Secret, Signer, SigningKey};

/// The event type every test publication carries.
pub const EVENT_TYPE: &str = "order.shipped";

/// A guard that allows loopback addresses (on some ports only, or none at all) and records
/// each `(host, port)` it was asked about.
pub struct Guard {
    ports: Option<Vec<u16>>,
    asked: Mutex<Vec<(String, u16)>>,
}

impl Guard {
    pub fn allowing() -> Arc<Self> {
        Self::with_ports(None)
    }

    pub fn refusing() -> Arc<Self> {
        Self::with_ports(Some(Vec::new()))
    }

    pub fn allowing_ports(ports: &[u16]) -> Arc<Self> {
        Self::with_ports(Some(ports.to_vec()))
    }

    fn with_ports(ports: Option<Vec<u16>>) -> Arc<Self> {
        Arc::new(Self {
            ports,
            asked: Mutex::new(Vec::new()),
        })
    }

    pub fn asked(&self) -> Vec<(String, u16)> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl AddressGuard for Guard {
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, SinkError> {
        self.asked.lock().unwrap().push((host.to_owned(), port));
        if self
            .ports
            .as_ref()
            .is_some_and(|ports| !ports.contains(&port))
        {
            return Err(SinkError::Refused(format!("{host}:{port}: not allowed")));
        }
        let addresses: Vec<_> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| SinkError::Connect(format!("{host}: {e}")))?
            .filter(|address| address.ip().is_loopback())
            .collect();
        if addresses.is_empty() {
            return Err(SinkError::Refused(format!(
                "{host}: not a loopback address"
            )));
        }
        Ok(addresses)
    }
}

/// A fresh name for a queue, stream or topic: `prefix` and 16 random hex digits.
pub fn unique(prefix: &str) -> String {
    let random = Secret::generate();
    let hex: String = random.as_bytes()[..8]
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!("{prefix}{hex}")
}

/// Publication `n` of a test, signed with `secret`; its body has odd spacing and non-ASCII
/// text, so any re-encoding on the way shows.
pub fn publication(secret: &Secret, n: usize, ordering_key: Option<&str>) -> Publication {
    let message_id = unique(&format!("msg_{n}_"));
    let body = Bytes::from(format!("{{ \"n\":{n},  \"text\": \"café ✓\" }}\n"));
    let timestamp = webhook_signature::clock::unix_now();
    let signed = Signer::new([SigningKey::Hmac(secret.clone())])
        .headers(&message_id, timestamp, &body)
        .expect("sign");
    Publication {
        message_id,
        event_type: EVENT_TYPE.to_owned(),
        ordering_key: ordering_key.map(str::to_owned),
        body,
        headers: signed
            .pairs()
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect(),
    }
}

/// Checks what a consumer received with the reference `standardwebhooks` crate: `headers` as
/// the broker delivered them, `body` the bytes.
pub fn verify(secret: &Secret, body: &[u8], headers: &[(String, String)]) {
    let mut map = http::HeaderMap::new();
    for (name, value) in headers {
        map.insert(
            http::HeaderName::try_from(name.as_str()).expect("a header name"),
            http::HeaderValue::try_from(value.as_str()).expect("a header value"),
        );
    }
    let reference = standardwebhooks::Webhook::new(&secret.to_string()).expect("a secret");
    let checked = reference.verify(body, &map);
    assert!(
        checked.is_ok(),
        "standardwebhooks refused {headers:?}: {checked:?}"
    );
}

/// The value of header `name` in `headers`.
pub fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, value)| value.as_str())
}

/// The broker URL in `url_var` (`test` names the caller if it is skipped): `None` after
/// printing `SKIPPED …` when unset, a panic instead when `require_var` is `1`.
pub fn service_url(test: &str, url_var: &str, require_var: &str, example: &str) -> Option<String> {
    let Some(url) = std::env::var(url_var).ok().filter(|url| !url.is_empty()) else {
        assert!(
            std::env::var(require_var).as_deref() != Ok("1"),
            "{test}: {require_var}=1 but {url_var} is not set; set it to {example}"
        );
        println!("SKIPPED {test}: {url_var} not set");
        return None;
    };
    Some(url)
}

/// `url` (`scheme://[user@]host:port[/path]`) with its host and port replaced by `address`.
pub fn with_address(url: &str, address: SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").expect("scheme://");
    let path_at = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(path_at);
    let user = authority
        .rsplit_once('@')
        .map(|(user, _)| format!("{user}@"));
    format!("{scheme}://{}{address}{path}", user.unwrap_or_default())
}

/// The socket address of `url`'s host and port (`default_port` when it names none).
pub async fn address_of(url: &str, default_port: u16) -> SocketAddr {
    let rest = url.split_once("://").expect("scheme://").1;
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, hp)| hp);
    let target = if host_port.contains(':') {
        host_port.to_owned()
    } else {
        format!("{host_port}:{default_port}")
    };
    tokio::net::lookup_host(target)
        .await
        .expect("resolve the broker")
        .next()
        .expect("an address")
}

/// A port nothing listens on.
pub async fn closed_port() -> SocketAddr {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    listener.local_addr().unwrap()
}

/// A loopback TCP relay to a broker: counts the connections it accepted and can cut them all,
/// as a broker restart or a network failure would.
pub struct Relay {
    pub address: SocketAddr,
    accepted: watch::Receiver<usize>,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
    listener: JoinHandle<()>,
}

impl Relay {
    pub async fn to(target: SocketAddr) -> Self {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let address = listener.local_addr().unwrap();
        let (count, accepted) = watch::channel(0);
        let links = Arc::new(Mutex::new(Vec::new()));
        let held = Arc::clone(&links);
        let listener = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                count.send_modify(|n| *n += 1);
                let link = tokio::spawn(async move {
                    if let Ok(mut broker) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut broker).await;
                    }
                });
                held.lock().unwrap().push(link);
            }
        });
        Self {
            address,
            accepted,
            links,
            listener,
        }
    }

    /// How many connections the relay has accepted.
    pub fn accepted(&self) -> usize {
        *self.accepted.borrow()
    }

    /// Waits until the relay has accepted `n` connections.
    pub async fn until_accepted(&self, n: usize) {
        let mut accepted = self.accepted.clone();
        accepted.wait_for(|count| *count >= n).await.unwrap();
    }

    /// Closes every connection relayed so far; new ones are still taken.
    pub fn cut(&self) {
        for link in self.links.lock().unwrap().drain(..) {
            link.abort();
        }
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.listener.abort();
        self.cut();
    }
}

/// Asserts that a sink whose broker is at a refused address fails with
/// [`SinkError::Refused`] having asked the guard once and connected nowhere: `sink_at` makes
/// the sink for a broker address (a relay counting connections) and a guard.
pub async fn refused_before_connecting<S: Sink>(sink_at: impl FnOnce(SocketAddr, Arc<Guard>) -> S) {
    let relay = Relay::to(closed_port().await).await;
    let guard = Guard::refusing();
    let sink = sink_at(relay.address, Arc::clone(&guard));

    let error = publish_one(&sink).await.unwrap_err();

    assert!(matches!(error, SinkError::Refused(_)), "{error:?}");
    assert_eq!(
        guard.asked(),
        [("127.0.0.1".to_owned(), relay.address.port())]
    );
    assert_eq!(relay.accepted(), 0);
}

/// Asserts that a sink whose broker address nothing listens on fails with
/// [`SinkError::Connect`]: `sink_at` makes the sink for that address.
pub async fn unreachable_is_a_connect_failure<S: Sink>(sink_at: impl FnOnce(SocketAddr) -> S) {
    let sink = sink_at(closed_port().await);

    let error = publish_one(&sink).await.unwrap_err();

    assert!(matches!(error, SinkError::Connect(_)), "{error:?}");
}

async fn publish_one(sink: &impl Sink) -> Result<hookd_sinks::Published, SinkError> {
    sink.publish(&[publication(&Secret::generate(), 0, None)])
        .await
}

/// The tests every broker sink has that need no broker, for `sink_at(address, guard)`, a
/// function making the sink for a broker at `address`: an unreachable broker is a
/// [`SinkError::Connect`], a refused address is refused before connecting.
macro_rules! address_tests {
    ($sink_at:path) => {
        #[tokio::test]
        async fn an_unreachable_broker_is_a_connect_failure() {
            common::unreachable_is_a_connect_failure(|address| {
                $sink_at(address, common::Guard::allowing())
            })
            .await;
        }

        #[tokio::test]
        async fn a_refused_address_is_refused_before_connecting() {
            common::refused_before_connecting(|address, guard| $sink_at(address, guard)).await;
        }
    };
}
pub(crate) use address_tests;
