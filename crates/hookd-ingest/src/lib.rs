//! Ingest sources' verification: a source's Svix Ingest `type` and `config` become a
//! [`SourceConfig`], which checks an inbound request on its raw bytes and says what was
//! received (the provider's event id and type, or a challenge to answer) or why it is refused.
//! No server, no database, no clock of its own (the caller passes "now"), so the API, the
//! receive route and the tests share one set of rules.
//!
//! ```
//! use hookd_ingest::{Accepted, InboundRequest, SourceConfig};
//! use serde_json::json;
//!
//! let source = SourceConfig::parse("github", &json!({"secret": "It's a Secret to Everybody"})).unwrap();
//! let mut headers = http::HeaderMap::new();
//! headers.insert("x-hub-signature-256", webhook_signature::github::sign("It's a Secret to Everybody", b"{}").parse().unwrap());
//! headers.insert("x-github-event", "push".parse().unwrap());
//! let accepted = source.verify(&InboundRequest { headers: &headers, body: b"{}", now: 1_700_000_000 });
//! assert!(matches!(accepted, Ok(Accepted::Event { event_type, .. }) if event_type == "push"));
//! ```
//!
//! # Layout
//! - `served`: [`served_types`], every `type` hookd serves with its [`SchemeKind`], the
//!   headers each scheme reads ([`served_types_markdown`] renders them for the docs).
//! - `config`: [`SourceConfig`] (parse, the `config` answered and the one stored) and
//!   [`ConfigError`]; `fields` reads a `config` object field by field, naming the field at fault.
//! - `request`: [`InboundRequest`], [`Accepted`], [`Rejection`] and [`RejectReason`], and
//!   reading headers off a request.
//! - `body`: the event id and type read from a verified JSON body, and event types made into
//!   names hookd accepts.
//! - `scheme/`: one file a scheme: `standard` (Standard Webhooks and Svix), `stripe`, `github`,
//!   `shopify`, `slack` (with its `url_verification` challenge), `generic` (no signature;
//!   optional basic auth and API-key header).

#![warn(missing_docs)]

mod body;
mod config;
mod fields;
mod request;
mod scheme;
mod served;

pub use config::{ConfigError, SourceConfig};
pub use request::{Accepted, InboundRequest, RejectReason, Rejection};
pub use served::{SchemeKind, ServedType, served_types, served_types_markdown};
