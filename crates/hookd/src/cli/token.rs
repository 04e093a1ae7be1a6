//! `hookd token create|list|revoke`: API tokens managed on the database directly, for the
//! operator at the server (the same operations as `/api/v1/auth/token`, without a token to
//! start from). Running servers see a revocation within the token cache's 30 seconds.

use std::process::ExitCode;

use hookd_api::{NewToken, issue_token};
use hookd_core::{Clock, SystemClock, Timestamp, parse_duration};
use hookd_store::{Cursor, PageRequest, Store};

use super::database::{Database, runtime};

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Create a token and print it (shown once; only its hash is stored).
    Create(CreateArgs),
    /// List tokens (never their text): id, scope, name, expiry, revocation.
    List(DatabaseArgs),
    /// Revoke a token by id; it stays listed as revoked.
    Revoke(RevokeArgs),
}

#[derive(Debug, clap::Args)]
struct DatabaseArgs {
    #[command(flatten)]
    database: Database,
}

#[derive(Debug, clap::Args)]
struct CreateArgs {
    #[command(flatten)]
    database: Database,
    /// Limit the token to this application (id or uid): a customer's token, which reads it and
    /// manages its endpoints but cannot publish (docs/permissions.md); an admin token without it.
    #[arg(long)]
    app: Option<String>,
    /// What the token is for.
    #[arg(long, default_value = "")]
    name: String,
    /// The token stops working after this long (e.g. 30d, 12h).
    #[arg(long)]
    expires_in: Option<String>,
    /// Requests per second this token may make.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    rate_limit: Option<u32>,
    /// The token may only read.
    #[arg(long)]
    read_only: bool,
}

#[derive(Debug, clap::Args)]
struct RevokeArgs {
    #[command(flatten)]
    database: Database,
    /// The token's id (`tok_…`, as `hookd token list` shows it).
    id: String,
}

pub fn run(args: Args) -> ExitCode {
    let outcome = runtime().block_on(async {
        match args.command {
            Command::Create(args) => create(args).await,
            Command::List(args) => list(args.database.open().await?.as_ref()).await,
            Command::Revoke(args) => {
                let store = args.database.open().await?;
                store.revoke_token(&args.id, SystemClock.now()).await?;
                println!("revoked {}", args.id);
                Ok(())
            }
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            super::print_error(format_args!("{error:#}"));
            ExitCode::FAILURE
        }
    }
}

async fn create(args: CreateArgs) -> anyhow::Result<()> {
    let now = SystemClock.now();
    let expires_at = args
        .expires_in
        .as_deref()
        .map(|text| {
            parse_duration(text)
                .map(|d| now.plus(d))
                .map_err(|e| anyhow::anyhow!("--expires-in: {e}"))
        })
        .transpose()?;
    let store = args.database.open().await?;
    let app_id = match &args.app {
        Some(app) => Some(
            store
                .get_app(app)
                .await?
                .ok_or_else(|| anyhow::anyhow!("no application {app:?}"))?
                .id,
        ),
        None => None,
    };
    let new = NewToken {
        app_id,
        name: args.name,
        expires_at,
        rate_limit: args.rate_limit,
        read_only: args.read_only,
        endpoint_id: None,
    };
    let (text, token) = issue_token(store.as_ref(), now, new).await?;
    println!("{text}");
    eprintln!("created {} (shown once; only its hash is stored)", token.id);
    Ok(())
}

async fn list(store: &dyn Store) -> anyhow::Result<()> {
    let mut cursor = None;
    println!("ID\tSCOPE\tNAME\tEXPIRES\tREVOKED");
    loop {
        let page = store
            .list_tokens(&PageRequest { limit: 250, cursor })
            .await?;
        for token in &page.items {
            let time = |t: Option<Timestamp>| t.map_or_else(|| "-".into(), Timestamp::to_rfc3339);
            let scope = token.app_id.as_ref().map_or("admin", |a| a.as_str());
            println!(
                "{}\t{scope}{}\t{}\t{}\t{}",
                token.id,
                if token.read_only { " (read-only)" } else { "" },
                token.name,
                time(token.expires_at),
                time(token.revoked_at),
            );
        }
        match page.items.last() {
            Some(last) if page.has_more => cursor = Some(Cursor::After(last.id.clone())),
            _ => return Ok(()),
        }
    }
}
