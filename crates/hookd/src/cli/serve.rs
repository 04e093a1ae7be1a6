//! `hookd serve`: the server. Opens (and migrates) the database, makes sure an admin token
//! exists, and runs the API, the portal, the delivery engine and the outbox relay (or, with
//! `--role`, the API alone or the engine and relay alone) until SIGINT or SIGTERM; the API's
//! listener also serves the portal (`/portal`) and `/metrics`.
//!
//! [`serve`] starts the server in named steps, each a function below; how it stops (who is
//! told, in what order, with what grace) is [`Shutdown`]'s.
//!
//! On PostgreSQL several processes share the database: each one announces the deliveries it
//! creates (NOTIFY) and listens for the others' and for producers' outbox commits, so work
//! written by any process is picked up at once by whichever engine is free.

use std::ffi::OsStr;
use std::io::{IsTerminal, Write as _};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use hookd_api::{ApiConfig, ApiState};
use hookd_core::Clock;
use hookd_engine::http::WebhookSender;
use hookd_engine::{
    Engine, EngineConfig, Mailer, Notices, Purger, Relay, RelayConfig, RetentionConfig, TaskRunner,
};
use hookd_sources::SourceSpec;
use hookd_store::{RelayRules, Store, Wakeups};
use hookd_vault::{CredentialHeaders, Keyring};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use super::database::{Database, runtime};
use super::delivery::DeliveryOptions;
use super::master_key::{MasterKeyOptions, Resealed, digest_keys, reseal};
use super::metrics::{Metrics, MetricsOptions};
use super::notices::NoticeOptions;
use super::outbox::{SourceOptions, start_relays};
use super::retention::RetentionOptions;
use super::shutdown::Shutdown;
use super::traces::{TraceOptions, Traces};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Read options from this TOML file (keys are these options' names: `workers = 512`);
    /// the command line and the environment take precedence over it.
    #[arg(long, env = "HOOKD_CONFIG", value_name = "FILE")]
    config: Option<std::path::PathBuf>,
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
    #[command(flatten)]
    notices: NoticeOptions,
    #[command(flatten)]
    traces: TraceOptions,
    #[command(flatten)]
    outbox_sources: SourceOptions,
    /// How long a rotated-out endpoint secret keeps signing beside the new one (a rotation may
    /// ask for its own, up to 7 days).
    #[arg(long, env = "HOOKD_ROTATION_OVERLAP", default_value = "24h")]
    rotation_overlap: String,
    /// Answer an endpoint's secret (`GET …/secret`) only once after it is made (created or
    /// rotated); later reads are refused with 409, and rotating is the way to a new one.
    /// Off by default: Svix lets a secret be read at any time.
    #[arg(long, env = "HOOKD_SECRETS_SHOWN_ONCE")]
    secrets_shown_once: bool,
    /// The URL customers reach hookd at, the base of portal links [default: http://LISTEN
    /// address].
    #[arg(long, env = "HOOKD_PUBLIC_URL")]
    public_url: Option<String>,
    /// Requests per second an app-scoped token may make unless it has its own limit; 0 for
    /// none. Admin tokens are limited only by their own limit.
    #[arg(long, env = "HOOKD_APP_TOKEN_RATE_LIMIT", default_value_t = 100)]
    app_token_rate_limit: u32,
    /// Endpoints one application may have; creating one more answers 422. One publish goes
    /// to every endpoint that takes it, so this bounds what a message costs and how far a
    /// customer can fan out the provider's messages.
    #[arg(long, env = "HOOKD_MAX_ENDPOINTS_PER_APP", default_value_t = hookd_api::state::DEFAULT_MAX_ENDPOINTS_PER_APP, value_parser = clap::value_parser!(u64).range(1..))]
    max_endpoints_per_app: u64,
    /// Write an audit line (`hookd::audit`, `token.use`) for every API request, reads and
    /// publishes too; without it only requests that change something or are refused leave one.
    #[arg(long, env = "HOOKD_ACCESS_LOG")]
    access_log: bool,
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
    /// An endpoint header name (any case) whose value is a credential, besides the names hookd
    /// knows (`Authorization`, `Cookie`, names ending in `-Key`, `-Token`, `-Secret`,
    /// `-Password`, …): its value is sealed at rest and shown to customers' tokens by name
    /// only. Repeat the option, or separate names with commas.
    #[arg(
        long,
        env = "HOOKD_SENSITIVE_HEADERS",
        value_name = "NAME",
        value_delimiter = ','
    )]
    sensitive_header: Vec<String>,
    /// Development mode: deliver to plain `http://` endpoints on this machine (loopback,
    /// 127.0.0.0/8 and ::1), as `--allow-http-endpoints --allow-subnet 127.0.0.0/8
    /// --allow-subnet ::1/128` would, and print how to try hookd. Refused with --production.
    #[arg(long, env = "HOOKD_DEV", conflicts_with = "production")]
    dev: bool,
    /// Largest accepted message payload, in bytes.
    #[arg(long, env = "HOOKD_MAX_PAYLOAD_BYTES", default_value_t = 256 * 1024)]
    max_payload_bytes: usize,
    /// A published payload larger than this many bytes (20480 follows the Standard Webhooks
    /// advice: stay small, link to larger data) is counted in `hookd_large_payloads_total` and
    /// logged as a warning naming its message; 0 (the default) counts none.
    #[arg(long, env = "HOOKD_LARGE_PAYLOAD_BYTES", default_value_t = 0)]
    large_payload_bytes: usize,
    /// Requests worked on at once; more are answered 503 at once (memory stays bounded).
    #[arg(long, env = "HOOKD_MAX_IN_FLIGHT", default_value_t = 1024)]
    max_in_flight: usize,
    /// Connections held open at once (an idle keep-alive connection costs hookd about
    /// 60 KiB), so memory stays bounded however fast clients connect. At the limit, a new
    /// connection is served in the place of one asked to close (one that has sent no request
    /// a second after it opened, else idle a second or more, else busy, closed after its
    /// answer); the others wait in the kernel's accept queue.
    #[arg(long, env = "HOOKD_MAX_CONNECTIONS", default_value_t = 1024)]
    max_connections: usize,
    /// Connections held open at once from one client address (IPv6: one /64); 0 for no cap.
    /// At it, a new connection from that address is served in the place of one of the
    /// address's own, never another's. Behind a reverse proxy every connection comes from the
    /// proxy: raise it to `--max-connections` or set 0, and limit clients at the proxy.
    #[arg(long, env = "HOOKD_MAX_CONNECTIONS_PER_CLIENT", default_value_t = 768)]
    max_connections_per_client: usize,
    /// Seconds a new connection may take to send its first whole request head before hookd
    /// closes it (later requests on a kept-alive connection have `--header-timeout`).
    #[arg(long, env = "HOOKD_FIRST_REQUEST_TIMEOUT", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    first_request_timeout: u64,
    /// Seconds a connection may wait to send a whole request head (the next on a kept-alive
    /// connection, or its first if `--first-request-timeout` is longer) before hookd closes
    /// it, so that silent or idle connections cannot hold every one of `--max-connections`.
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

pub fn run(mut args: Args) -> ExitCode {
    // Dropped last, after the runtime: the spans still batched are sent then.
    let _traces = match init_logging(args.log_json, &args.traces) {
        Ok(traces) => traces,
        Err(error) => {
            super::print_error(format_args!("{error:#}"));
            return ExitCode::FAILURE;
        }
    };
    if args.dev {
        args.allow_http_endpoints = true;
        args.delivery.allow_loopback();
    }
    match runtime().block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let error = super::error_text(format_args!("{error:#}"));
            tracing::error!("{error}");
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Logs to stderr: text (coloured only on a terminal, see [`colours`]) or JSON lines; and,
/// with `--otlp-endpoint`, exports hookd's spans (see [`super::traces`]), whose exporter is
/// returned to be flushed at the end.
fn init_logging(json: bool, traces: &TraceOptions) -> anyhow::Result<Option<Traces>> {
    let asked = std::env::var("HOOKD_LOG").unwrap_or_else(|_| "info".to_owned());
    // RabbitMQ's client logs every lost connection as an error of its own, on each attempt to
    // a broker that is down, which the delivery log already records; it speaks when asked to.
    let quieted = match asked.contains("lapin") {
        true => asked,
        false => format!("{asked},lapin=off"),
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&quieted)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,lapin=off"));
    let ansi = colours(
        std::io::stderr().is_terminal(),
        std::env::var_os("NO_COLOR").as_deref(),
    );
    let lines = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    let lines = if json {
        lines.json().boxed()
    } else {
        lines
            .fmt_fields(super::log_fields::PlainFields::default())
            .boxed()
    };
    let (spans, exporter) = traces.layer()?.unzip();
    tracing_subscriber::registry()
        .with(lines.with_filter(filter))
        .with(spans)
        .init();
    Ok(exporter)
}

/// Whether text log lines are coloured: only when they go to a terminal (in a file or a pipe
/// the escape codes are noise that breaks grep and log shippers), and never while `NO_COLOR`
/// is set to anything but the empty string (no-color.org).
fn colours(terminal: bool, no_color: Option<&OsStr>) -> bool {
    terminal && no_color.is_none_or(OsStr::is_empty)
}

/// Starts every part this process runs, then runs until SIGINT or SIGTERM.
async fn serve(args: Args) -> anyhow::Result<()> {
    let clock: Arc<dyn Clock> = super::clock::from_env();
    let mut settings = Settings::from_args(&args, &clock)?;
    let store = open_store(&args.database, &settings.keyring, &settings.credentials).await?;
    // Bound before the API is configured: the portal links it hands out name this address.
    let listener = bind_api(&args).await?;
    let address = listener.as_ref().map(TcpListener::local_addr).transpose()?;
    ensure_operations_app(store.as_ref(), clock.as_ref()).await?;
    let config = api_config(&args, &settings, address);
    if args.role.api() && config.configured_admin_token_hashes.is_empty() {
        ensure_admin_token(store.as_ref(), clock.as_ref()).await?;
    }
    let wake = WakeUps::start(&store).await?;
    // For every listener: the API's and the metrics' own.
    let timeouts = hookd_api::Timeouts {
        first_request: Duration::from_secs(args.first_request_timeout),
        header: Duration::from_secs(args.header_timeout),
    };
    let mut shutdown = Shutdown::new(settings.engine.shutdown_grace);
    let metrics = start_metrics(&args.metrics, &store, &clock, timeouts, &mut shutdown).await?;
    let rules = RelayRules {
        strict_event_types: config.strict_event_types,
        max_payload_bytes: config.max_payload_bytes,
    };
    let engine = if args.role.engine() {
        let sources = std::mem::take(&mut settings.outbox_sources);
        start_relays(
            sources,
            rules.clone(),
            &store,
            &clock,
            &wake.new_work,
            &mut shutdown,
        )?;
        Some(start_delivery(
            settings,
            rules,
            &store,
            &clock,
            &wake,
            &mut shutdown,
        ))
    } else {
        None
    };
    match (listener, address) {
        (Some(listener), Some(address)) => {
            tracing::info!(%address, database = %args.database.display(), role = ?args.role, config = ?args.config, "hookd is serving");
            println!("hookd listening on http://{address}");
            if args.dev {
                print_dev_guide(address);
            }
            let mut state = ApiState::new(store, clock, config, wake.new_work);
            if let Some(engine) = engine {
                state = state
                    .with_endpoint_load(engine)
                    .with_task_runner(wake.tasks.clone());
            }
            let app = hookd_api::router(state)
                .merge(hookd_portal::router())
                .merge(metrics.router());
            let listener = hookd_api::ConnectionLimit::new(listener, args.max_connections)
                .per_client(args.max_connections_per_client);
            let server = hookd_api::serve(listener, app, timeouts, shutdown.notice());
            shutdown.start_api(server);
        }
        _ => {
            tracing::info!(database = %args.database.display(), "hookd is delivering (no API)");
            println!("hookd engine running");
        }
    }
    shutdown.on_signal().await?;
    tracing::info!("hookd stopped");
    Ok(())
}

/// What `--dev` opens, and how to try hookd from here: the portal, a receiver, a publish.
fn print_dev_guide(address: SocketAddr) {
    tracing::warn!(
        "development mode: plain http:// endpoints on loopback (127.0.0.0/8, ::1) receive \
         deliveries; never use --dev in production"
    );
    // Written, not println!: stdout may be a pipe already closed by whoever read the address.
    let _ = writeln!(
        std::io::stdout(),
        "development mode: http:// endpoints on this machine are allowed (not for production)
  portal:  http://{address}/portal/ (sign in with the admin token)
  receive: hookd listen --secret whsec_…   (then add http://127.0.0.1:8000 as an endpoint)
  publish: curl http://{address}/api/v1/app/APP/msg -H 'Authorization: Bearer ADMIN_TOKEN' \\
             -H 'content-type: application/json' \\
             -d '{{\"eventType\": \"order.shipped\", \"payload\": {{\"type\": \"order.shipped\", \"timestamp\": \"2026-11-14T09:53:14Z\", \"data\": {{\"orderId\": 1003}}}}}}'"
    );
}

/// The options turned into each part's configuration, all checked before anything starts.
struct Settings {
    /// The master keys that seal endpoint keys at rest.
    keyring: Arc<Keyring>,
    engine: EngineConfig,
    rotation_overlap: Duration,
    retention: RetentionConfig,
    sender: WebhookSender,
    /// Where e-mail notices go out, when they do.
    mailer: Option<Mailer>,
    /// The outbox sources this process relays (with the engine).
    outbox_sources: Vec<SourceSpec>,
    /// Which endpoint headers carry credentials (`--sensitive-header` added).
    credentials: CredentialHeaders,
}

impl Settings {
    fn from_args(args: &Args, clock: &Arc<dyn Clock>) -> anyhow::Result<Self> {
        let (keyring, _) = args.keys.load(&args.database)?;
        let keyring = Arc::new(keyring);
        let engine = EngineConfig {
            keyring: keyring.clone(),
            traceparent: args.traces.traceparent()?,
            ..args.delivery.engine()?
        };
        let rotation_overlap = hookd_core::parse_duration(&args.rotation_overlap)
            .map_err(|e| anyhow::anyhow!("--rotation-overlap: {e}"))?;
        anyhow::ensure!(
            rotation_overlap <= Duration::from_secs(7 * 24 * 3600),
            "--rotation-overlap: at most 7 days"
        );
        Ok(Self {
            keyring,
            engine,
            rotation_overlap,
            retention: args.retention.config()?,
            sender: WebhookSender::with_clock(args.delivery.http()?, clock.clone())?,
            mailer: args.notices.config()?.map(|c| c.mailer()).transpose()?,
            outbox_sources: args.outbox_sources.specs()?,
            credentials: credential_headers(&args.sensitive_header)?,
        })
    }
}

/// The credential header rule with the operator's `--sensitive-header` names, each checked to
/// be an HTTP header name (a misspelt one would silently seal nothing).
fn credential_headers(names: &[String]) -> anyhow::Result<CredentialHeaders> {
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        axum::http::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| anyhow::anyhow!("--sensitive-header {name:?}: not an HTTP header name"))?;
    }
    Ok(CredentialHeaders::new(names))
}

/// Opens (and migrates) the database, seals every endpoint key under the current master key,
/// with every credential header an endpoint still keeps in clear, and digests the keys of
/// endpoints without digests.
async fn open_store(
    database: &Database,
    keyring: &Keyring,
    credentials: &CredentialHeaders,
) -> anyhow::Result<Arc<dyn Store>> {
    let store = database.open().await?;
    let resealed = reseal(store.as_ref(), keyring, credentials).await?;
    if resealed != Resealed::default() {
        tracing::info!(
            master_key = keyring.current_id(),
            rekeyed = resealed.rekeyed,
            sealed_legacy = resealed.sealed_legacy,
            sealed_headers = resealed.sealed_headers,
            sources = resealed.sources,
            "endpoint keys and ingest sources sealed under the current master key"
        );
    }
    let digested = digest_keys(store.as_ref(), keyring).await?;
    if digested > 0 {
        tracing::info!(
            endpoints = digested,
            "key digests recorded for endpoints without them"
        );
    }
    Ok(store)
}

/// The API's listener, bound, when this process serves the API.
async fn bind_api(args: &Args) -> anyhow::Result<Option<TcpListener>> {
    if !args.role.api() {
        return Ok(None);
    }
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
    Ok(Some(listener))
}

/// Makes the application operational webhooks are published in (once; kept after).
async fn ensure_operations_app(store: &dyn Store, clock: &dyn Clock) -> anyhow::Result<()> {
    hookd_store::ensure_operations_app(store, clock.now())
        .await
        .map_err(|e| anyhow::anyhow!("cannot make the operations application: {e}"))?;
    Ok(())
}

/// The API's configuration; portal links name `--public-url`, or else the API's `address`.
fn api_config(args: &Args, settings: &Settings, address: Option<SocketAddr>) -> ApiConfig {
    ApiConfig {
        max_payload_bytes: args.max_payload_bytes,
        large_payload_bytes: args.large_payload_bytes,
        strict_event_types: args.strict_event_types,
        allow_http_endpoints: args.allow_http_endpoints,
        max_in_flight: args.max_in_flight,
        configured_admin_token_hashes: args
            .admin_token
            .iter()
            .map(|t| hookd_api::token_hash(t))
            .collect(),
        keyring: settings.keyring.clone(),
        rotation_overlap: settings.rotation_overlap,
        public_url: args
            .public_url
            .clone()
            .unwrap_or_else(|| address.map_or_else(String::new, |a| format!("http://{a}"))),
        app_token_rate_limit: args.app_token_rate_limit,
        access_log: args.access_log,
        credential_headers: settings.credentials.clone(),
        max_endpoints_per_app: args.max_endpoints_per_app,
        secrets_shown_once: args.secrets_shown_once,
    }
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

/// The wake-up channels between the parts: who tells whom that there is work.
struct WakeUps {
    /// This process created deliveries (its API or its relay).
    new_work: Arc<Notify>,
    /// Wakes this process's engine: `new_work` itself on SQLite; on PostgreSQL, other
    /// processes' announcements, to which [`announce`] passes `new_work` on as well.
    engine: Arc<Notify>,
    /// A producer committed outbox rows (PostgreSQL's LISTEN; never on SQLite).
    outbox: Arc<Notify>,
    /// Whether the store signals other processes' work (PostgreSQL), so the relay need poll
    /// only as a fallback.
    signalled: bool,
    /// This process's API created a background task.
    tasks: Arc<Notify>,
}

impl WakeUps {
    /// Listens for other processes' work if the store can, and starts announcing this
    /// process's to them.
    async fn start(store: &Arc<dyn Store>) -> anyhow::Result<Self> {
        let new_work = Arc::new(Notify::new());
        let wakeups = Wakeups::default();
        let signalled = store.watch(wakeups.clone()).await?;
        let engine = if signalled {
            tokio::spawn(announce(
                store.clone(),
                new_work.clone(),
                wakeups.deliveries.clone(),
            ));
            wakeups.deliveries
        } else {
            new_work.clone()
        };
        Ok(Self {
            new_work,
            engine,
            outbox: wakeups.outbox,
            signalled,
            tasks: Arc::new(Notify::new()),
        })
    }
}

/// Installs the metrics exporter, samples the database-wide gauges, and serves `/metrics` on
/// `--metrics-listen` when given.
async fn start_metrics(
    options: &MetricsOptions,
    store: &Arc<dyn Store>,
    clock: &Arc<dyn Clock>,
    timeouts: hookd_api::Timeouts,
    shutdown: &mut Shutdown,
) -> anyhow::Result<Metrics> {
    let metrics = options.install()?;
    tokio::spawn(metrics.clone().sample(store.clone(), clock.clone()));
    if let Some(address) = options.metrics_listen {
        let listener = TcpListener::bind(address)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {address} for metrics: {e}"))?;
        tracing::info!(%address, "serving /metrics");
        let server = metrics
            .clone()
            .serve_alone(listener, timeouts, shutdown.notice());
        shutdown.start("the metrics listener", server);
    }
    Ok(metrics)
}

/// Starts the delivery engine, the outbox relay, the background-task runner and the purger of
/// expired content (the engine's processes purge, in small batches: see retention); returns
/// the engine, for the API's endpoint views.
fn start_delivery(
    settings: Settings,
    rules: RelayRules,
    store: &Arc<dyn Store>,
    clock: &Arc<dyn Clock>,
    wake: &WakeUps,
    shutdown: &mut Shutdown,
) -> Arc<Engine> {
    let engine = Engine::new(
        store.clone(),
        clock.clone(),
        settings.sender,
        settings.engine,
        wake.engine.clone(),
    );
    let relay = Relay::new(
        store.clone(),
        clock.clone(),
        RelayConfig {
            rules,
            batch: RELAY_BATCH,
            poll_interval: if wake.signalled {
                RELAY_POLL_SIGNALLED
            } else {
                RELAY_POLL_SQLITE
            },
        },
        wake.outbox.clone(),
        wake.new_work.clone(),
    );
    let tasks = TaskRunner::new(
        store.clone(),
        clock.clone(),
        wake.tasks.clone(),
        wake.new_work.clone(),
    );
    shutdown.start("the background tasks", tasks.run(shutdown.notice()));
    let purger = Purger::new(store.clone(), clock.clone(), settings.retention);
    shutdown.start("the engine", engine.clone().run(shutdown.notice()));
    shutdown.start("the relay", relay.run(shutdown.notice()));
    shutdown.start("the purger", purger.run(shutdown.notice()));
    if let Some(mailer) = settings.mailer {
        let notices = Notices::new(store.clone(), clock.clone(), mailer);
        shutdown.start("the e-mail notices", notices.run(shutdown.notice()));
    }
    engine
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

    #[test]
    fn sensitive_header_names_must_be_header_names() {
        let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let rule = credential_headers(&names(&["X-Shop-Pass", " "])).unwrap();
        assert!(rule.covers("x-shop-pass"));
        let error = credential_headers(&names(&["X Shop"]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("--sensitive-header \"X Shop\""), "{error}");
    }
}
