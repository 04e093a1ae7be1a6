//! [`EndpointLoad`]: what a delivery engine is doing for an endpoint right now, for views that
//! cannot reach the engine itself (the API shows it beside an endpoint's statistics).

use crate::EndpointId;

/// An endpoint's current adaptive concurrency in one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Concurrency {
    /// Attempts the endpoint may have in flight now.
    pub limit: usize,
    /// Attempts in flight now.
    pub in_flight: usize,
}

/// Reads an engine's current concurrency for an endpoint.
pub trait EndpointLoad: Send + Sync {
    /// `None` when the engine has no work for the endpoint (it starts afresh when it has).
    fn concurrency(&self, endpoint: &EndpointId) -> Option<Concurrency>;
}
