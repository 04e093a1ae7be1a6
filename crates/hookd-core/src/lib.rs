//! hookd's domain model, shared by the storage layer, the API and the delivery engine.
//!
//! Nothing here does I/O: these are the nouns of webhook delivery and the rules that hold for
//! them whatever stores or transports them.
//!
//! # Layout
//! - [`id`]: typed, time-sortable ids (`app_…`, `ep_…`, `msg_…`, `atmpt_…`).
//! - [`time`]: [`Timestamp`] (unix milliseconds) and the injectable [`Clock`].
//! - [`duration`]: [`parse_duration`], durations written as text (`30s`, `5m`, `2h`, `5d`).
//! - [`model`]: applications, endpoints, event types, messages, deliveries and attempts.
//! - [`envelope`]: the Standard Webhooks envelope (`type`, `timestamp`, `data`) hookd builds
//!   around a payload where an application or event type asks for it; the test-send mark.
//! - [`destination`]: [`destination::Destination`], what an endpoint delivers to (HTTP, a
//!   polling consumer, a broker or bucket) and its non-secret configuration.
//! - [`validate`]: the naming rules for uids, event types and channels, and the characters
//!   free text may not hold.
//! - [`redact`]: masking the passwords and secret parameters of URLs before they are shown.
//! - [`schema`]: event types' JSON Schemas: checking a payload against one (within a step
//!   budget, `schema/budget.rs`), an example payload made from one, and the add-only rule
//!   between a schema's versions (`schema/additive.rs`).
//! - [`openapi`]: OpenAPI documents read for an event-type import (JSON or YAML, `$ref`s
//!   resolved), at a bounded cost whatever the input.
//! - [`operations`]: the operational webhooks' event types and the messages that carry them.
//! - [`load`]: [`EndpointLoad`], an engine's current concurrency for an endpoint, for views.

pub mod destination;
pub mod duration;
pub mod envelope;
pub mod id;
pub mod load;
pub mod model;
pub mod openapi;
pub mod operations;
pub mod redact;
pub mod schema;
pub mod time;
pub mod validate;

pub use duration::{DurationParseError, parse_duration};
pub use id::{AppId, AttemptId, EndpointId, MessageId, RejectionId, SourceId, TaskId};
pub use load::{Concurrency, EndpointLoad};
pub use time::{Clock, ManualClock, StrictlyLater, SystemClock, Timestamp};
