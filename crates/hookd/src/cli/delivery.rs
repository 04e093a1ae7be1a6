//! The delivery engine's options for `hookd serve`, turned into the engine's and the HTTP
//! client's configuration.

use std::path::PathBuf;
use std::time::Duration;

use hookd_core::parse_duration;
use hookd_engine::http::HttpConfig;
use hookd_engine::http::ssrf::AddressPolicy;
use hookd_engine::{EngineConfig, Jitter, RetrySchedule};
use ipnet::IpNet;

#[derive(Debug, clap::Args)]
pub struct DeliveryOptions {
    /// Attempts in flight across all endpoints.
    #[arg(long, env = "HOOKD_WORKERS", default_value_t = EngineConfig::DEFAULT_WORKERS)]
    workers: usize,
    /// The most attempts in flight to any one endpoint, across every process (an endpoint's
    /// `maxConcurrency` may set fewer). Within it, each endpoint's limit adapts to how its
    /// receiver answers. On PostgreSQL it counts every delivery held under a lease (claimed
    /// ahead, in flight, or waiting for its record), so it sits well above what one fast
    /// receiver needs in flight: under load, a delivery is held for its publish's commit and
    /// its record's as well as its attempt.
    #[arg(
        long,
        visible_alias = "endpoint-concurrency",
        env = "HOOKD_ENDPOINT_MAX_CONCURRENCY",
        default_value_t = EngineConfig::DEFAULT_ENDPOINT_MAX_CONCURRENCY
    )]
    endpoint_max_concurrency: usize,
    /// Attempt timeout for endpoints without their own, in seconds (1..=30).
    #[arg(long, env = "HOOKD_ATTEMPT_TIMEOUT", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..=30))]
    attempt_timeout: u64,
    /// Waits between attempts, the first normally 0 (comma-separated: 0,5s,5m,2h,1d).
    #[arg(
        long,
        env = "HOOKD_RETRY_SCHEDULE",
        default_value = "0,5s,5m,30m,2h,5h,10h,14h,20h,24h"
    )]
    retry_schedule: String,
    /// How far each wait of the schedule is spread at random: `+10%` (up to 10 % longer, never
    /// earlier than scheduled) or `±20%` (up to 20 % shorter or longer); at most 50 %.
    #[arg(long, env = "HOOKD_RETRY_JITTER", default_value = "+10%")]
    retry_jitter: String,
    /// Disable an endpoint that has failed without a success for this long.
    #[arg(long, env = "HOOKD_DISABLE_AFTER", default_value = "5d")]
    disable_after: String,
    /// Send the `message.attempt.failing` operational webhook when a message has failed this
    /// many attempts in a row to an endpoint (Svix: the fourth); 0 never sends it.
    #[arg(long, env = "HOOKD_FAILING_AFTER", default_value_t = 4)]
    failing_after: u32,
    /// How long a claimed delivery is reserved before it may be attempted again after a crash;
    /// attempt timeouts are capped at a third of it.
    #[arg(long, env = "HOOKD_LEASE", default_value = "90s")]
    lease: String,
    /// Let deliveries reach this range despite the SSRF guard (repeatable, or comma-separated
    /// in the environment), e.g. 10.0.0.0/8 for private deployments.
    #[arg(
        long = "allow-subnet",
        env = "HOOKD_ALLOW_SUBNETS",
        value_delimiter = ','
    )]
    allow_subnets: Vec<IpNet>,
    /// Turn the SSRF guard off entirely (every address reachable). Not for production.
    #[arg(long, env = "HOOKD_DISABLE_SSRF_GUARD")]
    disable_ssrf_guard: bool,
    /// On SIGTERM or SIGINT, how long attempts in flight (and API requests) may go on to
    /// finish; attempts still running then are stopped and their deliveries made due again at
    /// once.
    #[arg(long, env = "HOOKD_SHUTDOWN_GRACE", default_value = "10s")]
    shutdown_grace: String,
    /// Also trust the root certificates in this PEM file (a private CA's, for endpoints
    /// inside a private deployment); repeatable, or comma-separated in the environment.
    #[arg(long = "trust-ca", env = "HOOKD_TRUST_CA", value_delimiter = ',')]
    trust_ca: Vec<PathBuf>,
    /// Send every delivery through this HTTP proxy (for a fixed egress IP).
    #[arg(long, env = "HOOKD_EGRESS_PROXY", hide_env_values = true, value_hint = clap::ValueHint::Url)]
    egress_proxy: Option<String>,
    /// How long connections to an endpoint are pooled before they are closed and its name
    /// resolved again, so a receiver's DNS change is followed within it.
    #[arg(long, env = "HOOKD_CONNECTION_LIFETIME", default_value = "2m")]
    connection_lifetime: String,
    /// Also send svix-id, svix-timestamp and svix-signature, for receivers on Svix's libraries.
    #[arg(long, env = "HOOKD_SVIX_HEADERS")]
    svix_headers: bool,
}

impl DeliveryOptions {
    /// The engine's configuration, or what is wrong with the options.
    pub fn engine(&self) -> anyhow::Result<EngineConfig> {
        let jitter = Jitter::parse(&self.retry_jitter)
            .map_err(|e| anyhow::anyhow!("--retry-jitter: {e}"))?;
        let schedule = RetrySchedule::parse(&self.retry_schedule)
            .map_err(|e| anyhow::anyhow!("--retry-schedule: {e}"))?
            .with_jitter(jitter);
        let duration = |flag: &str, text: &str| {
            parse_duration(text).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
        };
        Ok(EngineConfig {
            workers: self.workers.max(1),
            endpoint_max_concurrency: self.endpoint_max_concurrency.max(1),
            attempt_timeout: Duration::from_secs(self.attempt_timeout),
            lease: duration("lease", &self.lease)?.max(Duration::from_secs(2)),
            schedule,
            disable_after: duration("disable-after", &self.disable_after)?,
            failing_after: self.failing_after,
            svix_headers: self.svix_headers,
            shutdown_grace: duration("shutdown-grace", &self.shutdown_grace)?,
            ..EngineConfig::default()
        })
    }

    /// Lets deliveries reach this machine's loopback addresses (`serve --dev`).
    pub fn allow_loopback(&mut self) {
        let loopback = ["127.0.0.0/8", "::1/128"].map(|net| net.parse::<IpNet>().expect("valid"));
        self.allow_subnets.extend(loopback);
    }

    /// The outbound HTTP client's configuration, or which file could not be read.
    pub fn http(&self) -> anyhow::Result<HttpConfig> {
        let policy = if self.disable_ssrf_guard {
            AddressPolicy::disabled()
        } else {
            self.allow_subnets
                .iter()
                .fold(AddressPolicy::default(), |p, net| p.allow(*net))
        };
        let extra_roots = self
            .trust_ca
            .iter()
            .map(|path| {
                let fail = |why: &dyn std::fmt::Display| {
                    anyhow::anyhow!("--trust-ca {}: {why}", path.display())
                };
                let pem = std::fs::read(path).map_err(|e| fail(&e))?;
                // A key or a DER file would otherwise be read as an empty bundle, trusting nothing.
                if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
                    return Err(fail(&"no PEM certificate in it"));
                }
                Ok(pem)
            })
            .collect::<anyhow::Result<_>>()?;
        let connection_lifetime = parse_duration(&self.connection_lifetime)
            .map_err(|e| anyhow::anyhow!("--connection-lifetime: {e}"))?;
        anyhow::ensure!(
            !connection_lifetime.is_zero(),
            "--connection-lifetime: must be longer than 0"
        );
        Ok(HttpConfig {
            policy,
            egress_proxy: self.egress_proxy.clone(),
            extra_roots,
            connection_lifetime,
            lookup: super::hosts::from_env(),
            ..HttpConfig::default()
        })
    }
}
