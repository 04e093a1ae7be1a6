//! The v1 routes, one module per resource, as in Svix's API.

pub mod application;
pub mod attempt;
pub mod auth;
pub mod background_task;
#[cfg(test)]
mod described;
pub mod destination;
pub mod endpoint;
pub mod endpoint_health;
pub mod endpoint_stats;
pub mod event_type;
pub mod health;
pub mod ingest;
pub mod message;
pub mod openapi_import;
pub mod redelivery;
pub mod whoami;
