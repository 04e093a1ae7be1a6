//! The `--database` / `--data-dir` options `serve` and `migrate` share, and the runtime they
//! run on.

use std::path::PathBuf;
use std::sync::Arc;

use hookd_store::Store;

#[derive(Debug, clap::Args)]
pub struct Database {
    /// Database URL: `sqlite://PATH` or `postgres://…` [default: sqlite://DATA_DIR/hookd.db]
    #[arg(long = "database", env = "HOOKD_DATABASE_URL", hide_env_values = true, value_hint = clap::ValueHint::Url)]
    url: Option<String>,
    /// Directory for the default SQLite database.
    #[arg(long, env = "HOOKD_DATA_DIR", default_value = "hookd-data")]
    data_dir: PathBuf,
}

impl Database {
    /// The URL in use, defaulted from the data directory.
    fn url(&self) -> String {
        self.url
            .clone()
            .unwrap_or_else(|| format!("sqlite://{}", self.data_dir.join("hookd.db").display()))
    }

    /// The directory for hookd's own files (the default database, the default master key).
    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    /// The URL without its password or secret parameters, for logs.
    pub fn display(&self) -> String {
        hookd_core::redact::url(&self.url())
    }

    /// Opens the store and applies pending migrations. The driver's error is shown with the
    /// URL's secrets masked: it may quote them.
    pub async fn open(&self) -> anyhow::Result<Arc<dyn Store>> {
        let url = self.url();
        hookd_store::open(&url).await.map_err(|e| {
            let why = hookd_core::redact::error_text(&e.to_string(), &url);
            anyhow::anyhow!("cannot open the database {}: {why}", self.display())
        })
    }
}

/// The multi-threaded runtime the server commands run on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("building the tokio runtime")
}
