//! The NATS JetStream sink against a real server: `HOOKD_TEST_NATS_URL`
//! (`nats://127.0.0.1:4222`, JetStream enabled); skipped when unset, failing when
//! `HOOKD_TEST_REQUIRE_NATS=1`. Each test makes its own stream and deletes it. The tests of
//! unreachable and refused servers need no server.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, stream::Stream};
use common::{Guard, Relay};
use hookd_sinks::broker::{EVENT_TYPE_HEADER, ORDERING_KEY_HEADER};
use hookd_sinks::{AddressGuard, NatsConfig, NatsSink, Sink, SinkError};
use webhook_signature::Secret;

const URL_VAR: &str = "HOOKD_TEST_NATS_URL";
const REQUIRE_VAR: &str = "HOOKD_TEST_REQUIRE_NATS";

/// The test's server, a JetStream context on it, and a stream of its own capturing one
/// subject.
struct Server {
    url: String,
    jetstream: jetstream::Context,
    stream: Stream,
    name: String,
    subject: String,
}

impl Server {
    async fn start(test: &str) -> Option<Self> {
        let url = common::service_url(test, URL_VAR, REQUIRE_VAR, "nats://127.0.0.1:4222")?;
        let client = async_nats::connect(&url)
            .await
            .unwrap_or_else(|e| panic!("{test}: cannot reach NATS at {URL_VAR}: {e}"));
        let jetstream = jetstream::new(client);
        let name = common::unique("HOOKD_TEST_");
        let subject = format!("hookd.test.{name}");
        let stream = jetstream
            .create_stream(jetstream::stream::Config {
                name: name.clone(),
                subjects: vec![subject.clone()],
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{test}: cannot create a stream (JetStream on?): {e}"));
        Some(Self {
            url,
            jetstream,
            stream,
            name,
            subject,
        })
    }

    fn sink(&self, url: &str, guard: Arc<dyn AddressGuard>) -> NatsSink {
        let config = NatsConfig {
            servers: vec![url.to_owned()],
            subject: self.subject.clone(),
        };
        NatsSink::new(config, guard).unwrap()
    }

    /// Stored message `sequence`: body and headers.
    async fn message(&self, sequence: u64) -> (Vec<u8>, Vec<(String, String)>) {
        let stored = self.stream.get_raw_message(sequence).await.unwrap();
        let headers = stored
            .headers
            .iter()
            .flat_map(|(name, values)| {
                values
                    .iter()
                    .map(move |value| (name.to_string(), value.to_string()))
            })
            .collect();
        (stored.payload.to_vec(), headers)
    }

    async fn stored(&mut self) -> u64 {
        self.stream.info().await.unwrap().state.messages
    }

    async fn delete(self) {
        self.jetstream.delete_stream(&self.name).await.unwrap();
    }
}

#[tokio::test]
async fn publications_arrive_once_unchanged_and_verify() {
    let Some(mut server) =
        Server::start("nats::publications_arrive_once_unchanged_and_verify").await
    else {
        return;
    };
    let secret = Secret::generate();
    let sink = server.sink(&server.url, Guard::allowing());
    let sent: Vec<_> = (0..5)
        .map(|n| common::publication(&secret, n, (n % 2 == 0).then_some("customer-7")))
        .collect();

    for publication in &sent {
        let published = sink.publish(std::slice::from_ref(publication)).await;
        assert!(published.is_ok(), "{published:?}");
    }
    // A retry of a message the stream already has is acknowledged, not stored again.
    let again = sink.publish(&sent[..1]).await.unwrap();

    assert!(again.summary.ends_with("(duplicate)"), "{again:?}");
    assert_eq!(server.stored().await, 5);
    for (sequence, publication) in (1..).zip(&sent) {
        let (body, headers) = server.message(sequence).await;
        assert_eq!(body, publication.body);
        common::verify(&secret, &body, &headers);
        let header = |name| common::header(&headers, name);
        assert_eq!(header("Nats-Msg-Id"), Some(publication.message_id.as_str()));
        assert_eq!(header(EVENT_TYPE_HEADER), Some(common::EVENT_TYPE));
        assert_eq!(
            header(ORDERING_KEY_HEADER),
            publication.ordering_key.as_deref()
        );
    }
    server.delete().await;
}

#[tokio::test]
async fn a_subject_no_stream_captures_is_rejected() {
    let Some(server) = Server::start("nats::a_subject_no_stream_captures_is_rejected").await else {
        return;
    };
    let config = NatsConfig {
        servers: vec![server.url.clone()],
        subject: format!("{}.elsewhere", server.subject),
    };
    let sink = NatsSink::new(config, Guard::allowing()).unwrap();
    let publication = common::publication(&Secret::generate(), 0, None);

    let error = sink.publish(&[publication]).await.unwrap_err();

    assert!(
        matches!(&error, SinkError::Rejected { code, .. } if code == "StreamNotFound"),
        "{error:?}"
    );
    server.delete().await;
}

#[tokio::test]
async fn the_sink_reconnects_after_the_connection_is_dropped() {
    let Some(mut server) =
        Server::start("nats::the_sink_reconnects_after_the_connection_is_dropped").await
    else {
        return;
    };
    let relay = Relay::to(common::address_of(&server.url, 4222).await).await;
    let sink = server.sink(
        &common::with_address(&server.url, relay.address),
        Guard::allowing(),
    );
    let secret = Secret::generate();

    sink.publish(&[common::publication(&secret, 0, None)])
        .await
        .unwrap();
    relay.cut();
    // The client reconnects by itself, through the relay again.
    relay.until_accepted(2).await;
    let after_cut = sink.publish(&[common::publication(&secret, 1, None)]).await;

    assert!(after_cut.is_ok(), "{after_cut:?}");
    assert_eq!(server.stored().await, 2);
    server.delete().await;
}

common::address_tests!(sink_at);

/// A sink for a server at `address` that is not the test server.
fn sink_at(address: SocketAddr, guard: Arc<dyn AddressGuard>) -> NatsSink {
    let config = NatsConfig {
        servers: vec![format!("nats://{address}")],
        subject: "hookd.test".into(),
    };
    NatsSink::new(config, guard)
        .unwrap()
        .with_timeout(Duration::from_secs(5))
}

#[test]
fn tls_servers_are_refused_as_configuration() {
    let config = NatsConfig {
        servers: vec!["tls://nats.example.com:4222".into()],
        subject: "hookd.test".into(),
    };

    let refused = NatsSink::new(config, Guard::allowing());

    assert!(matches!(refused, Err(SinkError::Config(_))));
}
