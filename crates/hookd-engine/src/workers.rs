//! The background workers every engine process runs beside the delivery pipeline. Each has a
//! loop of its own and meets the pipeline only through the store: what it writes becomes
//! deliveries, or it reads what the pipeline recorded.

pub mod notices;
pub mod relay;
pub mod retention;
pub mod tasks;
