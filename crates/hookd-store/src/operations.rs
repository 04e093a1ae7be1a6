//! The operations application: where operational webhooks are published (see
//! [`hookd_core::operations`]). It is made at start and found by its uid; its id never changes
//! once made.

use hookd_core::Timestamp;
use hookd_core::model::{Application, EventType};
use hookd_core::operations::{APP_NAME, APP_UID, EVENT_TYPES};

use crate::{Store, StoreError};

/// The operations application, made if missing, with its event types in the catalogue (so
/// endpoints can filter on them and the catalogue lists them). Safe to race: a process that
/// loses the race to create it reads the winner's.
pub async fn ensure_operations_app(
    store: &dyn Store,
    now: Timestamp,
) -> Result<Application, StoreError> {
    for (name, description) in EVENT_TYPES {
        let event_type = EventType {
            name: name.to_owned(),
            description: description.to_owned(),
            schemas: None,
            archived: false,
            deprecated: false,
            feature_flag: None,
            created_at: now,
            updated_at: now,
        };
        match store.create_event_type(&event_type).await {
            Ok(()) | Err(StoreError::Conflict(_)) => {}
            Err(error) => return Err(error),
        }
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
