//! Standard Webhooks signatures for senders and receivers.
//!
//! # Layout
//! (filled in by the signature work)
