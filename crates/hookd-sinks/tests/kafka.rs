//! The Kafka sink against librdkafka's mock cluster: real Kafka protocol brokers in this
//! process, so no service is needed. Each test starts its own cluster and topic; both go when
//! the cluster is dropped.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::Guard;
use hookd_sinks::broker::{EVENT_TYPE_HEADER, ORDERING_KEY_HEADER};
use hookd_sinks::{AddressGuard, KafkaConfig, KafkaSink, Sink, SinkError};
use rdkafka::mocking::MockCluster;
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use rskafka::client::ClientBuilder;
use rskafka::client::partition::UnknownTopicHandling;
use rskafka::record::RecordAndOffset;
use webhook_signature::Secret;

const PARTITIONS: i32 = 3;

/// A mock cluster of three brokers with one topic of [`PARTITIONS`] partitions.
struct Cluster {
    cluster: MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    topic: String,
}

impl Cluster {
    fn start() -> Self {
        let cluster = MockCluster::new(3).expect("a mock cluster");
        let topic = common::unique("hookd-test-");
        cluster.create_topic(&topic, PARTITIONS, 1).unwrap();
        Self { cluster, topic }
    }

    fn brokers(&self) -> Vec<String> {
        let servers = self.cluster.bootstrap_servers();
        servers.split(',').map(str::to_owned).collect()
    }

    /// The brokers' ports, broker 1 first.
    fn ports(&self) -> Vec<u16> {
        self.brokers()
            .iter()
            .map(|broker| broker.rsplit_once(':').unwrap().1.parse().unwrap())
            .collect()
    }

    /// How many records the topic holds, over all partitions.
    async fn stored(&self) -> usize {
        let mut stored = 0;
        for partition in 0..PARTITIONS {
            stored += self.records(partition).await.len();
        }
        stored
    }

    /// A sink that knows only the first broker: the others it learns from metadata.
    fn sink(&self, guard: Arc<dyn AddressGuard>) -> KafkaSink {
        let config = KafkaConfig {
            bootstrap_servers: self.brokers()[..1].to_vec(),
            topic: self.topic.clone(),
        };
        KafkaSink::new(config, guard).unwrap()
    }

    /// Every record of partition `partition`.
    async fn records(&self, partition: i32) -> Vec<RecordAndOffset> {
        let client = ClientBuilder::new(self.brokers()).build().await.unwrap();
        let partition = client
            .partition_client(self.topic.as_str(), partition, UnknownTopicHandling::Error)
            .await
            .unwrap();
        // A fetch may answer with fewer records than there are: read up to the high watermark.
        let mut records = Vec::new();
        loop {
            let next = records
                .last()
                .map_or(0, |last: &RecordAndOffset| last.offset + 1);
            let (fetched, high_watermark) = partition
                .fetch_records(next, 1..1_000_000, 100)
                .await
                .unwrap();
            records.extend(fetched);
            if records.last().map_or(0, |last| last.offset + 1) >= high_watermark {
                return records;
            }
        }
    }
}

fn text_headers(record: &rskafka::record::Record) -> Vec<(String, String)> {
    record
        .headers
        .iter()
        .map(|(name, value)| (name.clone(), String::from_utf8(value.clone()).unwrap()))
        .collect()
}

#[tokio::test]
async fn records_arrive_unchanged_keyed_and_verify() {
    let cluster = Cluster::start();
    let guard = Guard::allowing();
    let sink = cluster.sink(guard.clone());
    let secret = Secret::generate();
    let keys = ["customer-1", "customer-2", "customer-3"];
    let sent: Vec<_> = (0..6)
        .map(|n| common::publication(&secret, n, Some(keys[n % 3])))
        .collect();

    let mut summaries = Vec::new();
    for publication in &sent {
        let published = sink.publish(std::slice::from_ref(publication)).await;
        summaries.push(published.expect("acknowledged").summary);
    }

    let mut received = Vec::new();
    for partition in 0..PARTITIONS {
        for stored in cluster.records(partition).await {
            received.push((partition, stored));
        }
    }
    assert_eq!(received.len(), sent.len(), "each record once");
    for (publication, summary) in sent.iter().zip(&summaries) {
        let (partition, stored) = received
            .iter()
            .find(|(_, stored)| {
                stored.record.headers.get("webhook-id")
                    == Some(&publication.message_id.clone().into_bytes())
            })
            .expect("the record arrived");
        assert_eq!(
            summary,
            &format!("partition {partition} offset {}", stored.offset)
        );
        let record = &stored.record;
        assert_eq!(record.value.as_deref(), Some(&publication.body[..]));
        let key = publication.ordering_key.as_deref().unwrap();
        assert_eq!(record.key.as_deref(), Some(key.as_bytes()));
        let headers = text_headers(record);
        common::verify(&secret, record.value.as_deref().unwrap(), &headers);
        assert_eq!(
            common::header(&headers, EVENT_TYPE_HEADER),
            Some(common::EVENT_TYPE)
        );
        assert_eq!(common::header(&headers, ORDERING_KEY_HEADER), Some(key));
    }
    // One key, one partition: that is what keeps its records in order.
    for key in keys {
        let partitions: Vec<_> = received
            .iter()
            .filter(|(_, stored)| stored.record.key.as_deref() == Some(key.as_bytes()))
            .map(|(partition, _)| *partition)
            .collect();
        assert!(
            partitions.windows(2).all(|pair| pair[0] == pair[1]),
            "{key}: {partitions:?}"
        );
    }
    // The brokers learnt from metadata were asked about too, not only the bootstrap one.
    let ports = cluster.ports();
    let asked: Vec<u16> = guard.asked().iter().map(|(_, port)| *port).collect();
    assert!(asked.iter().all(|port| ports.contains(port)), "{asked:?}");
    assert!(asked.iter().any(|port| *port != ports[0]), "{asked:?}");
}

#[tokio::test]
async fn brokers_going_down_fail_with_connect_and_their_return_reconnects() {
    let cluster = Cluster::start();
    // While the brokers are down the client retries until the publish's time is up.
    let sink = cluster
        .sink(Guard::allowing())
        .with_timeout(Duration::from_secs(2));
    let secret = Secret::generate();
    sink.publish(&[common::publication(&secret, 0, None)])
        .await
        .unwrap();

    // A broker going down closes every connection to it and refuses new ones.
    for broker in 1..=3 {
        cluster.cluster.broker_down(broker).unwrap();
    }
    let while_down = sink.publish(&[common::publication(&secret, 1, None)]).await;
    for broker in 1..=3 {
        cluster.cluster.broker_up(broker).unwrap();
    }
    let after = sink.publish(&[common::publication(&secret, 2, None)]).await;

    assert!(
        matches!(while_down, Err(SinkError::Connect(_))),
        "{while_down:?}"
    );
    assert!(after.is_ok(), "{after:?}");
    assert_eq!(cluster.stored().await, 2);
}

#[tokio::test]
async fn a_broker_learnt_from_metadata_is_refused_when_the_guard_refuses_it() {
    let cluster = Cluster::start();
    // Every partition led by broker 2, and the guard allows broker 1 (the bootstrap) only.
    for partition in 0..PARTITIONS {
        cluster
            .cluster
            .partition_leader(&cluster.topic, partition, Some(2))
            .unwrap();
    }
    let ports = cluster.ports();
    let guard = Guard::allowing_ports(&ports[..1]);
    let sink = cluster
        .sink(guard.clone())
        .with_timeout(Duration::from_secs(2));

    let error = sink
        .publish(&[common::publication(&Secret::generate(), 0, None)])
        .await
        .unwrap_err();

    assert!(matches!(error, SinkError::Refused(_)), "{error:?}");
    assert!(
        guard.asked().iter().any(|(_, port)| *port == ports[1]),
        "{:?}",
        guard.asked()
    );
    assert_eq!(cluster.stored().await, 0);
}

#[tokio::test]
async fn a_broker_error_is_rejected_with_its_code() {
    let cluster = Cluster::start();
    let sink = cluster.sink(Guard::allowing());
    cluster.cluster.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE],
    );

    let error = sink
        .publish(&[common::publication(&Secret::generate(), 0, None)])
        .await
        .unwrap_err();

    assert!(
        matches!(&error, SinkError::Rejected { code, .. } if code == "MessageTooLarge"),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_topic_the_cluster_lacks_is_rejected() {
    let cluster = Cluster::start();
    let config = KafkaConfig {
        bootstrap_servers: cluster.brokers(),
        topic: common::unique("hookd-test-missing-"),
    };
    let sink = KafkaSink::new(config, Guard::allowing()).unwrap();
    let publication = common::publication(&Secret::generate(), 0, None);

    let error = sink.publish(&[publication]).await.unwrap_err();

    assert!(
        matches!(&error, SinkError::Rejected { code, .. } if code == "UnknownTopicOrPartition"),
        "{error:?}"
    );
}

common::address_tests!(sink_at);

/// A sink for a cluster bootstrapped at `address`, not a test cluster.
fn sink_at(address: SocketAddr, guard: Arc<dyn AddressGuard>) -> KafkaSink {
    let config = KafkaConfig {
        bootstrap_servers: vec![address.to_string()],
        topic: "hookd-test".into(),
    };
    // The client retries an unreachable broker for half of this before giving up.
    KafkaSink::new(config, guard)
        .unwrap()
        .with_timeout(Duration::from_secs(2))
}

#[test]
fn a_bootstrap_server_without_a_port_is_a_configuration_error() {
    let config = KafkaConfig {
        bootstrap_servers: vec!["kafka.example.com".into()],
        topic: "hookd-test".into(),
    };

    let refused = KafkaSink::new(config, Guard::allowing());

    assert!(matches!(refused, Err(SinkError::Config(_))));
}
