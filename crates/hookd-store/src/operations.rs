//! The operations application: where operational webhooks are published (see
//! [`hookd_core::operations`]). It is made at start and found by its uid; its id never changes
//! once made.

use hookd_core::Timestamp;
use hookd_core::model::{Application, EventType};
use hookd_core::operations::{APP_NAME, APP_UID, EVENT_TYPES};

use crate::{Store, StoreError};

/// The operations application, made if missing, with its event types in the catalogue (so
/// endpoints can filter on them and the catalogue lists them). Safe to race: a process that
/// loses the race to create it reads the winner's. Runs at every start, so a database made by
/// an older hookd gets the types added since, and their descriptions as this hookd words them.
pub async fn ensure_operations_app(
    store: &dyn Store,
    now: Timestamp,
) -> Result<Application, StoreError> {
    for (name, description) in EVENT_TYPES {
        catalogue(store, name, description, now).await?;
    }
    if let Some(app) = store.get_app(APP_UID).await? {
        return Ok(app);
    }
    let app = Application {
        id: hookd_core::AppId::new(now),
        uid: Some(APP_UID.to_owned()),
        name: APP_NAME.to_owned(),
        metadata: Default::default(),
        throttle_rate: None,
        envelope: false,
        created_at: now,
        updated_at: now,
    };
    match store.create_app(&app).await {
        Ok(()) => Ok(app),
        Err(StoreError::Conflict(_)) => store
            .get_app(APP_UID)
            .await?
            .ok_or(StoreError::NotFound("application")),
        Err(error) => Err(error),
    }
}

/// Puts the operational event type `name` in the catalogue, or rewords the one there if an
/// older hookd described it otherwise (`endpoint.disabled` once told only of hookd's own
/// disabling). These types are hookd's: what they say follows what this hookd sends.
async fn catalogue(
    store: &dyn Store,
    name: &str,
    description: &str,
    now: Timestamp,
) -> Result<(), StoreError> {
    let event_type = EventType {
        name: name.to_owned(),
        description: description.to_owned(),
        schemas: None,
        archived: false,
        deprecated: false,
        feature_flag: None,
        group_name: None,
        feature_flags: None,
        envelope: false,
        created_at: now,
        updated_at: now,
    };
    match store.create_event_type(&event_type).await {
        Err(StoreError::Conflict(_)) => {}
        done => return done,
    }
    match store.get_event_type(name).await? {
        Some(stored) if stored.description != description => {
            let reworded = EventType {
                description: description.to_owned(),
                updated_at: now,
                ..stored
            };
            match store.update_event_type(&reworded).await {
                // Deleted meanwhile: the next start makes it again.
                Err(StoreError::NotFound(_)) => Ok(()),
                done => done,
            }
        }
        _ => Ok(()),
    }
}
