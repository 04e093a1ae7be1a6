//! [`EndpointStore`]: the URLs an application's messages are delivered to.

use async_trait::async_trait;
use hookd_core::AppId;
use hookd_core::model::Endpoint;

use crate::{Page, PageRequest, StoreError};

/// An application's endpoints. Disabling one for delivery failures is
/// [`crate::DeliveryQueue::disable_endpoint`].
#[async_trait]
pub trait EndpointStore: Send + Sync {
    /// Inserts `endpoint`; a uid taken within the application is a conflict.
    async fn create_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError>;
    /// The endpoint of `app` whose id or uid is `id_or_uid`.
    async fn get_endpoint(
        &self,
        app: &AppId,
        id_or_uid: &str,
    ) -> Result<Option<Endpoint>, StoreError>;
    /// An application's endpoints in creation order.
    async fn list_endpoints(
        &self,
        app: &AppId,
        page: &PageRequest,
    ) -> Result<Page<Endpoint>, StoreError>;
    /// Replaces the mutable fields of the stored endpoint with `endpoint.id`.
    async fn update_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError>;
    /// Deletes an endpoint with its deliveries and attempts.
    async fn delete_endpoint(&self, endpoint: &Endpoint) -> Result<(), StoreError>;
}
