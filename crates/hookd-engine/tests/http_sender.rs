//! The webhook sender against real receivers on loopback: axum servers that record what they
//! got, raw TCP servers for receivers that misbehave (silent, trickling, endless), and a TLS
//! server whose certificate is not trusted.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::to_bytes;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use hookd_engine::http::ssrf::AddressPolicy;
use hookd_engine::http::{
    BuildError, HttpConfig, OutgoingRequest, SendError, SendOutcome, WebhookSender,
};
use hookd_engine::testing::read_request;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::PrivatePkcs8KeyDer;

/// What a recording receiver got.
#[derive(Debug, Clone)]
struct Hit {
    method: String,
    uri: String,
    headers: HeaderMap,
    body: Bytes,
}

/// An axum receiver on loopback that records every request and answers with `answer()`.
struct Receiver {
    addr: SocketAddr,
    hits: Arc<Mutex<Vec<Hit>>>,
}

impl Receiver {
    async fn start<F>(answer: F) -> Self
    where
        F: Fn() -> Response + Clone + Send + Sync + 'static,
    {
        Self::start_at("127.0.0.1:0".parse().unwrap(), answer).await
    }

    /// A receiver listening on `addr`.
    async fn start_at<F>(addr: SocketAddr, answer: F) -> Self
    where
        F: Fn() -> Response + Clone + Send + Sync + 'static,
    {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&hits);
        let app = Router::new().fallback(move |request: Request| {
            let recorded = Arc::clone(&recorded);
            let answer = answer.clone();
            async move {
                let (parts, body) = request.into_parts();
                let body = to_bytes(body, usize::MAX).await.unwrap();
                recorded.lock().unwrap().push(Hit {
                    method: parts.method.to_string(),
                    uri: parts.uri.to_string(),
                    headers: parts.headers,
                    body,
                });
                answer()
            }
        });
        let listener = TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, hits }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }
}

/// A raw TCP server on loopback for one connection: it reads the request, then `respond`
/// writes what it likes. The handle yields what `respond` returns.
async fn raw_server<F, Fut, T>(respond: F) -> (SocketAddr, JoinHandle<T>)
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send,
    T: Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        read_request(&mut stream)
            .await
            .expect("the client sent a whole request");
        respond(stream).await
    });
    (addr, handle)
}

fn loopback_sender() -> WebhookSender {
    WebhookSender::new(HttpConfig {
        policy: AddressPolicy::default().allow("127.0.0.0/8".parse().unwrap()),
        ..HttpConfig::default()
    })
    .unwrap()
}

fn post(url: impl Into<String>) -> OutgoingRequest {
    OutgoingRequest {
        url: url.into(),
        headers: headers(&[("content-type", "application/json")]),
        body: Bytes::from_static(br#"{"type":"ping"}"#),
        timeout: Duration::from_secs(10),
    }
}

/// A request's headers from `(name, value)` pairs.
fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    pairs
        .iter()
        .map(|(name, value)| {
            let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
            (name, HeaderValue::from_str(value).unwrap())
        })
        .collect()
}

fn answer(
    status: u16,
    headers: &'static [(&'static str, &'static str)],
    body: &'static str,
) -> Response {
    let mut response = (StatusCode::from_u16(status).unwrap(), body).into_response();
    for &(name, value) in headers {
        response.headers_mut().insert(name, value.parse().unwrap());
    }
    response
}

#[tokio::test]
async fn a_2xx_succeeds_with_the_request_sent_byte_for_byte() {
    let receiver = Receiver::start(|| answer(202, &[("x-receiver", "yes")], "thanks")).await;
    let body = Bytes::from_static(b"{\"type\": \"order.shipped\",  \"data\":{\"id\":1}}\n\xff\x00");
    let request = OutgoingRequest {
        url: receiver.url("/hooks/in?tenant=acme&x=%20"),
        headers: headers(&[
            ("webhook-id", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"),
            ("webhook-timestamp", "1674087231"),
            (
                "webhook-signature",
                "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= v1,x",
            ),
            ("content-type", "application/json"),
            ("X-Custom-Header", "Value  with\tspacing"),
        ]),
        body: body.clone(),
        timeout: Duration::from_secs(10),
    };

    let outcome = loopback_sender().send(request).await;

    assert!(outcome.is_success(), "{outcome:?}");
    assert_eq!(outcome.status, Some(202));
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.response_body, "thanks");
    assert!(
        outcome
            .response_head
            .starts_with("HTTP/1.1 202 Accepted\r\n"),
        "{}",
        outcome.response_head
    );
    assert!(outcome.response_head.contains("\r\nx-receiver: yes"));
    assert_eq!(outcome.retry_after, None);

    let hits = receiver.hits();
    assert_eq!(hits.len(), 1);
    let hit = &hits[0];
    assert_eq!(hit.method, "POST");
    assert_eq!(hit.uri, "/hooks/in?tenant=acme&x=%20");
    assert_eq!(hit.body, body);
    let header = |name: &str| hit.headers.get(name).unwrap().as_bytes().to_vec();
    assert_eq!(header("webhook-id"), b"msg_2KWPBgLlAfxdpx2AI54pPJ85f4W");
    assert_eq!(header("webhook-timestamp"), b"1674087231");
    assert_eq!(
        header("webhook-signature"),
        b"v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= v1,x"
    );
    assert_eq!(header("content-type"), b"application/json");
    assert_eq!(header("x-custom-header"), b"Value  with\tspacing");
    assert_eq!(header("content-length"), body.len().to_string().as_bytes());
    assert_eq!(
        header("user-agent"),
        HttpConfig::default().user_agent.as_bytes()
    );
    assert!(HttpConfig::default().user_agent.starts_with("hookd/"));
}

#[tokio::test]
async fn a_500_fails_with_its_status_and_a_capped_body() {
    let receiver = Receiver::start(|| {
        (StatusCode::INTERNAL_SERVER_ERROR, "e".repeat(100 * 1024)).into_response()
    })
    .await;

    let outcome = loopback_sender().send(post(receiver.url("/"))).await;

    assert!(!outcome.is_success());
    assert_eq!(outcome.status, Some(500));
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.response_body, "e".repeat(64 * 1024));
    assert!(
        outcome
            .response_head
            .starts_with("HTTP/1.1 500 Internal Server Error")
    );
}

#[tokio::test]
async fn the_response_head_is_capped() {
    let receiver = Receiver::start(|| {
        let mut response = StatusCode::OK.into_response();
        for n in 0..40 {
            let name = format!("x-filler-{n}");
            let value = "v".repeat(500);
            response.headers_mut().insert(
                axum::http::HeaderName::try_from(name).unwrap(),
                value.parse().unwrap(),
            );
        }
        response
    })
    .await;

    let outcome = loopback_sender().send(post(receiver.url("/"))).await;

    assert!(outcome.is_success());
    assert_eq!(outcome.response_head.len(), 8 * 1024);
    assert!(outcome.response_head.starts_with("HTTP/1.1 200 OK\r\n"));
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let target = Receiver::start(|| answer(200, &[], "")).await;
    for status in [301, 302, 303, 307, 308] {
        let location = target.url("/elsewhere");
        let redirecting = Receiver::start(move || {
            let mut response = answer(status, &[], "moved");
            response
                .headers_mut()
                .insert("location", location.parse().unwrap());
            response
        })
        .await;

        let outcome = loopback_sender().send(post(redirecting.url("/"))).await;

        assert_eq!(outcome.status, Some(status));
        assert!(!outcome.is_success());
        assert_eq!(redirecting.hits().len(), 1);
    }
    assert_eq!(target.hits().len(), 0, "a redirect was followed");
}

#[tokio::test]
async fn retry_after_is_returned_raw() {
    let receiver = Receiver::start(|| answer(429, &[("retry-after", "120")], "slow down")).await;

    let outcome = loopback_sender().send(post(receiver.url("/"))).await;

    assert_eq!(outcome.status, Some(429));
    assert!(!outcome.is_success());
    assert_eq!(outcome.retry_after.as_deref(), Some("120"));
    assert_eq!(outcome.response_body, "slow down");
}

#[tokio::test]
async fn a_receiver_that_never_answers_times_out() {
    let (addr, _server) = raw_server(|stream| async move {
        std::future::pending::<()>().await;
        drop(stream);
    })
    .await;
    let request = OutgoingRequest {
        timeout: Duration::from_millis(500),
        ..post(format!("http://{addr}/"))
    };

    let outcome = loopback_sender().send(request).await;

    assert_eq!(outcome.status, None);
    assert_eq!(outcome.error, Some(SendError::Timeout));
    assert!(!outcome.is_success());
}

#[tokio::test]
async fn a_trickled_2xx_body_succeeds_with_what_arrived_in_time() {
    let (addr, _server) = raw_server(|mut stream| async move {
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n")
            .await
            .unwrap();
        loop {
            if stream.write_all(b"a").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let request = OutgoingRequest {
        timeout: Duration::from_secs(2),
        ..post(format!("http://{addr}/"))
    };

    let outcome = loopback_sender().send(request).await;

    assert!(outcome.is_success(), "{outcome:?}");
    assert_eq!(outcome.status, Some(200));
    assert_eq!(outcome.error, None);
    assert!(!outcome.response_body.is_empty());
    assert!(outcome.response_body.len() < 1000);
    assert!(outcome.response_body.bytes().all(|b| b == b'a'));
}

#[tokio::test]
async fn a_1_gb_body_is_capped_and_not_read_further() {
    const GIB: u64 = 1 << 30;
    let (addr, server) = raw_server(|mut stream| async move {
        let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {GIB}\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let chunk = [b'z'; 16 * 1024];
        let mut written: u64 = 0;
        while written < GIB {
            match stream.write(&chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => written += n as u64,
            }
        }
        written
    })
    .await;
    let request = OutgoingRequest {
        timeout: Duration::from_secs(30),
        ..post(format!("http://{addr}/"))
    };

    let outcome = loopback_sender().send(request).await;

    assert!(outcome.is_success(), "{outcome:?}");
    assert_eq!(outcome.response_body.len(), 64 * 1024);
    // The sender dropped the connection, so the server's writes fail soon after: it must not
    // have pushed much more than the socket buffers hold. (This timeout only keeps a broken
    // sender from hanging the test.)
    let written = tokio::time::timeout(Duration::from_secs(60), server)
        .await
        .expect("the connection was kept open: the server is still writing")
        .unwrap();
    assert!(written < 16 << 20, "the server wrote {written} bytes");
}

#[tokio::test]
async fn a_closed_port_is_a_connect_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);

    let outcome = loopback_sender()
        .send(post(format!("http://{addr}/")))
        .await;

    assert_eq!(outcome.status, None);
    assert!(
        matches!(outcome.error, Some(SendError::Connect(_))),
        "{outcome:?}"
    );
}

/// An HTTPS server on loopback with a self-signed certificate for 127.0.0.1 (returned as
/// PEM) that answers one request 204. The handle yields whether a TLS handshake completed.
async fn self_signed_https_server() -> (SocketAddr, String, JoinHandle<bool>) {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let pem = certified.cert.pem();
    let key = PrivatePkcs8KeyDer::from(certified.signing_key.serialize_der());
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![certified.cert.der().clone()], key.into())
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let Ok(mut tls) = acceptor.accept(stream).await else {
            return false;
        };
        if read_request(&mut tls).await.is_none() {
            return true;
        }
        let answer = b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n";
        let _ = tls.write_all(answer).await;
        let _ = tls.flush().await;
        true
    });
    (addr, pem, handle)
}

#[tokio::test]
async fn an_untrusted_certificate_is_a_connect_error() {
    let (addr, _pem, server) = self_signed_https_server().await;

    let outcome = loopback_sender()
        .send(post(format!("https://{addr}/")))
        .await;

    let Some(SendError::Connect(text)) = &outcome.error else {
        panic!("expected a connect error: {outcome:?}");
    };
    assert!(text.contains("certificate"), "{text}");
    assert!(!server.await.unwrap(), "the TLS handshake completed");
}

#[tokio::test]
async fn a_certificate_from_a_trusted_extra_root_is_delivered_to() {
    let (addr, pem, server) = self_signed_https_server().await;
    let sender = WebhookSender::new(HttpConfig {
        policy: AddressPolicy::default().allow("127.0.0.0/8".parse().unwrap()),
        extra_roots: vec![pem.into_bytes()],
        ..HttpConfig::default()
    })
    .unwrap();

    let outcome = sender.send(post(format!("https://{addr}/"))).await;

    assert_eq!(outcome.status, Some(204), "{outcome:?}");
    assert!(server.await.unwrap(), "the TLS handshake completed");
}

#[test]
fn roots_that_are_not_pem_are_refused_when_the_client_is_built() {
    let built = WebhookSender::new(HttpConfig {
        extra_roots: vec![
            b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n".to_vec(),
        ],
        ..HttpConfig::default()
    });
    assert!(
        matches!(built, Err(BuildError::Roots(_))),
        "{:?}",
        built.err()
    );
}

#[tokio::test]
async fn bad_urls_are_reported() {
    let sender = loopback_sender();
    for url in ["not a url", "ftp://example.com/", "http://"] {
        let outcome = sender.send(post(url)).await;
        assert!(
            matches!(outcome.error, Some(SendError::InvalidUrl(_))),
            "{url}: {outcome:?}"
        );
    }
}

fn assert_refused(outcome: &SendOutcome, url: &str) {
    assert_eq!(outcome.status, None, "{url}");
    let Some(SendError::Refused(text)) = &outcome.error else {
        panic!("{url} was not refused: {outcome:?}");
    };
    assert!(text.starts_with("refused "), "{text}");
    assert!(text.ends_with("allow it with --allow-subnet"), "{text}");
}

#[tokio::test]
async fn the_default_policy_refuses_every_spelling_of_loopback() {
    let receiver = Receiver::start(|| answer(200, &[], "")).await;
    let port = receiver.addr.port();
    let sender = WebhookSender::new(HttpConfig::default()).unwrap();
    for host in [
        "127.0.0.1",
        "2130706433",
        "0x7f.1",
        "017700000001",
        "[::ffff:127.0.0.1]",
        "localhost",
    ] {
        let url = format!("http://{host}:{port}/");
        let outcome = sender.send(post(&url)).await;
        assert_refused(&outcome, &url);
    }
    assert_eq!(receiver.hits().len(), 0);
}

#[tokio::test]
async fn a_name_resolving_to_a_forbidden_address_is_refused_by_the_resolver() {
    let receiver = Receiver::start(|| answer(200, &[], "")).await;
    let sender = WebhookSender::new(HttpConfig::default()).unwrap();
    let url = format!("http://localhost:{}/", receiver.addr.port());

    let outcome = sender.send(post(&url)).await;

    assert_refused(&outcome, &url);
    let Some(SendError::Refused(text)) = outcome.error else {
        unreachable!()
    };
    assert!(
        text.starts_with("refused localhost: it resolves to "),
        "{text}"
    );
    assert_eq!(receiver.hits().len(), 0);
}

#[tokio::test]
async fn an_allowed_name_connects_to_the_checked_address() {
    let receiver = Receiver::start(|| answer(204, &[], "")).await;
    let sender = WebhookSender::new(HttpConfig {
        policy: AddressPolicy::default()
            .allow("127.0.0.0/8".parse().unwrap())
            .allow("::1/128".parse().unwrap()),
        ..HttpConfig::default()
    })
    .unwrap();

    let outcome = sender
        .send(post(format!("http://localhost:{}/", receiver.addr.port())))
        .await;

    assert!(outcome.is_success(), "{outcome:?}");
    assert_eq!(receiver.hits().len(), 1);
}

#[tokio::test]
async fn a_disabled_policy_reaches_loopback() {
    let receiver = Receiver::start(|| answer(200, &[], "ok")).await;
    let sender = WebhookSender::new(HttpConfig {
        policy: AddressPolicy::disabled(),
        ..HttpConfig::default()
    })
    .unwrap();

    let outcome = sender.send(post(receiver.url("/"))).await;

    assert!(outcome.is_success(), "{outcome:?}");
}

#[tokio::test]
async fn an_egress_proxy_gets_only_names_and_literals_the_guard_allows() {
    let proxy = Receiver::start(|| answer(200, &[], "via proxy")).await;
    let dns = ScriptedDns::new(&[
        ("hooks.example.test", &[&["93.184.215.14"]]),
        ("metadata.test", &[&["169.254.169.254"]]),
    ]);
    let lookup: Arc<dyn hookd_engine::http::HostLookup> = dns.clone();
    let sender = WebhookSender::new(HttpConfig {
        egress_proxy: Some(proxy.url("")),
        lookup: Some(lookup),
        ..HttpConfig::default()
    })
    .unwrap();

    let outcome = sender.send(post("http://hooks.example.test/in?x=1")).await;
    assert!(outcome.is_success(), "{outcome:?}");
    assert_eq!(outcome.response_body, "via proxy");
    let hits = proxy.hits();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].uri, "http://hooks.example.test/in?x=1");

    let outcome = sender.send(post("http://10.0.0.5/in")).await;
    assert_refused(&outcome, "http://10.0.0.5/in");
    let outcome = sender.send(post("http://metadata.test/latest")).await;
    assert_refused(&outcome, "http://metadata.test/latest");
    assert_eq!(
        proxy.hits().len(),
        1,
        "the proxy never saw the refused ones"
    );
}

#[tokio::test]
async fn an_invalid_egress_proxy_is_a_build_error() {
    let built = WebhookSender::new(HttpConfig {
        egress_proxy: Some("not a proxy url".into()),
        ..HttpConfig::default()
    });
    assert!(built.is_err());
}

/// A resolver with scripted answers: per name, a queue of answers given one per lookup (the
/// last one repeats), and a count of lookups made.
#[derive(Debug, Default)]
struct ScriptedDns {
    answers: Mutex<std::collections::HashMap<String, Vec<Vec<std::net::IpAddr>>>>,
    lookups: std::sync::atomic::AtomicUsize,
}

impl ScriptedDns {
    fn new(script: &[(&str, &[&[&str]])]) -> Arc<Self> {
        let answers = script
            .iter()
            .map(|(name, answers)| {
                let answers = answers
                    .iter()
                    .map(|answer| answer.iter().map(|ip| ip.parse().unwrap()).collect())
                    .collect();
                ((*name).to_owned(), answers)
            })
            .collect();
        Arc::new(Self {
            answers: Mutex::new(answers),
            ..Self::default()
        })
    }
}

impl hookd_engine::http::HostLookup for ScriptedDns {
    fn lookup(
        &self,
        host: &str,
    ) -> std::pin::Pin<Box<dyn Future<Output = std::io::Result<Vec<std::net::IpAddr>>> + Send>>
    {
        self.lookups
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let mut answers = self.answers.lock().unwrap();
        let queue = answers.get_mut(host).expect("a scripted name");
        let answer = if queue.len() > 1 {
            queue.remove(0)
        } else {
            queue[0].clone()
        };
        Box::pin(async move { Ok(answer) })
    }
}

fn sender_with_dns(policy: AddressPolicy, dns: &Arc<ScriptedDns>) -> WebhookSender {
    let lookup: Arc<dyn hookd_engine::http::HostLookup> = dns.clone();
    WebhookSender::new(HttpConfig {
        policy,
        lookup: Some(lookup),
        ..HttpConfig::default()
    })
    .unwrap()
}

#[tokio::test]
async fn names_resolving_into_any_forbidden_range_are_refused() {
    let dns = ScriptedDns::new(&[
        ("metadata.test", &[&["169.254.169.254"]]),
        ("ten.test", &[&["10.1.2.3"]]),
        ("home.test", &[&["192.168.0.10"]]),
        ("cgnat.test", &[&["100.64.0.1"]]),
        ("zero.test", &[&["0.0.0.0"]]),
        ("mapped.test", &[&["::ffff:127.0.0.1"]]),
        ("nat64.test", &[&["64:ff9b::a00:1"]]),
        ("ula.test", &[&["fd00::1"]]),
        ("linklocal6.test", &[&["fe80::1"]]),
        ("mixed.test", &[&["93.184.215.14", "10.0.0.1"]]),
    ]);
    let sender = sender_with_dns(AddressPolicy::default(), &dns);
    for name in [
        "metadata.test",
        "ten.test",
        "home.test",
        "cgnat.test",
        "zero.test",
        "mapped.test",
        "nat64.test",
        "ula.test",
        "linklocal6.test",
        "mixed.test",
    ] {
        let url = format!("http://{name}/hook");
        let outcome = sender.send(post(&url)).await;
        assert_refused(&outcome, &url);
        let Some(SendError::Refused(text)) = outcome.error else {
            unreachable!()
        };
        assert!(
            text.starts_with(&format!("refused {name}: it resolves to ")),
            "the refusal names the host and its address: {text}"
        );
    }
}

#[tokio::test]
async fn a_name_that_changes_its_answer_between_lookups_is_checked_on_every_answer() {
    // A rebinding name: allowed, then private, then allowed, then the metadata address. Each
    // attempt goes to another port so no pooled connection hides a lookup.
    let dns = ScriptedDns::new(&[(
        "rebind.test",
        &[
            &["127.0.0.1"],
            &["10.0.0.7"],
            &["127.0.0.1"],
            &["169.254.169.254"],
        ],
    )]);
    let sender = sender_with_dns(
        AddressPolicy::default().allow("127.0.0.0/8".parse().unwrap()),
        &dns,
    );
    let mut receivers = Vec::new();
    for _ in 0..4 {
        receivers.push(Receiver::start(|| answer(204, &[], "")).await);
    }
    let mut outcomes = Vec::new();
    for receiver in &receivers {
        let url = format!("http://rebind.test:{}/hook", receiver.addr.port());
        outcomes.push(sender.send(post(&url)).await);
    }

    assert!(outcomes[0].is_success(), "{:?}", outcomes[0]);
    assert!(outcomes[2].is_success(), "{:?}", outcomes[2]);
    for (n, address) in [(1, "10.0.0.7"), (3, "169.254.169.254")] {
        let Some(SendError::Refused(text)) = &outcomes[n].error else {
            panic!("attempt {n} was not refused: {:?}", outcomes[n]);
        };
        assert!(text.contains(address), "{text}");
        assert_eq!(receivers[n].hits().len(), 0);
    }
    assert_eq!(
        dns.lookups.load(std::sync::atomic::Ordering::SeqCst),
        4,
        "one lookup per connection: the answer checked is the answer connected to"
    );
}

#[tokio::test]
async fn connections_are_dropped_after_their_lifetime_so_a_moved_name_is_followed() {
    // Two receivers on one port: the name's old address and its new one.
    let old = Receiver::start(|| answer(200, &[], "old")).await;
    let new_addr = SocketAddr::new("127.0.0.2".parse().unwrap(), old.addr.port());
    let new = Receiver::start_at(new_addr, || answer(200, &[], "new")).await;
    // The first lookup answers the old address, every later one the new.
    let dns = ScriptedDns::new(&[("moving.test", &[&["127.0.0.1"], &["127.0.0.2"]])]);
    let lookup: Arc<dyn hookd_engine::http::HostLookup> = dns.clone();
    let clock = Arc::new(hookd_core::ManualClock::new(
        hookd_core::Timestamp::from_millis(1_800_000_000_000),
    ));
    let lifetime = Duration::from_secs(120);
    let sender = WebhookSender::with_clock(
        HttpConfig {
            policy: AddressPolicy::default().allow("127.0.0.0/8".parse().unwrap()),
            lookup: Some(lookup),
            connection_lifetime: lifetime,
            ..HttpConfig::default()
        },
        clock.clone(),
    )
    .unwrap();
    let url = format!("http://moving.test:{}/hook", old.addr.port());

    let first = sender.send(post(&url)).await;
    assert_eq!(first.response_body, "old", "{first:?}");

    // The name has moved; the pooled connection to the old address is past its lifetime.
    clock.advance(lifetime + Duration::from_secs(1));
    let second = sender.send(post(&url)).await;

    assert_eq!(second.response_body, "new", "{second:?}");
    assert_eq!(old.hits().len(), 1);
    assert_eq!(new.hits().len(), 1);
}

#[tokio::test]
async fn credentials_in_the_url_are_sent_as_basic_authorization() {
    let receiver = Receiver::start(|| answer(204, &[], "")).await;
    let sender = loopback_sender();
    let with_credentials = format!("http://hook%20user:p%40ss@{}/in", receiver.addr);
    let own_authorization = OutgoingRequest {
        headers: headers(&[("authorization", "Bearer endpoint-own")]),
        ..post(with_credentials.clone())
    };

    for request in [post(with_credentials), own_authorization] {
        assert_eq!(sender.send(request).await.status, Some(204));
    }

    let hits = receiver.hits();
    let authorization = |n: usize| hits[n].headers.get("authorization").unwrap().clone();
    // base64 of `hook user:p@ss`.
    assert_eq!(authorization(0), "Basic aG9vayB1c2VyOnBAc3M=");
    assert_eq!(authorization(1), "Bearer endpoint-own");
    assert_eq!(hits[0].uri, "/in");
    let host = hits[0].headers.get("host").unwrap();
    assert_eq!(host.to_str().unwrap(), receiver.addr.to_string());
}
