//! The `sqs`, `sns` and `amazonS3` sinks against a real AWS-shaped server: `moto_server`
//! (PyPI `moto[server]`), started on a free loopback port per test binary with signature
//! checking on (`INITIAL_NO_AUTH_ACTION_COUNT=3`: the first three calls make the IAM user and
//! key the sinks sign with; every call after is checked). boto3 (`moto_helper.py`, run by
//! the Python beside `moto_server`) makes the queues, topics and buckets and reads back what
//! the sinks wrote; signatures are checked with the `standardwebhooks` crate.
//!
//! `HOOKD_TEST_MOTO` is the path of `moto_server` (or `1` for the one on `PATH`); without it
//! the tests say they are skipped, unless `HOOKD_TEST_REQUIRE_MOTO=1`, which makes that a
//! failure.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hookd_core::{Clock, ManualClock, SystemClock, Timestamp};
use hookd_sinks::aws::{
    AwsAccess, AwsContext, DEFAULT_GROUP, S3Config, S3Sink, SnsConfig, SnsSink, SqsConfig, SqsSink,
};
use hookd_sinks::{AddressGuard, Publication, Sink, SinkError};
use serde_json::Value;
use webhook_signature::{Secret, Signer, SigningKey};

/// A running `moto_server`; stopped when dropped, and by its shell when this process ends
/// (the shell waits on our end of a pipe, which closes when we exit however we exit).
struct Moto {
    shell: Child,
    port: u16,
    python: PathBuf,
}

/// The test binary's moto, with signature checks on, and the key it accepts.
struct Checked {
    moto: Moto,
    key: (String, String),
}

impl Moto {
    /// Starts moto on a free loopback port; `no_auth_calls` is how many calls it takes before
    /// it checks signatures (`None`: never).
    fn start(server: &Path, no_auth_calls: Option<u32>) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let mut command = Command::new("sh");
        command
            .args([
                "-c",
                r#""$0" -H 127.0.0.1 -p "$1" & pid=$!; read _; kill $pid; wait $pid"#,
            ])
            .arg(server)
            .arg(port.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(calls) = no_auth_calls {
            command.env("INITIAL_NO_AUTH_ACTION_COUNT", calls.to_string());
        }
        let shell = command.spawn().expect("sh starts moto_server");
        let python = server.with_file_name("python");
        let moto = Self {
            shell,
            port,
            python,
        };
        moto.wait_listening();
        moto
    }

    /// Waits for the port to take connections (a TCP connect is not a call moto counts).
    fn wait_listening(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "moto_server did not listen on 127.0.0.1:{} within 60 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Runs `ops` in boto3 signed with `key`; their results.
    fn boto(&self, key: (&str, &str), ops: Value) -> Vec<Value> {
        let helper = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/moto_helper.py");
        let output = Command::new(&self.python)
            .arg(helper)
            .arg(self.url())
            .arg(ops.to_string())
            .env("AWS_ACCESS_KEY_ID", key.0)
            .env("AWS_SECRET_ACCESS_KEY", key.1)
            .output()
            .expect("the moto helper runs");
        assert!(
            output.status.success(),
            "moto_helper.py {ops} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).expect("the helper prints JSON")
    }

    /// Stops moto and waits until it is gone.
    fn stop(mut self) {
        drop(self.shell.stdin.take());
        self.shell.wait().expect("the moto shell exits");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            assert!(Instant::now() < deadline, "moto_server did not stop");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Checked {
    fn boto(&self, ops: Value) -> Vec<Value> {
        self.moto.boto((&self.key.0, &self.key.1), ops)
    }

    /// Sinks calling this moto with the key it accepts.
    fn target(&self) -> Target {
        Target::moto(&self.moto, (&self.key.0, &self.key.1))
    }
}

/// `moto_server`'s path, or `None` (after saying so) when the tests are to be skipped.
fn moto_server() -> Option<PathBuf> {
    let configured = std::env::var("HOOKD_TEST_MOTO").unwrap_or_default();
    let found = match configured.as_str() {
        "" => None,
        "1" => std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
            .map(|dir| dir.join("moto_server"))
            .find(|path| path.is_file()),
        path => Some(PathBuf::from(path)),
    };
    match found {
        Some(path) => Some(path),
        None if std::env::var("HOOKD_TEST_REQUIRE_MOTO").as_deref() == Ok("1") => panic!(
            "HOOKD_TEST_MOTO={configured:?} names no moto_server, and HOOKD_TEST_REQUIRE_MOTO=1 \
             requires it (scripts/test.sh installs it in .venv)"
        ),
        None => {
            // Written to the real stderr, past the test harness's capture, so it is seen.
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "SKIPPED: HOOKD_TEST_MOTO not set");
            None
        }
    }
}

/// The test binary's moto with signature checks on, started by the first test that asks.
fn checked() -> Option<&'static Checked> {
    static CHECKED: OnceLock<Option<Checked>> = OnceLock::new();
    CHECKED
        .get_or_init(|| {
            let moto = Moto::start(&moto_server()?, Some(3));
            let key = moto.boto(("unchecked", "unchecked"), serde_json::json!([["auth"]]));
            let field = |name: &str| key[0][name].as_str().expect("a key field").to_owned();
            let key = (field("id"), field("secret"));
            Some(Checked { moto, key })
        })
        .as_ref()
}

/// A guard that answers one address for every host, and remembers what it was asked.
struct Pinned {
    to: SocketAddr,
    asked: Mutex<Vec<(String, u16)>>,
}

#[async_trait]
impl AddressGuard for Pinned {
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, SinkError> {
        self.asked.lock().unwrap().push((host.to_owned(), port));
        Ok(vec![self.to])
    }
}

/// A guard that refuses every host.
struct Refusing;

#[async_trait]
impl AddressGuard for Refusing {
    async fn resolve(&self, host: &str, _: u16) -> Result<Vec<SocketAddr>, SinkError> {
        Err(SinkError::Refused(format!("{host} is in a private range")))
    }
}

fn pinned(to: SocketAddr) -> Arc<Pinned> {
    Arc::new(Pinned {
        to,
        asked: Mutex::new(Vec::new()),
    })
}

/// Where the sinks under test send, as whom, through which guard.
struct Target {
    endpoint: String,
    key: (String, String),
    guard: Arc<dyn AddressGuard>,
}

impl Target {
    /// Sinks calling `moto` with `key`, through a guard that answers moto's address.
    fn moto(moto: &Moto, key: (&str, &str)) -> Self {
        Self {
            endpoint: moto.url(),
            key: (key.0.to_owned(), key.1.to_owned()),
            guard: pinned(moto.addr()),
        }
    }

    fn context(&self) -> AwsContext {
        AwsContext {
            guard: self.guard.clone(),
            // Stopped at the start: moto, like AWS, takes signatures made within 15 minutes.
            clock: Arc::new(ManualClock::new(SystemClock.now())),
            timeout: Duration::from_secs(30),
        }
    }

    fn access(&self) -> AwsAccess {
        AwsAccess {
            region: "us-east-1".to_owned(),
            access_key_id: self.key.0.clone(),
            secret_access_key: self.key.1.clone(),
            endpoint_url: Some(self.endpoint.clone()),
        }
    }

    fn sqs(&self, queue_url: &str) -> SqsSink {
        let queue_url = queue_url.to_owned();
        let config = SqsConfig {
            queue_url,
            access: self.access(),
        };
        SqsSink::new(config, self.context()).expect("a valid configuration")
    }

    fn sns(&self, topic_arn: &str) -> SnsSink {
        let topic_arn = topic_arn.to_owned();
        let config = SnsConfig {
            topic_arn,
            access: self.access(),
        };
        SnsSink::new(config, self.context()).expect("a valid configuration")
    }

    fn s3(&self, bucket: &str) -> S3Sink {
        let config = S3Config {
            bucket: bucket.to_owned(),
            key_prefix: "app_1/ep_1/".to_owned(),
            access: self.access(),
        };
        S3Sink::new(config, self.context()).expect("a valid configuration")
    }

    /// One sink of each type.
    fn all(&self, queue_url: &str, topic_arn: &str, bucket: &str) -> Vec<Box<dyn Sink>> {
        vec![
            Box::new(self.sqs(queue_url)),
            Box::new(self.sns(topic_arn)),
            Box::new(self.s3(bucket)),
        ]
    }
}

/// Signed publications, one per ordering key given; bodies with text that escaping would
/// change, to show they arrive unchanged.
fn publications(secret: &Secret, test: &str, keys: &[Option<&str>]) -> Vec<Publication> {
    let signer = Signer::new([SigningKey::Hmac(secret.clone())]);
    let now = webhook_signature::clock::unix_now();
    keys.iter()
        .enumerate()
        .map(|(n, key)| {
            let message_id = format!("msg_{test}{n:03}");
            let body = format!(r#"{{"n": {n}, "text": "café \"q\" \u00e9/<&>"}}"#);
            let headers = signer
                .headers(&message_id, now, body.as_bytes())
                .expect("signed")
                .pairs()
                .map(|(name, value)| (name.to_owned(), value.to_owned()))
                .to_vec();
            Publication {
                message_id,
                event_type: "order.shipped".to_owned(),
                ordering_key: key.map(str::to_owned),
                body: body.into(),
                headers,
            }
        })
        .collect()
}

/// Checks `body` and `headers` with the reference `standardwebhooks` crate.
fn verify(secret: &Secret, body: &str, headers: &BTreeMap<String, String>) {
    let mut map = http::HeaderMap::new();
    for (name, value) in headers
        .iter()
        .filter(|(name, _)| name.starts_with("webhook-"))
    {
        map.insert(
            http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    let reference = standardwebhooks::Webhook::new(&secret.to_string()).unwrap();
    let checked = reference.verify(body.as_bytes(), &map);
    assert!(
        checked.is_ok(),
        "standardwebhooks refused {body}: {checked:?}"
    );
}

/// What a queue held: one entry per message, by `webhook-id`, with its body, message
/// attributes and system attributes; fails if a message came twice.
fn by_id(received: &Value) -> BTreeMap<String, (String, BTreeMap<String, String>, Value)> {
    let mut found = BTreeMap::new();
    for message in received.as_array().expect("a list") {
        let attributes: BTreeMap<String, String> =
            serde_json::from_value(message["attributes"].clone()).unwrap();
        let id = attributes["webhook-id"].clone();
        let entry = (
            message["body"].as_str().unwrap().to_owned(),
            attributes,
            message["system"].clone(),
        );
        assert!(
            found.insert(id.clone(), entry).is_none(),
            "{id} arrived twice"
        );
    }
    found
}

/// Asserts that `received` holds each of `sent` once, body unchanged, with attributes that
/// verify and carry the event type and ordering key.
fn assert_landed_once(secret: &Secret, sent: &[Publication], received: &Value) {
    let found = by_id(received);
    assert_eq!(found.len(), sent.len(), "{received}");
    for publication in sent {
        let (body, attributes, _) = &found[&publication.message_id];
        assert_eq!(body.as_bytes(), &publication.body[..]);
        verify(secret, body, attributes);
        assert_eq!(attributes["event-type"], "order.shipped");
        assert_eq!(
            attributes.get("ordering-key"),
            publication.ordering_key.as_ref()
        );
    }
}

#[tokio::test]
async fn sqs_standard_queue_gets_each_publication_once_with_verifiable_attributes() {
    let Some(aws) = checked() else { return };
    let queue = aws.boto(serde_json::json!([["queue", "standard"]]))[0].clone();
    let queue = queue.as_str().unwrap();
    let sink = aws.target().sqs(queue);
    let secret = Secret::generate();
    let sent = publications(&secret, "sqs", &[Some("a"), None, Some("b"), None]);
    for publication in &sent {
        let published = sink.publish(std::slice::from_ref(publication)).await;
        let summary: Value = serde_json::from_str(&published.expect("sent").summary).unwrap();
        assert!(summary["messageId"].is_string(), "{summary}");
    }
    let received = &aws.boto(serde_json::json!([["receive", queue]]))[0];
    assert_landed_once(&secret, &sent, received);
}

#[tokio::test]
async fn sqs_fifo_queue_groups_by_ordering_key_and_drops_a_resent_webhook_id() {
    let Some(aws) = checked() else { return };
    let queue = aws.boto(serde_json::json!([["queue", "ordered.fifo"]]))[0].clone();
    let queue = queue.as_str().unwrap();
    let sink = aws.target().sqs(queue);
    let secret = Secret::generate();
    let sent = publications(&secret, "fifo", &[Some("a"), Some("b"), None, Some("a")]);
    let published = sink.publish(&sent).await.expect("sent");
    let summaries: Vec<Value> = published
        .summary
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(summaries.len(), sent.len());
    assert!(summaries.iter().all(|s| s["sequenceNumber"].is_string()));
    // A retry of the whole batch within the deduplication window adds nothing.
    sink.publish(&sent).await.expect("sent again");

    let received = &aws.boto(serde_json::json!([["receive", queue]]))[0];
    assert_landed_once(&secret, &sent, received);
    let found = by_id(received);
    for publication in &sent {
        let system = &found[&publication.message_id].2;
        let group = publication.ordering_key.as_deref().unwrap_or(DEFAULT_GROUP);
        assert_eq!(system["MessageGroupId"], group);
        assert_eq!(system["MessageDeduplicationId"], *publication.message_id);
    }
}

#[tokio::test]
async fn sns_topic_delivers_each_publication_once_with_verifiable_attributes() {
    let Some(aws) = checked() else { return };
    let topic = aws.boto(serde_json::json!([["topic", "events"]]))[0].clone();
    let sink = aws.target().sns(topic["arn"].as_str().unwrap());
    let secret = Secret::generate();
    let sent = publications(&secret, "sns", &[Some("a"), None, Some("b")]);
    let published = sink.publish(&sent).await.expect("published");
    assert_eq!(published.summary.lines().count(), sent.len());

    let received = &aws.boto(serde_json::json!([["receive", topic["queue"]]]))[0];
    assert_landed_once(&secret, &sent, received);
}

#[tokio::test]
async fn sns_fifo_topic_groups_by_ordering_key() {
    let Some(aws) = checked() else { return };
    let topic = aws.boto(serde_json::json!([["topic", "ordered-events.fifo"]]))[0].clone();
    let sink = aws.target().sns(topic["arn"].as_str().unwrap());
    let secret = Secret::generate();
    let sent = publications(&secret, "snsfifo", &[Some("a"), None, Some("b")]);
    sink.publish(&sent).await.expect("published");

    let received = &aws.boto(serde_json::json!([["receive", topic["queue"]]]))[0];
    assert_landed_once(&secret, &sent, received);
    let found = by_id(received);
    for publication in &sent {
        let group = publication.ordering_key.as_deref().unwrap_or(DEFAULT_GROUP);
        assert_eq!(found[&publication.message_id].2["MessageGroupId"], group);
    }
}

#[tokio::test]
async fn s3_batch_is_one_object_whose_lines_are_the_messages() {
    let Some(aws) = checked() else { return };
    aws.boto(serde_json::json!([["bucket", "batches"]]));
    let sink = aws.target().s3("batches");
    let secret = Secret::generate();
    let sent = publications(&secret, "s3", &[Some("a"), None, None]);
    let published = sink.publish(&sent).await.expect("written");
    let summary: Value = serde_json::from_str(&published.summary).unwrap();
    assert_eq!(summary["key"], "app_1/ep_1/msg_s3000.jsonl");
    assert_eq!(summary["messages"], 3);

    let objects = &aws.boto(serde_json::json!([["objects", "batches"]]))[0];
    let object = &objects["app_1/ep_1/msg_s3000.jsonl"];
    assert_eq!(object["type"], "application/x-ndjson");
    let lines: Vec<&str> = object["body"].as_str().unwrap().lines().collect();
    assert_eq!(lines.len(), sent.len());
    for (line, publication) in lines.iter().zip(&sent) {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Line<'a> {
            id: String,
            event_type: String,
            timestamp: String,
            headers: BTreeMap<String, String>,
            #[serde(borrow)]
            payload: &'a serde_json::value::RawValue,
        }
        let line: Line = serde_json::from_str(line).expect("a JSON line");
        assert_eq!(line.id, publication.message_id);
        assert_eq!(line.event_type, publication.event_type);
        assert_eq!(line.payload.get().as_bytes(), &publication.body[..]);
        verify(&secret, line.payload.get(), &line.headers);
        let expected: BTreeMap<String, String> = publication.headers.iter().cloned().collect();
        assert_eq!(line.headers, expected);
        assert!(line.timestamp.ends_with('Z'), "{}", line.timestamp);
    }
}

#[tokio::test]
async fn s3_retried_identical_batch_overwrites_its_object() {
    let Some(aws) = checked() else { return };
    aws.boto(serde_json::json!([["bucket", "retries"]]));
    let sink = aws.target().s3("retries");
    let secret = Secret::generate();
    let sent = publications(&secret, "retry", &[None, None]);
    sink.publish(&sent).await.expect("written");
    sink.publish(&sent).await.expect("written again");

    let objects = &aws.boto(serde_json::json!([["objects", "retries"]]))[0];
    let keys: Vec<&String> = objects.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["app_1/ep_1/msg_retry000.jsonl"]);
}

#[tokio::test]
async fn every_type_signed_with_a_wrong_secret_is_rejected() {
    let Some(aws) = checked() else { return };
    let made = aws.boto(serde_json::json!([
        ["queue", "wrong-secret"],
        ["topic", "wrong-secret"],
        ["bucket", "wrong-secret"]
    ]));
    let wrong = Target::moto(&aws.moto, (&aws.key.0, "not-the-secret"));
    let (queue, topic) = (made[0].as_str().unwrap(), made[1]["arn"].as_str().unwrap());
    let sinks = wrong.all(queue, topic, "wrong-secret");
    let sent = publications(&Secret::generate(), "wrong", &[None]);
    for sink in sinks {
        match sink.publish(&sent).await {
            Err(SinkError::Rejected { code, text }) => {
                assert_eq!(code, "SignatureDoesNotMatch", "{text}");
                assert!(text.ends_with("(HTTP 403)"), "{text}");
            }
            other => panic!("not a rejection: {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_request_goes_to_the_address_the_guard_answered() {
    let Some(aws) = checked() else { return };
    let queue = aws.boto(serde_json::json!([["queue", "guarded"]]))[0].clone();
    // A name no resolver knows: only the guard's answer can reach moto.
    let guard = pinned(aws.moto.addr());
    let target = Target {
        endpoint: format!("http://moto.invalid:{}", aws.moto.port),
        guard: guard.clone(),
        ..aws.target()
    };
    let sink = target.sqs(queue.as_str().unwrap());
    let sent = publications(&Secret::generate(), "guarded", &[None]);
    sink.publish(&sent)
        .await
        .expect("sent through the guard's address");
    assert_eq!(
        *guard.asked.lock().unwrap(),
        [("moto.invalid".to_owned(), aws.moto.port)]
    );
}

#[tokio::test]
async fn a_stopped_moto_gives_connect() {
    let Some(server) = moto_server() else { return };
    // Its own moto (signatures unchecked), since stopping the shared one would stop the rest.
    let moto = Moto::start(&server, None);
    let key = ("any", "any");
    let queue = moto.boto(key, serde_json::json!([["queue", "stops"]]))[0].clone();
    let sink = Target::moto(&moto, key).sqs(queue.as_str().unwrap());
    let sent = publications(&Secret::generate(), "stopped", &[None]);
    sink.publish(&sent).await.expect("sent while moto runs");
    moto.stop();
    match sink.publish(&sent).await {
        Err(SinkError::Connect(text)) => assert!(text.contains("refused"), "{text}"),
        other => panic!("not a connection failure: {other:?}"),
    }
}

#[tokio::test]
async fn a_guard_refusal_refuses_before_any_request() {
    // A listener standing in for the service: it must see no connection at all.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let target = Target {
        endpoint: endpoint.clone(),
        key: ("AKID".to_owned(), "secret".to_owned()),
        guard: Arc::new(Refusing),
    };
    let queue_url = format!("{endpoint}/123456789012/q");
    let sinks = target.all(
        &queue_url,
        "arn:aws:sns:us-east-1:123456789012:t",
        "refused",
    );
    let sent = publications(&Secret::generate(), "refused", &[None]);
    for sink in sinks {
        let refused = sink.publish(&sent).await;
        assert_eq!(
            refused,
            Err(SinkError::Refused(
                "127.0.0.1 is in a private range".to_owned()
            ))
        );
    }
    let accepted = listener.accept().map(|_| ());
    assert_eq!(accepted.map_err(|e| e.kind()), Err(ErrorKind::WouldBlock));
}

#[tokio::test]
async fn a_service_that_does_not_answer_in_time_gives_timeout() {
    // Connections complete in the kernel's backlog, and nothing ever answers them.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let target = Target {
        endpoint: format!("http://{addr}"),
        key: ("AKID".to_owned(), "secret".to_owned()),
        guard: pinned(addr),
    };
    let mut context = target.context();
    context.timeout = Duration::from_millis(200);
    let config = SqsConfig {
        queue_url: format!("http://{addr}/123456789012/q"),
        access: target.access(),
    };
    let sink = SqsSink::new(config, context).unwrap();
    let sent = publications(&Secret::generate(), "slow", &[None]);
    assert_eq!(sink.publish(&sent).await, Err(SinkError::Timeout));
}

/// A loopback HTTP receiver for one request: answers `reply` (200) and hands back the
/// request's head and body.
fn receive_one(reply: &'static str) -> (SocketAddr, std::thread::JoinHandle<(String, String)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let receiver = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut head = String::new();
        while !head.ends_with("\r\n\r\n") {
            reader.read_line(&mut head).unwrap();
        }
        let length = head
            .lines()
            .find_map(|line| {
                line.to_ascii_lowercase()
                    .strip_prefix("content-length:")?
                    .trim()
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reply}",
            reply.len()
        );
        stream.write_all(answer.as_bytes()).unwrap();
        (head.to_ascii_lowercase(), String::from_utf8(body).unwrap())
    });
    (addr, receiver)
}

#[tokio::test]
async fn sqs_request_is_signed_at_the_injected_clock_time() {
    let (addr, receiver) = receive_one(r#"{"MessageId":"m-1","MD5OfMessageBody":"x"}"#);
    let target = Target {
        endpoint: format!("http://{addr}"),
        key: ("AKID".to_owned(), "secret".to_owned()),
        guard: pinned(addr),
    };
    let mut context = target.context();
    // 2026-01-02T03:04:05Z, far from the real time: the signature must carry this one.
    context.clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_767_323_045_000)));
    let config = SqsConfig {
        queue_url: format!("http://{addr}/123456789012/q"),
        access: target.access(),
    };
    let sink = SqsSink::new(config, context).unwrap();
    let sent = publications(&Secret::generate(), "clock", &[None]);
    let published = sink.publish(&sent).await.expect("accepted");
    assert_eq!(published.summary, r#"{"messageId":"m-1"}"#);

    let (head, body) = receiver.join().unwrap();
    assert!(head.contains("x-amz-date: 20260102t030405z\r\n"), "{head}");
    let credential = "authorization: aws4-hmac-sha256 credential=akid/20260102/us-east-1/sqs/";
    assert!(head.contains(credential), "{head}");
    assert!(
        head.contains("x-amz-target: amazonsqs.sendmessage\r\n"),
        "{head}"
    );
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["MessageBody"].as_str().unwrap().as_bytes(),
        &sent[0].body[..]
    );
    assert!(
        body.get("MessageGroupId").is_none(),
        "not a FIFO queue: {body}"
    );
}

#[test]
fn a_configuration_that_cannot_work_is_refused_at_construction() {
    let target = Target {
        endpoint: "http://127.0.0.1:1".to_owned(),
        key: ("AKID".to_owned(), "secret".to_owned()),
        guard: Arc::new(Refusing),
    };
    let mut bad_region = target.access();
    bad_region.region = "evil.example/".to_owned();
    let sqs = SqsSink::new(
        SqsConfig {
            queue_url: String::new(),
            access: bad_region,
        },
        target.context(),
    );
    assert!(matches!(sqs, Err(SinkError::Config(text)) if text.contains("region")));
    let s3 = S3Sink::new(
        S3Config {
            bucket: "Not_A_Bucket".to_owned(),
            key_prefix: String::new(),
            access: target.access(),
        },
        target.context(),
    );
    assert!(matches!(s3, Err(SinkError::Config(text)) if text.contains("bucket")));
}
