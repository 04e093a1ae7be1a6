//! Background tasks: a replay of what an endpoint missed queues exactly the messages of its
//! range that its filters take and that never had a delivery to it, chunk by chunk, resuming
//! where a chunk ended; expunging an application's contents drops every payload of it and no
//! other's; tasks are listed newest first and filtered. Each case runs on SQLite and, when
//! configured, PostgreSQL.

mod harness;

use harness::fixtures::{app, at, endpoint, first_page, message};
use harness::queue::{delivery, record};
use hookd_core::model::{DeliveryStatus, Message};
use hookd_store::prelude::*;
use hookd_store::{BackgroundTask, NewMessage, ReplayFilter, TaskFilter, TaskStatus, TaskWork};

/// Runs chunks of `chunk` messages until no task is left running; returns each chunk's
/// (scanned so far, queued by the chunk).
async fn run_tasks(store: &dyn Store, chunk: usize) -> Vec<(u64, u64)> {
    let mut steps = Vec::new();
    while let Some(step) = store.step_task(chunk, at(10_000)).await.unwrap() {
        steps.push((step.task.scanned, step.queued));
        assert!(steps.len() < 100, "a task never finishes");
    }
    steps
}

async fn publish(store: &dyn Store, message: Message) -> Message {
    store
        .publish(NewMessage::new(message.clone()))
        .await
        .unwrap();
    message
}

async fn a_replay_queues_what_the_endpoint_missed_in_its_range_once(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let before = publish(store, message(&a, "order.shipped", None, None, 100)).await;
    let missed = publish(store, message(&a, "order.shipped", None, None, 200)).await;
    let filtered = publish(store, message(&a, "invoice.paid", None, None, 300)).await;
    let expunged = publish(store, message(&a, "order.shipped", None, None, 400)).await;
    store.expunge_message_content(&expunged).await.unwrap();
    let after = publish(store, message(&a, "order.shipped", None, None, 900)).await;
    let ep = endpoint(&a, None, Some(&["order.shipped"]), None);
    store.create_endpoint(&ep).await.unwrap();
    let delivered = publish(store, message(&a, "order.shipped", None, None, 500)).await;
    let work = TaskWork::ReplayMissing {
        endpoint: ep.id.clone(),
        since: at(150),
        until: Some(at(800)),
    };
    let task = BackgroundTask::new(Some(a.id.clone()), work, at(1_000));
    store.create_task(&task).await.unwrap();

    let steps = run_tasks(store, 2).await;

    assert_eq!(steps, [(2, 1), (4, 0), (4, 0)], "chunks of two, resumed");
    let replayed = delivery(store, &missed, &ep)
        .await
        .expect("the missed one is queued");
    assert_eq!(replayed.status, DeliveryStatus::Pending);
    assert_eq!(replayed.next_attempt_at, Some(at(10_000)), "due now");
    for left_out in [&before, &filtered, &expunged, &after] {
        assert!(
            delivery(store, left_out, &ep).await.is_none(),
            "{}",
            left_out.id
        );
    }
    assert!(delivery(store, &delivered, &ep).await.is_some());
    let done = store.get_task(&task.id).await.unwrap().unwrap();
    assert_eq!(done.status, TaskStatus::Finished);
    assert_eq!((done.scanned, done.done), (4, 1));
}

async fn a_bulk_replay_sends_again_what_its_filter_takes(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let ep = endpoint(&a, None, None, None);
    store.create_endpoint(&ep).await.unwrap();
    let succeeded = publish(store, message(&a, "order.shipped", None, None, 100)).await;
    let failed = publish(store, message(&a, "order.shipped", None, None, 200)).await;
    let other_type = publish(store, message(&a, "invoice.paid", None, None, 300)).await;
    record(
        store,
        &succeeded,
        &ep,
        1_000,
        DeliveryStatus::Success,
        1,
        None,
    )
    .await
    .unwrap();
    for msg in [&failed, &other_type] {
        record(store, msg, &ep, 1_000, DeliveryStatus::Fail, 5, None)
            .await
            .unwrap();
    }
    let filter = ReplayFilter {
        event_types: Some(vec!["order.shipped".into()]),
        status: Some(DeliveryStatus::Fail.code()),
        status_code_class: Some(500),
        ..ReplayFilter::default()
    };
    let work = TaskWork::BulkReplay {
        endpoint: ep.id.clone(),
        since: at(0),
        until: None,
        filter,
    };
    let task = BackgroundTask::new(Some(a.id.clone()), work, at(2_000));
    store.create_task(&task).await.unwrap();

    let steps = run_tasks(store, 10).await;

    assert_eq!(steps, [(3, 1)], "one chunk looked at the three, sent one");
    let again = delivery(store, &failed, &ep).await.unwrap();
    assert_eq!(
        again.status,
        DeliveryStatus::Pending,
        "the failed one is sent again"
    );
    assert_eq!(again.next_attempt_at, Some(at(10_000)));
    for kept in [&succeeded, &other_type] {
        let delivery = delivery(store, kept, &ep).await.unwrap();
        assert_ne!(delivery.status, DeliveryStatus::Pending, "{}", kept.id);
    }
    let done = store.get_task(&task.id).await.unwrap().unwrap();
    assert_eq!(
        (done.status, done.scanned, done.done),
        (TaskStatus::Finished, 3, 1)
    );
    assert_eq!(done.work, task.work, "the filter is kept as given");
}

async fn a_replay_to_a_deleted_endpoint_fails_and_says_why(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let ep = endpoint(&a, None, None, None);
    store.create_endpoint(&ep).await.unwrap();
    let work = TaskWork::ReplayMissing {
        endpoint: ep.id.clone(),
        since: at(0),
        until: None,
    };
    let task = BackgroundTask::new(Some(a.id.clone()), work, at(1_000));
    store.create_task(&task).await.unwrap();
    store.delete_endpoint(&ep).await.unwrap();

    run_tasks(store, 10).await;

    let failed = store.get_task(&task.id).await.unwrap().unwrap();
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(failed.error.as_deref(), Some("endpoint: was deleted"));
}

async fn expunging_all_contents_drops_every_payload_of_the_application_only(store: &dyn Store) {
    let (mine, theirs) = (app(None, 0), app(None, 1));
    store.create_app(&mine).await.unwrap();
    store.create_app(&theirs).await.unwrap();
    let mut messages = Vec::new();
    for n in 0..5 {
        messages.push(publish(store, message(&mine, "a.b", None, None, 100 + n)).await);
    }
    let kept = publish(store, message(&theirs, "a.b", None, None, 200)).await;
    let task = BackgroundTask::new(
        Some(mine.id.clone()),
        TaskWork::ExpungeAllContents,
        at(1_000),
    );
    store.create_task(&task).await.unwrap();

    run_tasks(store, 2).await;

    for message in &messages {
        let stored = store
            .get_message(&mine.id, message.id.as_str())
            .await
            .unwrap();
        assert_eq!(stored.unwrap().payload, None);
    }
    let other = store
        .get_message(&theirs.id, kept.id.as_str())
        .await
        .unwrap();
    assert!(other.unwrap().payload.is_some());
    let done = store.get_task(&task.id).await.unwrap().unwrap();
    assert_eq!(
        (done.status, done.scanned, done.done),
        (TaskStatus::Finished, 5, 5)
    );
}

async fn tasks_are_listed_newest_first_and_filtered(store: &dyn Store) {
    let (a, b) = (app(None, 0), app(None, 1));
    store.create_app(&a).await.unwrap();
    store.create_app(&b).await.unwrap();
    let first = BackgroundTask::new(Some(a.id.clone()), TaskWork::ExpungeAllContents, at(1));
    let second = BackgroundTask::new(Some(b.id.clone()), TaskWork::ExpungeAllContents, at(2));
    for task in [&first, &second] {
        store.create_task(task).await.unwrap();
    }
    store.step_task(10, at(3)).await.unwrap();

    let all = store
        .list_tasks(&TaskFilter::default(), &first_page(10))
        .await
        .unwrap();
    let ids: Vec<_> = all.items.iter().map(|t| t.id.clone()).collect();
    assert_eq!(ids, [second.id.clone(), first.id.clone()]);
    let running = TaskFilter {
        status: Some(TaskStatus::Running),
        ..TaskFilter::default()
    };
    let running = store.list_tasks(&running, &first_page(10)).await.unwrap();
    assert_eq!(running.items.len(), 1, "the older one ran and finished");
    let of_a = TaskFilter {
        app: Some(a.id.clone()),
        kind: Some("application.purge_content".into()),
        ..TaskFilter::default()
    };
    let of_a = store.list_tasks(&of_a, &first_page(10)).await.unwrap();
    assert_eq!(of_a.items.len(), 1);
    assert_eq!(of_a.items[0].id, first.id);
}

async fn statistics_count_destinations_and_list_subscribed_event_types(store: &dyn Store) {
    let (a, b) = (app(Some("acme"), 0), app(None, 1));
    store.create_app(&a).await.unwrap();
    store.create_app(&b).await.unwrap();
    let filtered = endpoint(&a, None, Some(&["order.shipped", "invoice.paid"]), None);
    store.create_endpoint(&filtered).await.unwrap();
    let mut everything = endpoint(&a, None, None, None);
    everything.id = hookd_core::EndpointId::new(at(2));
    store.create_endpoint(&everything).await.unwrap();
    publish(store, message(&a, "order.shipped", None, None, 100)).await;
    publish(store, message(&a, "order.shipped", None, None, 900)).await;
    publish(store, message(&b, "order.shipped", None, None, 100)).await;
    let stats = TaskWork::AppStats {
        since: at(0),
        until: at(500),
        apps: None,
    };
    let stats = BackgroundTask::new(None, stats, at(1_000));
    let event_types = BackgroundTask::new(None, TaskWork::EventTypeAggregate, at(1_001));
    for task in [&stats, &event_types] {
        store.create_task(task).await.unwrap();
    }

    run_tasks(store, 10).await;

    let stats = store.get_task(&stats.id).await.unwrap().unwrap();
    assert_eq!(stats.status, TaskStatus::Finished);
    let expected = serde_json::json!([
        {"appId": a.id.as_str(), "appUid": "acme", "messageDestinations": 2},
        {"appId": b.id.as_str(), "appUid": null, "messageDestinations": 0},
    ]);
    assert_eq!(
        serde_json::Value::from(stats.results),
        expected,
        "two endpoints, one message in range"
    );
    let event_types = store.get_task(&event_types.id).await.unwrap().unwrap();
    let expected = serde_json::json!([
        {"appId": a.id.as_str(), "explicitlySubscribedEventTypes": ["invoice.paid", "order.shipped"],
         "hasCatchAllEndpoint": true},
        {"appId": b.id.as_str(), "explicitlySubscribedEventTypes": [], "hasCatchAllEndpoint": false},
    ]);
    assert_eq!(serde_json::Value::from(event_types.results), expected);
}

behaviour!(
    a_replay_queues_what_the_endpoint_missed_in_its_range_once,
    a_bulk_replay_sends_again_what_its_filter_takes,
    a_replay_to_a_deleted_endpoint_fails_and_says_why,
    expunging_all_contents_drops_every_payload_of_the_application_only,
    tasks_are_listed_newest_first_and_filtered,
    statistics_count_destinations_and_list_subscribed_event_types,
);
