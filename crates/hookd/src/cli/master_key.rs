//! The master key: where `serve` (and the commands that touch endpoint keys) get it, production
//! mode's refusal to run without one, re-sealing endpoint keys (and the credential headers
//! sealed with them) under the current key, and `hookd master-key generate|rotate`.
//!
//! Endpoint signing keys are stored sealed under the master key (see `hookd-vault`); the master
//! key itself never goes into the database. Outside production mode a missing key file is
//! created in the data directory on first start, and its place printed, as the first admin
//! token is.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use hookd_core::model::SealedKeys;
use hookd_core::{Clock, EndpointId, SystemClock};
use hookd_store::{SealedRow, Store};
use hookd_vault::{CredentialHeaders, EndpointKeys, Keyring, SEALED_PREFIX, VaultError};

use super::database::{Database, runtime};

/// Where the master keys come from.
#[derive(Debug, clap::Args)]
pub struct MasterKeyOptions {
    /// File of master keys (base64, one per line, the current one first) that seal endpoint
    /// secrets at rest [default: DATA_DIR/master.key, created on first start outside
    /// --production].
    #[arg(long, env = "HOOKD_MASTER_KEY_FILE")]
    master_key_file: Option<PathBuf>,
    /// The master keys themselves (base64, comma-separated, the current one first) instead of a
    /// file.
    #[arg(
        long,
        env = "HOOKD_MASTER_KEY",
        hide_env_values = true,
        value_delimiter = ','
    )]
    master_key: Vec<String>,
    /// Production mode: refuse to start without a configured master key (--master-key-file or
    /// HOOKD_MASTER_KEY) rather than creating one beside the data.
    #[arg(long, env = "HOOKD_PRODUCTION")]
    production: bool,
}

/// Where the keyring came from.
pub enum KeySource {
    Environment,
    File(PathBuf),
}

impl MasterKeyOptions {
    /// The keyring, from the environment or the key file; outside production mode the default
    /// key file is created (and announced) when missing.
    pub fn load(&self, database: &Database) -> anyhow::Result<(Keyring, KeySource)> {
        // An empty HOOKD_MASTER_KEY (say, left blank in a compose file) is no key.
        if self.master_key.iter().any(|k| !k.trim().is_empty()) {
            let keyring = Keyring::parse(&self.master_key.join("\n"))
                .map_err(|e| anyhow::anyhow!("HOOKD_MASTER_KEY / --master-key: {e}"))?;
            return Ok((keyring, KeySource::Environment));
        }
        if self.production && self.master_key_file.is_none() {
            anyhow::bail!(
                "refusing to start in production mode without a master key: endpoint secrets \
                 are encrypted at rest with it, and a key made up here would sit beside the \
                 data it protects. Make one with `hookd master-key generate > master.key`, keep \
                 it apart from the database (and backed up), and pass --master-key-file \
                 master.key (or its contents in HOOKD_MASTER_KEY)."
            );
        }
        let path = self.key_file(database);
        if !path.exists() {
            if self.production || self.master_key_file.is_some() {
                anyhow::bail!("the master key file {} does not exist", path.display());
            }
            let keyring = Keyring::ephemeral();
            write_key_file(&path, &keyring)?;
            println!(
                "Created a master key in {} (endpoint secrets are encrypted with it; keep it \
                 and back it up, apart from the database)",
                path.display()
            );
            return Ok((keyring, KeySource::File(path)));
        }
        Ok((read_key_file(&path)?, KeySource::File(path)))
    }

    fn key_file(&self, database: &Database) -> PathBuf {
        self.master_key_file
            .clone()
            .unwrap_or_else(|| database.data_dir().join("master.key"))
    }
}

fn read_key_file(path: &Path) -> anyhow::Result<Keyring> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read the master key file {}: {e}", path.display()))?;
    Keyring::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Writes the key file readable by its owner only, replacing any old one atomically.
fn write_key_file(path: &Path, keyring: &Keyring) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let staged = path.with_extension("key.new");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(&staged)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", staged.display()))?;
    file.write_all(keyring.to_file_text().as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&staged, path)
        .map_err(|e| anyhow::anyhow!("cannot replace {}: {e}", path.display()))?;
    Ok(())
}

/// What re-sealing did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Resealed {
    /// Rows sealed under an older master key, now under the current one.
    pub rekeyed: usize,
    /// Rows from before encryption at rest (a plain `whsec_` secret), now sealed.
    pub sealed_legacy: usize,
    /// Rows whose credential headers were kept in clear (written before hookd sealed them, or
    /// named by a `--sensitive-header` added since), now sealed with their keys.
    pub sealed_headers: usize,
    /// Ingest sources (their provider secrets and tokens) sealed under an older master key,
    /// now under the current one.
    pub sources: usize,
}

/// Rows read per batch while re-sealing.
const BATCH: usize = 500;

/// Seals every endpoint's keys under the keyring's current key: rows sealed under an older key
/// it holds, and plaintext secrets written before encryption at rest (and every ingest
/// source's configuration, see `sealed_sources`); and moves the headers
/// `credentials` covers that a row keeps in clear into its sealed keys. Fails, changing
/// nothing further, on a row sealed under a key it does not hold (this hookd was given the
/// wrong key file), saying which key that is.
pub async fn reseal(
    store: &dyn Store,
    keyring: &Keyring,
    credentials: &CredentialHeaders,
) -> anyhow::Result<Resealed> {
    let mut done = Resealed::default();
    let mut after: Option<EndpointId> = None;
    loop {
        let rows = store.list_sealed_keys(after.as_ref(), BATCH).await?;
        for row in &rows {
            reseal_row(store, keyring, credentials, row, &mut done).await?;
        }
        match rows.last() {
            Some(row) if rows.len() == BATCH => after = Some(row.id.clone()),
            _ => break,
        }
    }
    done.sources = super::sealed_sources::reseal(store, keyring).await?;
    Ok(done)
}

/// Re-seals one row if its keys are not sealed under the current key or it keeps credential
/// headers in clear, counting what it did in `done`.
async fn reseal_row(
    store: &dyn Store,
    keyring: &Keyring,
    credentials: &CredentialHeaders,
    row: &SealedRow,
    done: &mut Resealed,
) -> anyhow::Result<()> {
    let (clear, moved) = credentials.split(row.headers.clone());
    let stale = !keyring.is_current(row.keys.as_str());
    if !stale && moved.is_empty() {
        return Ok(());
    }
    let id = &row.id;
    let legacy = !row.keys.as_str().starts_with(SEALED_PREFIX);
    let mut keys = open_or_migrate(keyring, id, &row.keys).map_err(|e| {
        anyhow::anyhow!(
            "the keys of endpoint {id} cannot be opened: {e}. hookd holds master key(s) {}",
            keyring.ids().join(", ")
        )
    })?;
    let mut sealed_headers = keys.headers().clone();
    sealed_headers.extend(moved.clone());
    keys.set_headers(sealed_headers);
    let new = SealedRow {
        id: id.clone(),
        keys: keys.seal(keyring, id),
        headers: clear,
    };
    // A row changed meanwhile was sealed by a writer with the current key: nothing to do.
    if !store
        .replace_sealed_row(&row.keys, &new, SystemClock.now())
        .await?
    {
        return Ok(());
    }
    if !moved.is_empty() {
        done.sealed_headers += 1;
    }
    if legacy {
        done.sealed_legacy += 1;
    } else if stale {
        done.rekeyed += 1;
    }
    Ok(())
}

fn open_or_migrate(
    keyring: &Keyring,
    id: &EndpointId,
    sealed: &SealedKeys,
) -> Result<EndpointKeys, VaultError> {
    if sealed.as_str().starts_with(SEALED_PREFIX) {
        EndpointKeys::open(keyring, id, sealed)
    } else {
        EndpointKeys::from_legacy_secret(sealed.as_str())
    }
}

/// `hookd master-key`: make a key, or rotate the master key.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Print a new master key (base64 of 32 random bytes), for a key file or HOOKD_MASTER_KEY.
    Generate,
    /// Put a new master key in front of the key file and re-seal every endpoint's keys under
    /// it. The old keys stay in the file (processes still running with the old file cannot
    /// open what is re-sealed: restart them with the new file) unless --drop-old.
    Rotate(RotateArgs),
}

#[derive(Debug, clap::Args)]
struct RotateArgs {
    #[command(flatten)]
    database: Database,
    #[command(flatten)]
    keys: MasterKeyOptions,
    /// Remove the old keys from the file once everything is sealed under the new one. Only
    /// when no hookd process still runs with the old file (it would seal new endpoints under
    /// the old key).
    #[arg(long)]
    drop_old: bool,
}

pub fn run(args: Args) -> ExitCode {
    match args.command {
        Command::Generate => {
            println!("{}", hookd_vault::MasterKey::generate().to_base64());
            ExitCode::SUCCESS
        }
        Command::Rotate(args) => match runtime().block_on(rotate(args)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                super::print_error(format_args!("{error:#}"));
                ExitCode::FAILURE
            }
        },
    }
}

async fn rotate(args: RotateArgs) -> anyhow::Result<()> {
    let (old, source) = args.keys.load(&args.database)?;
    let KeySource::File(path) = source else {
        anyhow::bail!(
            "the master keys come from HOOKD_MASTER_KEY: put `hookd master-key generate`'s key \
             in front of them there and restart hookd, which re-seals everything at start"
        );
    };
    let store = args.database.open().await?;
    // Everything must open under the old keys before the file changes. Credential headers
    // still in clear are sealed by the built-in rule here; `serve` adds the operator's names.
    let credentials = CredentialHeaders::default();
    reseal(store.as_ref(), &old, &credentials).await?;
    let new = old.rotated();
    // The file first: a crash after this leaves every row readable with the new file.
    write_key_file(&path, &new)?;
    let done = reseal(store.as_ref(), &new, &credentials).await?;
    println!(
        "master key {} is current in {}; {} endpoint(s) re-sealed under it, and {} ingest \
         source(s)",
        new.current_id(),
        path.display(),
        done.rekeyed + done.sealed_legacy,
        done.sources
    );
    if args.drop_old {
        write_key_file(&path, &new.current_only())?;
        println!("old master key(s) {} removed", old.ids().join(", "));
    }
    Ok(())
}
