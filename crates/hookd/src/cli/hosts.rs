//! Host names `serve` resolves from a file rather than DNS: for end-to-end tests of a
//! receiver whose name moves to new addresses.
//!
//! A test of the real binary cannot script the system resolver without root, so
//! `HOOKD_TEST_HOSTS_FILE` names a file of `name address` lines, read afresh on every lookup;
//! names it does not list resolve as usual. Like the test clock, it is an environment variable
//! only (no flag, not in `--help`), hookd logs a warning when it is set, and the answers still
//! pass the SSRF guard.

use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;

use hookd_engine::http::HostLookup;

const HOSTS_FILE_VAR: &str = "HOOKD_TEST_HOSTS_FILE";

/// The file's lookup when `HOOKD_TEST_HOSTS_FILE` is set; otherwise none (the system resolver).
pub fn from_env() -> Option<Arc<dyn HostLookup>> {
    let path = PathBuf::from(std::env::var_os(HOSTS_FILE_VAR)?);
    tracing::warn!(path = %path.display(), "{HOSTS_FILE_VAR} is set: names in that file resolve to its addresses (tests only)");
    Some(Arc::new(HostsFile { path }))
}

#[derive(Debug)]
struct HostsFile {
    path: PathBuf,
}

impl HostsFile {
    /// The addresses the file gives `host`, if it lists it.
    fn listed(&self, host: &str) -> io::Result<Option<Vec<IpAddr>>> {
        let text = std::fs::read_to_string(&self.path)?;
        let addresses: Vec<IpAddr> = text
            .lines()
            .filter_map(|line| line.split_once(char::is_whitespace))
            .filter(|(name, _)| name.eq_ignore_ascii_case(host))
            .filter_map(|(_, address)| address.trim().parse().ok())
            .collect();
        Ok((!addresses.is_empty()).then_some(addresses))
    }
}

impl HostLookup for HostsFile {
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
        let listed = self.listed(host);
        let host = host.to_owned();
        Box::pin(async move {
            match listed? {
                Some(addresses) => Ok(addresses),
                None => Ok(tokio::net::lookup_host((host.as_str(), 0))
                    .await?
                    .map(|addr| addr.ip())
                    .collect()),
            }
        })
    }
}
