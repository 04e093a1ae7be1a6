//! [`ApplicationStore`]: the producer's customers.

use async_trait::async_trait;
use hookd_core::AppId;
use hookd_core::model::Application;

use crate::{Page, PageRequest, StoreError};

/// Applications: one per customer of the producer, owning endpoints and messages.
#[async_trait]
pub trait ApplicationStore: Send + Sync {
    /// Inserts `app`; a taken uid is a [`StoreError::Conflict`].
    async fn create_app(&self, app: &Application) -> Result<(), StoreError>;
    /// The application whose id or uid is `id_or_uid`.
    async fn get_app(&self, id_or_uid: &str) -> Result<Option<Application>, StoreError>;
    /// Applications in creation order.
    async fn list_apps(&self, page: &PageRequest) -> Result<Page<Application>, StoreError>;
    /// Replaces the mutable fields of the stored application with `app.id`.
    async fn update_app(&self, app: &Application) -> Result<(), StoreError>;
    /// Deletes an application with its endpoints, messages, deliveries and attempts.
    async fn delete_app(&self, id: &AppId) -> Result<(), StoreError>;
}
