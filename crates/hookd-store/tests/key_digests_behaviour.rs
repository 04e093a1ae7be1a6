//! Key digests: which endpoint holds a key (by its digest), and whether a key was shown, with
//! exactly one of concurrent first showings getting it, and the marks kept when the digests
//! are made again under a new master key.
//!
//! Each `behaviour!` case runs against a fresh SQLite file and, when `HOOKD_TEST_POSTGRES_URL`
//! is set, against a fresh PostgreSQL database created for that test and dropped after it.

mod harness;

use harness::fixtures::{app, at, endpoint};
use hookd_store::Store;

fn digests(names: &[&str]) -> Vec<String> {
    names.iter().map(|name| (*name).to_owned()).collect()
}

async fn a_key_is_held_elsewhere_only_by_another_endpoint(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let (one, two) = (
        endpoint(&a, Some("one"), None, None),
        endpoint(&a, Some("two"), None, None),
    );
    store.create_endpoint(&one).await.unwrap();
    store.create_endpoint(&two).await.unwrap();
    store
        .set_key_digests(&one.id, "k1", &digests(&["d1", "d2"]), false)
        .await
        .unwrap();
    assert!(store.key_held_elsewhere("d1", &two.id).await.unwrap());
    assert!(
        !store.key_held_elsewhere("d1", &one.id).await.unwrap(),
        "its own"
    );
    assert!(!store.key_held_elsewhere("d3", &two.id).await.unwrap());

    // The set is replaced: d1 goes, d3 comes.
    store
        .set_key_digests(&one.id, "k1", &digests(&["d2", "d3"]), false)
        .await
        .unwrap();
    assert!(!store.key_held_elsewhere("d1", &two.id).await.unwrap());
    assert!(store.key_held_elsewhere("d3", &two.id).await.unwrap());

    // A deleted endpoint's keys are free.
    store.delete_endpoint(&one).await.unwrap();
    assert!(!store.key_held_elsewhere("d2", &two.id).await.unwrap());
}

async fn a_key_is_shown_once_and_its_mark_survives_a_new_master_key(store: &dyn Store) {
    let a = app(None, 0);
    store.create_app(&a).await.unwrap();
    let ep = endpoint(&a, None, None, None);
    store.create_endpoint(&ep).await.unwrap();
    store
        .set_key_digests(&ep.id, "k1", &digests(&["d1"]), false)
        .await
        .unwrap();

    let showings = (0..8).map(|_| store.mark_key_shown(&ep.id, "k1", "d1", at(5)));
    let firsts = futures::future::join_all(showings)
        .await
        .into_iter()
        .filter(|first| *first.as_ref().unwrap())
        .count();
    assert_eq!(firsts, 1, "exactly one concurrent first showing");
    assert!(
        !store
            .mark_key_shown(&ep.id, "k1", "d1", at(6))
            .await
            .unwrap()
    );

    // Under a new master key it lacks digests; made again, its mark carries over.
    let missing = store
        .endpoints_without_digests("k2", None, 10)
        .await
        .unwrap();
    assert_eq!(
        missing.iter().map(|row| &row.id).collect::<Vec<_>>(),
        [&ep.id]
    );
    assert!(
        store
            .endpoints_without_digests("k1", None, 10)
            .await
            .unwrap()
            .is_empty()
    );
    store
        .set_key_digests(&ep.id, "k2", &digests(&["e1"]), true)
        .await
        .unwrap();
    assert!(
        !store
            .mark_key_shown(&ep.id, "k2", "e1", at(7))
            .await
            .unwrap()
    );
    assert!(
        store
            .endpoints_without_digests("k2", None, 10)
            .await
            .unwrap()
            .is_empty()
    );

    // A key added by a rotation is new: shown once.
    store
        .set_key_digests(&ep.id, "k2", &digests(&["e1", "e2"]), false)
        .await
        .unwrap();
    assert!(
        store
            .mark_key_shown(&ep.id, "k2", "e2", at(8))
            .await
            .unwrap()
    );
    assert!(
        !store
            .mark_key_shown(&ep.id, "k2", "e2", at(9))
            .await
            .unwrap()
    );
}

behaviour!(
    a_key_is_held_elsewhere_only_by_another_endpoint,
    a_key_is_shown_once_and_its_mark_survives_a_new_master_key,
);
