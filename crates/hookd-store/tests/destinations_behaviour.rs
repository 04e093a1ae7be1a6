//! Destinations: endpoints of other kinds, stored with their configuration and listed apart
//! from HTTP endpoints; polling destinations get no deliveries, and their consumers read the
//! messages in id order below a cut and keep their positions.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use harness::fixtures::{app, at, endpoint, first_page, message};
use hookd_core::destination::{
    AwsAccess, Destination, KafkaConfig, NatsConfig, RabbitMqConfig, SqsConfig,
};
use hookd_core::model::{Application, Endpoint};
use hookd_core::{EndpointId, MessageId};
use hookd_store::{ApiToken, MessageFilter, NewMessage, POLL_SETTLE, PollRequest, Store};

fn destination(a: &Application, uid: &str, created: i64, kind: Destination) -> Endpoint {
    Endpoint {
        id: EndpointId::new(at(created)),
        uid: Some(uid.to_owned()),
        destination: kind,
        ..endpoint(a, None, None, None)
    }
}

async fn destinations_keep_their_kind_and_are_listed_apart_from_endpoints(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let http = endpoint(&a, Some("http"), None, None);
    store.create_endpoint(&http).await.unwrap();
    let rabbit = Destination::RabbitMq(RabbitMqConfig {
        uri: "amqp://guest:********@127.0.0.1:5672/%2f".into(),
        routing_key: "orders".into(),
        mandatory: true,
    });
    let mut queue = destination(&a, "rabbit", 2, rabbit);
    queue.batch_size = 10;
    queue.max_wait_secs = 5;
    store.create_endpoint(&queue).await.unwrap();
    let polling = destination(&a, "poll", 3, Destination::Polling);
    store.create_endpoint(&polling).await.unwrap();

    assert_eq!(
        store.get_endpoint(&a.id, "rabbit").await.unwrap(),
        Some(queue.clone())
    );
    let endpoints = store.list_endpoints(&a.id, &first_page(10)).await.unwrap();
    assert_eq!(endpoints.items, vec![http.clone()]);
    let kafka = Destination::Kafka(KafkaConfig {
        bootstrap_servers: vec!["127.0.0.1:9092".into()],
        topic: "orders".into(),
    });
    let stream = destination(&a, "kafka", 4, kafka);
    store.create_endpoint(&stream).await.unwrap();
    let destinations = store
        .list_destinations(&a.id, &first_page(10), false)
        .await
        .unwrap();
    assert_eq!(destinations.items, vec![queue.clone(), polling.clone()]);
    let extended = store
        .list_destinations(&a.id, &first_page(10), true)
        .await
        .unwrap();
    assert_eq!(extended.items, vec![queue.clone(), polling.clone(), stream]);
    assert_eq!(store.count_endpoints(&a.id).await.unwrap(), 4);

    let mut changed = queue.clone();
    changed.destination = Destination::Sqs(SqsConfig {
        queue_url: "http://127.0.0.1:5000/1/q".into(),
        access: AwsAccess {
            region: "us-east-1".into(),
            access_key_id: Some("AK".into()),
            endpoint_url: None,
        },
    });
    changed.batch_size = 1;
    changed.updated_at = at(9);
    store.update_endpoint(&changed).await.unwrap();
    assert_eq!(
        store.get_endpoint(&a.id, "rabbit").await.unwrap(),
        Some(changed)
    );
}

async fn publishing_writes_deliveries_for_every_destination_but_a_polling_one(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let http = endpoint(&a, Some("http"), None, None);
    let fifo = destination(&a, "fifo", 2, Destination::Fifo);
    let polling = destination(&a, "poll", 3, Destination::Polling);
    let broker = Destination::NatsJetStream(NatsConfig {
        url: "nats://127.0.0.1:4222".into(),
        subject: "orders".into(),
    });
    let nats = destination(&a, "nats", 4, broker);
    for ep in [&http, &fifo, &polling, &nats] {
        store.create_endpoint(ep).await.unwrap();
    }
    let msg = message(&a, "order.shipped", None, None, 10);
    let created = store.publish(NewMessage::new(msg.clone())).await.unwrap();
    assert_eq!(created.deliveries, 3, "the polling destination gets none");
    let routed: Vec<EndpointId> = store
        .list_message_deliveries(&a.id, &msg)
        .await
        .unwrap()
        .into_iter()
        .map(|(ep, _)| ep.id)
        .collect();
    assert!(
        [&http, &fifo, &nats]
            .iter()
            .all(|ep| routed.contains(&ep.id))
    );
    assert!(!routed.contains(&polling.id));
}

async fn a_poll_reads_oldest_first_after_its_cursor_and_below_its_cut(store: &dyn Store) {
    let (a, b) = (app(None, 0), app(None, 1));
    store.create_app(&a).await.unwrap();
    store.create_app(&b).await.unwrap();
    let mut published = Vec::new();
    for (i, (event_type, channel)) in [
        ("order.shipped", "eu"),
        ("order.paid", "us"),
        ("order.shipped", "us"),
        ("order.shipped", "eu"),
    ]
    .into_iter()
    .enumerate()
    {
        let msg = message(&a, event_type, None, Some(&[channel]), 10 * (i as i64 + 1));
        store.publish(NewMessage::new(msg.clone())).await.unwrap();
        published.push(msg.id);
    }
    store
        .publish(NewMessage::new(message(
            &b,
            "order.shipped",
            None,
            None,
            15,
        )))
        .await
        .unwrap();
    let start = MessageId::lowest_at(at(0)).to_string();
    // Settled: the messages made before 35 ms.
    let now = at(35).plus(POLL_SETTLE);
    let everything = MessageFilter::default();
    let request = PollRequest {
        app: &a.id,
        after: &start,
        now,
        filter: &everything,
        limit: 2,
    };
    let first = store.poll_messages(&request).await.unwrap();
    let ids: Vec<&MessageId> = first.items.iter().map(|m| &m.id).collect();
    assert_eq!(ids, vec![&published[0], &published[1]], "oldest first");
    assert!(first.has_more);
    let after_second = published[1].to_string();
    let next = PollRequest {
        after: &after_second,
        ..request.clone()
    };
    let second = store.poll_messages(&next).await.unwrap();
    let ids: Vec<&MessageId> = second.items.iter().map(|m| &m.id).collect();
    assert_eq!(ids, vec![&published[2]], "the message past the cut waits");
    assert!(!second.has_more);

    let shipped_in_eu = MessageFilter {
        event_types: Some(vec!["order.shipped".into()]),
        channel: Some("eu".into()),
        ..MessageFilter::default()
    };
    let filtered = PollRequest {
        now: at(100).plus(POLL_SETTLE),
        filter: &shipped_in_eu,
        limit: 10,
        ..request.clone()
    };
    let found = store.poll_messages(&filtered).await.unwrap();
    let ids: Vec<&MessageId> = found.items.iter().map(|m| &m.id).collect();
    assert_eq!(ids, vec![&published[0], &published[3]]);
}

async fn a_message_committed_after_a_later_one_is_still_polled_in_its_place(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    // `early` gets its id first but commits after `later` (a slow publish).
    let early = message(&a, "order.paid", None, None, 9_000);
    let later = message(&a, "order.paid", None, None, 9_500);
    store.publish(NewMessage::new(later.clone())).await.unwrap();
    let start = MessageId::lowest_at(at(0)).to_string();
    let everything = MessageFilter::default();
    let poll = PollRequest {
        app: &a.id,
        after: &start,
        now: at(10_000),
        filter: &everything,
        limit: 10,
    };
    let unsettled = store.poll_messages(&poll).await.unwrap();
    assert!(
        unsettled.items.is_empty(),
        "a poll does not read past ids that may still be committing"
    );
    store.publish(NewMessage::new(early.clone())).await.unwrap();
    let settled = PollRequest {
        now: at(9_500)
            .plus(POLL_SETTLE)
            .plus(std::time::Duration::from_millis(1)),
        ..poll.clone()
    };
    let page = store.poll_messages(&settled).await.unwrap();
    let ids: Vec<&MessageId> = page.items.iter().map(|m| &m.id).collect();
    assert_eq!(
        ids,
        vec![&early.id, &later.id],
        "in id order, the late one first"
    );
}

async fn a_consumer_position_is_remembered_per_destination_and_consumer(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let polling = destination(&a, "poll", 3, Destination::Polling);
    let other = destination(&a, "poll2", 4, Destination::Polling);
    store.create_endpoint(&polling).await.unwrap();
    store.create_endpoint(&other).await.unwrap();
    assert_eq!(
        store.consumer_position(&polling.id, "c1").await.unwrap(),
        None
    );
    store
        .set_consumer_position(&polling.id, "c1", "pos-1", at(5))
        .await
        .unwrap();
    store
        .set_consumer_position(&polling.id, "c1", "pos-2", at(6))
        .await
        .unwrap();
    store
        .set_consumer_position(&other.id, "c1", "other", at(6))
        .await
        .unwrap();
    assert_eq!(
        store.consumer_position(&polling.id, "c1").await.unwrap(),
        Some("pos-2".into())
    );
    assert_eq!(
        store.consumer_position(&polling.id, "c2").await.unwrap(),
        None
    );
    store.delete_endpoint(&polling).await.unwrap();
    assert_eq!(
        store.consumer_position(&polling.id, "c1").await.unwrap(),
        None,
        "deleting the destination forgets its consumers"
    );
}

async fn poller_tokens_are_kept_with_their_destination_and_expire_on_rotation(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let polling = destination(&a, "poll", 3, Destination::Polling);
    store.create_endpoint(&polling).await.unwrap();
    let token = |id: &str, expires_at| ApiToken {
        id: id.into(),
        token_hash: format!("hash-{id}"),
        app_id: Some(a.id.clone()),
        created_at: at(5),
        expires_at,
        endpoint_id: Some(polling.id.clone()),
        ..ApiToken::default()
    };
    let (open, soon, app_wide) = (
        token("t1", None),
        token("t2", Some(at(10))),
        ApiToken {
            endpoint_id: None,
            ..token("t3", None)
        },
    );
    for t in [&open, &soon, &app_wide] {
        store.create_token(t).await.unwrap();
    }
    assert_eq!(
        store.find_token("hash-t1").await.unwrap(),
        Some(open.clone())
    );
    store
        .expire_poller_tokens(&polling.id, at(60))
        .await
        .unwrap();
    let expiry = async |hash: &str| store.find_token(hash).await.unwrap().unwrap().expires_at;
    assert_eq!(expiry("hash-t1").await, Some(at(60)));
    assert_eq!(
        expiry("hash-t2").await,
        Some(at(10)),
        "an earlier expiry stays"
    );
    assert_eq!(expiry("hash-t3").await, None, "not a poller token");
    store.delete_endpoint(&polling).await.unwrap();
    assert_eq!(store.find_token("hash-t1").await.unwrap(), None);
}

behaviour!(
    destinations_keep_their_kind_and_are_listed_apart_from_endpoints,
    publishing_writes_deliveries_for_every_destination_but_a_polling_one,
    a_poll_reads_oldest_first_after_its_cursor_and_below_its_cut,
    a_message_committed_after_a_later_one_is_still_polled_in_its_place,
    a_consumer_position_is_remembered_per_destination_and_consumer,
    poller_tokens_are_kept_with_their_destination_and_expire_on_rotation,
);
