//! The RabbitMQ sink against a real broker: `HOOKD_TEST_RABBITMQ_URL`
//! (`amqp://guest:guest@127.0.0.1:5672/%2f`); skipped when unset, failing when
//! `HOOKD_TEST_REQUIRE_RABBITMQ=1`. Each test declares its own queue and deletes it. The tests
//! of unreachable and refused brokers need no broker.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{Guard, Relay};
use hookd_sinks::broker::{EVENT_TYPE_HEADER, ORDERING_KEY_HEADER};
use hookd_sinks::{AddressGuard, RabbitMqConfig, RabbitMqSink, Sink, SinkError};
use lapin::options::{BasicGetOptions, QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, Connection, ConnectionProperties};
use webhook_signature::Secret;

const URL_VAR: &str = "HOOKD_TEST_RABBITMQ_URL";
const REQUIRE_VAR: &str = "HOOKD_TEST_REQUIRE_RABBITMQ";

/// The test's broker, a channel on it, and a queue of its own, deleted when dropped.
struct Broker {
    url: String,
    channel: Channel,
    queue: String,
    _connection: Connection,
}

impl Broker {
    async fn start(test: &str) -> Option<Self> {
        let example = "amqp://guest:guest@127.0.0.1:5672/%2f";
        let url = common::service_url(test, URL_VAR, REQUIRE_VAR, example)?;
        let connection = Connection::connect(&url, ConnectionProperties::default())
            .await
            .unwrap_or_else(|e| panic!("{test}: cannot reach RabbitMQ at {URL_VAR}: {e}"));
        let channel = connection.create_channel().await.unwrap();
        let queue = common::unique("hookd-test-");
        channel
            .queue_declare(
                queue.as_str().into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        Some(Self {
            url,
            channel,
            queue,
            _connection: connection,
        })
    }

    fn sink(&self, uri: &str, routing_key: &str, guard: Arc<dyn AddressGuard>) -> RabbitMqSink {
        let config = RabbitMqConfig {
            uri: uri.to_owned(),
            routing_key: routing_key.to_owned(),
            mandatory: true,
        };
        RabbitMqSink::new(config, guard).unwrap()
    }

    /// The next message in the queue: body, `message_id`, `content_type`, headers.
    async fn next(&self) -> Option<Received> {
        let options = BasicGetOptions { no_ack: true };
        let got = self
            .channel
            .basic_get(self.queue.as_str().into(), options)
            .await
            .unwrap()?;
        let properties = &got.delivery.properties;
        let headers = properties
            .headers()
            .as_ref()
            .map(|table| {
                table
                    .inner()
                    .iter()
                    .map(|(name, value)| {
                        let AMQPValue::LongString(text) = value else {
                            panic!("{name} is not a long string: {value:?}");
                        };
                        (name.to_string(), text.to_string())
                    })
                    .collect()
            })
            .unwrap_or_default();
        Some(Received {
            body: got.delivery.data.clone(),
            message_id: properties.message_id().as_ref().map(|id| id.to_string()),
            content_type: properties.content_type().as_ref().map(|t| t.to_string()),
            headers,
        })
    }

    async fn delete(self) {
        self.channel
            .queue_delete(self.queue.as_str().into(), QueueDeleteOptions::default())
            .await
            .unwrap();
    }
}

struct Received {
    body: Vec<u8>,
    message_id: Option<String>,
    content_type: Option<String>,
    headers: Vec<(String, String)>,
}

#[tokio::test]
async fn publications_arrive_unchanged_and_verify() {
    let Some(broker) = Broker::start("rabbitmq::publications_arrive_unchanged_and_verify").await
    else {
        return;
    };
    let secret = Secret::generate();
    let sink = broker.sink(&broker.url, &broker.queue, Guard::allowing());
    let sent: Vec<_> = (0..5)
        .map(|n| common::publication(&secret, n, (n % 2 == 0).then_some("customer-7")))
        .collect();
    for publication in &sent[..3] {
        let published = sink.publish(std::slice::from_ref(publication)).await;
        assert!(published.is_ok(), "{published:?}");
    }
    // The last two as one batch, on the same connection.
    sink.publish(&sent[3..]).await.unwrap();

    for publication in &sent {
        let received = broker.next().await.expect("one message per publication");
        assert_eq!(received.body, publication.body);
        assert_eq!(received.message_id.as_ref(), Some(&publication.message_id));
        assert_eq!(received.content_type.as_deref(), Some("application/json"));
        common::verify(&secret, &received.body, &received.headers);
        let header = |name| common::header(&received.headers, name);
        assert_eq!(header("webhook-id"), Some(publication.message_id.as_str()));
        assert_eq!(header(EVENT_TYPE_HEADER), Some(common::EVENT_TYPE));
        assert_eq!(
            header(ORDERING_KEY_HEADER),
            publication.ordering_key.as_deref()
        );
    }
    assert!(broker.next().await.is_none(), "no more than was published");
    broker.delete().await;
}

#[tokio::test]
async fn an_unroutable_mandatory_publish_fails() {
    let Some(broker) = Broker::start("rabbitmq::an_unroutable_mandatory_publish_fails").await
    else {
        return;
    };
    let nowhere = common::unique("hookd-test-missing-");
    let sink = broker.sink(&broker.url, &nowhere, Guard::allowing());
    let publication = common::publication(&Secret::generate(), 0, None);

    let error = sink.publish(&[publication]).await.unwrap_err();

    assert_eq!(
        error,
        SinkError::Rejected {
            code: "312".into(),
            text: "NO_ROUTE".into()
        }
    );
    broker.delete().await;
}

#[tokio::test]
async fn a_wrong_password_is_rejected_with_the_brokers_code() {
    let Some(broker) =
        Broker::start("rabbitmq::a_wrong_password_is_rejected_with_the_brokers_code").await
    else {
        return;
    };
    let address = common::address_of(&broker.url, 5672).await;
    let uri = format!("amqp://guest:not-the-password@{address}/%2f");
    let sink = broker.sink(&uri, &broker.queue, Guard::allowing());

    let error = sink
        .publish(&[common::publication(&Secret::generate(), 0, None)])
        .await
        .unwrap_err();

    assert!(
        matches!(&error, SinkError::Rejected { code, .. } if code == "403"),
        "{error:?}"
    );
    broker.delete().await;
}

#[tokio::test]
async fn the_sink_reconnects_after_the_connection_is_dropped() {
    let Some(broker) =
        Broker::start("rabbitmq::the_sink_reconnects_after_the_connection_is_dropped").await
    else {
        return;
    };
    let relay = Relay::to(common::address_of(&broker.url, 5672).await).await;
    let uri = common::with_address(&broker.url, relay.address);
    let sink = broker.sink(&uri, &broker.queue, Guard::allowing());
    let secret = Secret::generate();
    let first = common::publication(&secret, 0, None);
    let second = common::publication(&secret, 1, None);

    sink.publish(std::slice::from_ref(&first)).await.unwrap();
    relay.cut();
    let after_cut = sink.publish(std::slice::from_ref(&second)).await;

    assert!(after_cut.is_ok(), "{after_cut:?}");
    assert_eq!(
        relay.accepted(),
        2,
        "a second connection replaced the cut one"
    );
    for publication in [&first, &second] {
        let received = broker.next().await.expect("both messages arrived");
        assert_eq!(received.message_id.as_ref(), Some(&publication.message_id));
    }
    broker.delete().await;
}

common::address_tests!(sink_at);

/// A sink for a broker at `address` that is not the test broker.
fn sink_at(address: SocketAddr, guard: Arc<dyn AddressGuard>) -> RabbitMqSink {
    let config = RabbitMqConfig {
        uri: format!("amqp://guest:guest@{address}/%2f"),
        routing_key: "q".into(),
        mandatory: false,
    };
    RabbitMqSink::new(config, guard)
        .unwrap()
        .with_timeout(Duration::from_secs(5))
}
