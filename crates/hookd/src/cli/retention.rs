//! The retention options of `hookd serve`, turned into the purger's configuration.

use std::time::Duration;

use hookd_core::parse_duration;
use hookd_engine::RetentionConfig;

/// The pause between two purge batches: room for the writes of deliveries in between.
const PAUSE: Duration = Duration::from_millis(50);

#[derive(Debug, clap::Args)]
pub struct RetentionOptions {
    /// How long the content of a delivered (or failed-for-good) message is kept: its payload
    /// and attempts are purged this long after it was created, unless the message set its own
    /// payloadRetentionPeriod. Messages with a delivery still to do are never purged.
    #[arg(long, env = "HOOKD_RETENTION", default_value = "30d")]
    retention: String,
    /// How long the record of a purged message (the message and its delivery rows: ids, event
    /// type, where it went and how that ended) is kept after it was created; then it is deleted.
    /// At least --retention; `forever` keeps records.
    #[arg(long, env = "HOOKD_KEEP_RECORDS", default_value = "90d")]
    keep_records: String,
    /// How long after its message was created an eventId stays taken (a publish with it answers
    /// 409) once the message's record is deleted. At least --keep-records.
    #[arg(long, env = "HOOKD_KEEP_EVENT_IDS", default_value = "365d")]
    keep_event_ids: String,
    /// Most messages purged in one transaction.
    #[arg(long, env = "HOOKD_RETENTION_BATCH", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    retention_batch: u64,
    /// How often the purger looks for expired content.
    #[arg(long, env = "HOOKD_RETENTION_INTERVAL", default_value = "1m")]
    retention_interval: String,
}

impl RetentionOptions {
    /// The purger's configuration, or what is wrong with the options.
    pub fn config(&self) -> anyhow::Result<RetentionConfig> {
        let duration = |flag: &str, text: &str| {
            parse_duration(text).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
        };
        let window = duration("retention", &self.retention)?;
        anyhow::ensure!(
            window >= Duration::from_secs(3_600),
            "--retention: at least 1h"
        );
        let records = match self.keep_records.as_str() {
            "forever" => None,
            text => Some(duration("keep-records", text)?),
        };
        anyhow::ensure!(
            records.is_none_or(|records| records >= window),
            "--keep-records: at least --retention ({})",
            self.retention
        );
        let event_ids = duration("keep-event-ids", &self.keep_event_ids)?;
        anyhow::ensure!(
            records.is_none_or(|records| event_ids >= records),
            "--keep-event-ids: at least --keep-records ({})",
            self.keep_records
        );
        let interval = duration("retention-interval", &self.retention_interval)?;
        anyhow::ensure!(
            interval >= Duration::from_secs(1),
            "--retention-interval: at least 1s"
        );
        Ok(RetentionConfig {
            window,
            records,
            event_ids,
            batch: usize::try_from(self.retention_batch).unwrap_or(usize::MAX),
            pause: PAUSE,
            interval,
        })
    }
}
