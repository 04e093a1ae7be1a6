//! `hookd serve`: the server. Opens (and migrates) the database, makes sure an admin token
//! exists, and runs the API, the portal, the delivery engine and the outbox relay (or, with `--role`, the
//! API alone or the engine and relay alone) until SIGINT or SIGTERM; the API's listener also serves the portal (`/portal`)
//! and `/metrics`.
//!
//! On SIGINT or SIGTERM the engine and relay stop claiming, the API stops accepting
//! connections, and both drain for up to `--shutdown-grace`: attempts in flight finish and are
//! recorded, or are stopped at the deadline with their claims given back (see
//! [`hookd_engine::dispatcher`]).
//!
//! On PostgreSQL several processes share the database: each one announces the deliveries it
//! creates (NOTIFY) and listens for the others' and for producers' outbox commits, so work
//! written by any process is picked up at once by whichever engine is free.

use std::ffi::OsStr;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use hookd_api::{ApiConfig, ApiState};
use hookd_core::Clock;
use hookd_engine::http::WebhookSender;
use hookd_engine::{Engine, Purger, Relay, RelayConfig};
use hookd_store::{RelayRules, Store, Wakeups};
use tokio::sync::{Notify, watch};

use super::database::{Database, runtime};
use super::delivery::DeliveryOptions;
use super::master_key::{MasterKeyOptions, reseal};
use super::metrics::MetricsOptions;
use super::retention::RetentionOptions;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address the API listens on.
    #[arg(long, env = "HOOKD_LISTEN", default_value = "127.0.0.1:8071")]
    listen: SocketAddr,
    #[command(flatten)]
    database: Database,
    #[command(flatten)]
    delivery: DeliveryOptions,
    #[command(flatten)]
    keys: MasterKeyOptions,
    #[command(flatten)]
    metrics: MetricsOptions,
    #[command(flatten)]
    retention: RetentionOptions,
    /// How long a rotated-out endpoint secret keeps signing beside the new one (a rotation may
    /// ask for its own, up to 7 days).
    #[arg(long, env = "HOOKD_ROTATION_OVERLAP", default_value = "24h")]
    rotation_overlap: String,
    /// The URL customers reach hookd at, the base of portal links [default: http://LISTEN
    /// address].
    #[arg(long, env = "HOOKD_PUBLIC_URL")]
    public_url: Option<String>,
    /// Requests per second an app-scoped token may make unless it has its own limit; 0 for
    /// none. Admin tokens are limited only by their own limit.
    #[arg(long, env = "HOOKD_APP_TOKEN_RATE_LIMIT", default_value_t = 100)]
    app_token_rate_limit: u32,
    /// Admin token (its hash is compared; the token itself is never stored). Without one,
    /// the first start creates a token, stores its hash and prints it once.
    #[arg(long, env = "HOOKD_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: Option<String>,
    /// Refuse messages whose event type is not in the catalog or is archived.
    #[arg(long, env = "HOOKD_STRICT_EVENT_TYPES")]
    strict_event_types: bool,
    /// Accept plain `http://` endpoint URLs (https only otherwise).
    #[arg(long, env = "HOOKD_ALLOW_HTTP_ENDPOINTS")]
    allow_http_endpoints: bool,
    /// Largest accepted message payload, in bytes.
    #[arg(long, env = "HOOKD_MAX_PAYLOAD_BYTES", default_value_t = 256 * 1024)]
    max_payload_bytes: usize,
    /// Requests worked on at once; more are answered 503 at once (memory stays bounded).
    #[arg(long, env = "HOOKD_MAX_IN_FLIGHT", default_value_t = 1024)]
    max_in_flight: usize,
    /// Connections held open at once (an idle keep-alive connection costs hookd about
    /// 60 KiB); more wait in the kernel's accept queue until one closes, so memory stays
    /// bounded however fast clients connect.
    #[arg(long, env = "HOOKD_MAX_CONNECTIONS", default_value_t = 512)]
    max_connections: usize,
    /// Seconds a connection may wait to send a whole request head (its first, or the next on a
    /// kept-alive connection) before hookd closes it, so that silent or idle connections
    /// cannot hold every one of `--max-connections`.
    #[arg(long, env = "HOOKD_HEADER_TIMEOUT", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    header_timeout: u64,
    /// What this process runs: `all` (the API, the delivery engine and the outbox relay),
    /// `api` (the API alone) or `engine` (the engine and the relay, no listener). Several
    /// processes on one PostgreSQL database may run any mix.
    #[arg(long, env = "HOOKD_ROLE", value_enum, default_value_t = Role::All)]
    role: Role,
    /// Log as JSON lines instead of text.
    #[arg(long, env = "HOOKD_LOG_JSON")]
    log_json: bool,
}

/// The parts of hookd one process runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Role {
    All,
    Api,
    Engine,
}

impl Role {
    fn api(self) -> bool {
        self != Self::Engine
    }

    fn engine(self) -> bool {
        self != Self::Api
    }
}

/// Outbox rows relayed in one transaction.
const RELAY_BATCH: usize = 256;
/// How often the relay looks at the outbox when nothing signals it: SQLite has no signals, so
/// it polls often (a cheap read); PostgreSQL's LISTEN wakes it, polling is only a fallback.
const RELAY_POLL_SQLITE: Duration = Duration::from_millis(50);
const RELAY_POLL_SIGNALLED: Duration = Duration::from_secs(1);
/// Least time between two announcements of new deliveries to the other processes: what an
/// engine-only process may wait, at most, for work another process's API accepted.
const ANNOUNCE_SPACING: Duration = Duration::from_millis(20);

pub fn run(args: Args) -> ExitCode {
    init_logging(args.log_json);
    match runtime().block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr: text (coloured only on a terminal, see [`colours`]) or JSON lines.
fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOOKD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let ansi = colours(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// Whether text log lines are coloured: only when they go to a terminal (in a file or a pipe
/// the escape codes are noise that breaks grep and log shippers), and never while `NO_COLOR`
/// is set to anything but the empty string (no-color.org).
fn colours(terminal: bool, no_color: Option<&OsStr>) -> bool {
    terminal && no_color.is_none_or(OsStr::is_empty)
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let (keyring, _) = args.keys.load(&args.database)?;
    let keyring = Arc::new(keyring);
    let engine_config = hookd_engine::EngineConfig {
        keyring: keyring.clone(),
        ..args.delivery.engine()?
    };
    let rotation_overlap = hookd_engine::schedule::parse_duration(&args.rotation_overlap)
        .map_err(|e| anyhow::anyhow!("--rotation-overlap: {e}"))?;
    anyhow::ensure!(
        rotation_overlap <= Duration::from_secs(7 * 24 * 3600),
        "--rotation-overlap: at most 7 days"
    );
    let retention = args.retention.config()?;
    let sender = WebhookSender::new(args.delivery.http()?)?;
    let store = args.database.open().await?;
    let resealed = reseal(store.as_ref(), &keyring).await?;
    if resealed.rekeyed + resealed.sealed_legacy > 0 {
        tracing::info!(
            master_key = keyring.current_id(),
            rekeyed = resealed.rekeyed,
            sealed_legacy = resealed.sealed_legacy,
            "endpoint keys sealed under the current master key"
        );
    }
    // Bound before the API is configured: the portal links it hands out name this address.
    let listener = match args.role.api() {
        true => Some(
            tokio::net::TcpListener::bind(args.listen)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?,
        ),
        false => None,
    };
    let address = listener.as_ref().map(|l| l.local_addr()).transpose()?;
    let clock: Arc<dyn Clock> = super::clock::from_env();
    // Operational webhooks are published in this application (made once, kept after).
    hookd_store::ensure_operations_app(store.as_ref(), clock.now())
        .await
        .map_err(|e| anyhow::anyhow!("cannot make the operations application: {e}"))?;
    let config = ApiConfig {
        max_payload_bytes: args.max_payload_bytes,
        strict_event_types: args.strict_event_types,
        allow_http_endpoints: args.allow_http_endpoints,
        max_in_flight: args.max_in_flight,
        configured_admin_token_hashes: args
            .admin_token
            .iter()
            .map(|t| hookd_api::token_hash(t))
            .collect(),
        keyring,
        rotation_overlap,
        public_url: args
            .public_url
            .clone()
            .unwrap_or_else(|| address.map_or_else(String::new, |a| format!("http://{a}"))),
        app_token_rate_limit: args.app_token_rate_limit,
    };
    if args.role.api() && config.configured_admin_token_hashes.is_empty() {
        ensure_admin_token(store.as_ref(), clock.as_ref()).await?;
    }
    // `new_work`: this process created deliveries (the API or the relay). `wakeups`: other
    // processes did, or a producer committed outbox rows.
    let new_work = Arc::new(Notify::new());
    let wakeups = Wakeups::default();
    let signalled = store.watch(wakeups.clone()).await?;
    let engine_wake = if signalled {
        tokio::spawn(announce(
            store.clone(),
            new_work.clone(),
            wakeups.deliveries.clone(),
        ));
        wakeups.deliveries.clone()
    } else {
        new_work.clone()
    };
    let shutdown_grace = engine_config.shutdown_grace;
    // For every listener: the API's and the metrics' own.
    let header_timeout = Duration::from_secs(args.header_timeout);
    let (stop, stopped) = watch::channel(false);
    let mut background = Vec::new();
    let metrics = args.metrics.install()?;
    tokio::spawn(metrics.clone().sample(store.clone(), clock.clone()));
    if let Some(address) = args.metrics.metrics_listen {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {address} for metrics: {e}"))?;
        tracing::info!(%address, "serving /metrics");
        let stop = until(stopped.clone());
        background.push(tokio::spawn(metrics.clone().serve_alone(
            listener,
            header_timeout,
            stop,
        )));
    }
    if args.role.engine() {
        let engine = Engine::new(
            store.clone(),
            clock.clone(),
            sender,
            engine_config,
            engine_wake,
        );
        let relay = Relay::new(
            store.clone(),
            clock.clone(),
            RelayConfig {
                rules: RelayRules {
                    strict_event_types: config.strict_event_types,
                    max_payload_bytes: config.max_payload_bytes,
                },
                batch: RELAY_BATCH,
                poll_interval: if signalled {
                    RELAY_POLL_SIGNALLED
                } else {
                    RELAY_POLL_SQLITE
                },
            },
            wakeups.outbox.clone(),
            new_work.clone(),
        );
        background.push(tokio::spawn(engine.run(until(stopped.clone()))));
        background.push(tokio::spawn(relay.run(until(stopped.clone()))));
        // The engine's processes also purge expired content (in small batches, see retention).
        let purger = Purger::new(store.clone(), clock.clone(), retention);
        background.push(tokio::spawn(purger.run(until(stopped.clone()))));
    }
    let stop_on_signal = async move {
        shutdown_signal().await;
        let _ = stop.send(true);
    };
    if let (Some(listener), Some(address)) = (listener, address) {
        let state = ApiState::new(store, clock, config, new_work);
        tracing::info!(%address, database = %args.database.display(), role = ?args.role, "hookd is serving");
        println!("hookd listening on http://{address}");
        let app = hookd_api::router(state)
            .merge(hookd_portal::router())
            .merge(metrics.router());
        let listener = hookd_api::ConnectionLimit::new(listener, args.max_connections);
        let server = hookd_api::serve(listener, app, header_timeout, stop_on_signal);
        // Open connections get the grace to finish their requests, as attempts do.
        let grace_over = async {
            until(stopped.clone()).await;
            tokio::time::sleep(shutdown_grace).await;
        };
        tokio::select! {
            () = server => {}
            () = grace_over => tracing::warn!("API requests still open after the shutdown grace are cut off"),
        }
    } else {
        tracing::info!(database = %args.database.display(), "hookd is delivering (no API)");
        println!("hookd engine running");
        stop_on_signal.await;
    }
    for task in background {
        task.await?;
    }
    tracing::info!("hookd stopped");
    Ok(())
}

/// Creates and prints an admin token when none is configured or stored: the only time the
/// token is ever shown.
async fn ensure_admin_token(store: &dyn Store, clock: &dyn Clock) -> anyhow::Result<()> {
    if store.has_admin_token().await? {
        return Ok(());
    }
    let token = hookd_api::create_admin_token(store, clock.now()).await?;
    println!("Created the admin token (shown once; only its hash is stored):\n  {token}");
    Ok(())
}

/// Passes this process's "deliveries created" on to its own engine at once, and announces it
/// to every other process on the database (see [`announce_to_others`]).
async fn announce(store: Arc<dyn Store>, new_work: Arc<Notify>, engine: Arc<Notify>) {
    let others = Arc::new(Notify::new());
    tokio::spawn(announce_to_others(store, others.clone()));
    loop {
        new_work.notified().await;
        engine.notify_one();
        others.notify_one();
    }
}

/// Announces new deliveries to the other processes (NOTIFY) at most once per
/// [`ANNOUNCE_SPACING`]; wake-ups in between are covered by the next announcement. Every
/// announcement makes every other engine claim, and NOTIFYs take turns at commit: one per
/// publish would spend the cluster's database time on claims that mostly find nothing.
async fn announce_to_others(store: Arc<dyn Store>, others: Arc<Notify>) {
    loop {
        others.notified().await;
        if let Err(error) = store.announce_deliveries().await {
            tracing::warn!(%error, "cannot announce new deliveries; other processes find them at their next poll");
        }
        tokio::time::sleep(ANNOUNCE_SPACING).await;
    }
}

/// Completes once `stopped` turns true.
async fn until(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = interrupt.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_are_coloured_on_a_terminal_without_no_color_only() {
        assert!(colours(true, None));
        assert!(
            colours(true, Some(OsStr::new(""))),
            "empty NO_COLOR is unset"
        );
        assert!(!colours(true, Some(OsStr::new("1"))));
        assert!(!colours(false, None), "a file or pipe gets no colour codes");
        assert!(!colours(false, Some(OsStr::new("1"))));
    }
}
