//! `hookd serve`: the server. Opens (and migrates) the database, makes sure an admin token
//! exists, and runs the API, the portal (`/portal`) and the delivery engine until SIGINT or
//! SIGTERM.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use hookd_api::{ApiConfig, ApiState};
use hookd_core::{Clock, SystemClock};
use hookd_engine::Engine;
use hookd_engine::http::WebhookSender;
use hookd_store::Store;
use tokio::sync::{Notify, watch};

use super::database::{Database, runtime};
use super::delivery::DeliveryOptions;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address the API listens on.
    #[arg(long, env = "HOOKD_LISTEN", default_value = "127.0.0.1:8071")]
    listen: SocketAddr,
    #[command(flatten)]
    database: Database,
    #[command(flatten)]
    delivery: DeliveryOptions,
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
    /// Log as JSON lines instead of text.
    #[arg(long, env = "HOOKD_LOG_JSON")]
    log_json: bool,
}

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

fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HOOKD_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let engine_config = args.delivery.engine()?;
    let sender = WebhookSender::new(args.delivery.http())?;
    let store = args.database.open().await?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
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
    };
    if config.configured_admin_token_hashes.is_empty() {
        ensure_admin_token(store.as_ref(), clock.as_ref()).await?;
    }
    let new_work = Arc::new(Notify::new());
    let engine = Engine::new(
        store.clone(),
        clock.clone(),
        sender,
        engine_config,
        new_work.clone(),
    );
    let state = ApiState::new(store, clock, config, new_work);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", args.listen))?;
    let address = listener.local_addr()?;
    tracing::info!(%address, database = %args.database.display(), "hookd is serving");
    println!("hookd listening on http://{address}");
    let (stop, stopped) = watch::channel(false);
    let engine = tokio::spawn(engine.run(until(stopped.clone())));
    let app = hookd_api::router(state).merge(hookd_portal::router());
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown_signal().await;
            let _ = stop.send(true);
        })
        .await?;
    engine.await?;
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
