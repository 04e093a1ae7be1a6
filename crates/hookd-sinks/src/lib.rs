//! Destinations beyond HTTP. A customer who cannot or will not run a public HTTPS endpoint
//! takes hookd's messages in their own broker or bucket instead; this crate publishes one
//! message (or a batch, where the destination batches) there and turns the broker's answer
//! into what the delivery log records. It knows nothing of hookd's queue or storage: the
//! engine claims a delivery, hands a [`Publication`] to the destination's [`Sink`], and
//! judges the [`Published`] or [`SinkError`] like an HTTP endpoint's answer.
//!
//! # Layout
//! - [`publication`]: what is published: the payload bytes unchanged, the Standard Webhooks
//!   headers that let a consumer verify it, the event type and the ordering key.
//! - [`sink`]: the [`Sink`] trait every destination type implements, its acknowledgement
//!   ([`Published`]) and its typed failure ([`SinkError`]).
//! - [`guard`]: [`AddressGuard`], how a sink asks the engine's SSRF guard which addresses a
//!   broker's host may be reached at before it connects.
//! - [`aws`]: the `sqs`, `sns` and `amazonS3` destinations (AWS or any service with their
//!   APIs), SigV4-signed calls over reqwest.
//! - [`batch`]: [`Batched`], which gathers the publications in flight to one destination into
//!   batches (`batchSize`, `maxWaitSecs`).
//! - [`broker`]: what the broker sinks share: the headers every message carries, the
//!   per-publish time limit, the connection kept across publishes.
//! - [`rabbitmq`]: [`RabbitMqSink`], publisher-confirmed AMQP publishing (`rabbitMq`).
//! - [`nats`]: [`NatsSink`], JetStream publishing with acknowledgements (`natsJetStream`).
//! - [`kafka`]: [`KafkaSink`], producing with `acks = all` (`kafka`), every broker connection
//!   through the guard.

pub mod aws;
pub mod batch;
pub mod broker;
pub mod guard;
pub mod kafka;
pub mod nats;
pub mod publication;
pub mod rabbitmq;
pub mod sink;

pub use batch::Batched;
pub use guard::AddressGuard;
pub use kafka::{KafkaConfig, KafkaSink};
pub use nats::{NatsConfig, NatsSink};
pub use publication::Publication;
pub use rabbitmq::{RabbitMqConfig, RabbitMqSink};
pub use sink::{Published, Sink, SinkError};
