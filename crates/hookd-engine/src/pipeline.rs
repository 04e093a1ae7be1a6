//! The delivery pipeline: how a stored delivery becomes an attempt and its record.
//!
//! A delivery is claimed (or handed off as it is written) into its endpoint's lane, waits
//! there for one of the endpoint's slots, is sent as a signed request, judged, and recorded
//! with its next state. Everything on that path lives here; what runs beside it (the outbox
//! relay, retention, tasks, notices) is in [`crate::workers`], the HTTP client and the SSRF
//! guard in [`crate::http`].

mod adaptive;
mod attempt;
pub mod config;
mod destinations;
pub mod dispatcher;
mod handoff;
mod lanes;
mod leases;
mod operations;
mod recorder;
pub mod schedule;
mod send;
