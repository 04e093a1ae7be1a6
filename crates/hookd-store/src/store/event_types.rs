//! [`EventTypeStore`]: the event-type catalog.

use async_trait::async_trait;
use hookd_core::model::EventType;

use crate::{Page, PageRequest, StoreError};

/// The catalog of event types, by name.
#[async_trait]
pub trait EventTypeStore: Send + Sync {
    /// Inserts `event_type`; a taken name is a conflict.
    async fn create_event_type(&self, event_type: &EventType) -> Result<(), StoreError>;
    async fn get_event_type(&self, name: &str) -> Result<Option<EventType>, StoreError>;
    /// Event types by name; archived ones only when asked.
    async fn list_event_types(
        &self,
        page: &PageRequest,
        include_archived: bool,
    ) -> Result<Page<EventType>, StoreError>;
    async fn update_event_type(&self, event_type: &EventType) -> Result<(), StoreError>;
    async fn delete_event_type(&self, name: &str) -> Result<(), StoreError>;
}
