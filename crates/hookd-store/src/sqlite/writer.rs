//! The SQLite connection discipline: one writer thread with group commit, many readers.
//!
//! SQLite allows one writer at a time. Rather than many connections fighting over the write
//! lock ("database is locked"), every write is a closure sent to a single thread, which runs
//! whatever closures are waiting in one `BEGIN IMMEDIATE` transaction and commits once. A
//! second thread then fsyncs the write-ahead log and only then answers the callers. One fsync
//! thus covers whole batches of API requests, and a caller's `Ok` means its write is on the
//! disk.
//!
//! While the syncer is busy, the closures that arrive wait; once it is free, the writer runs
//! them all in one transaction: one commit per fsync. Each commit writes every page it changed
//! to the log, and the batches of a busy server change the same few pages (the right edges of
//! the indexes), so committing more often than the disk syncs would only write those pages
//! again for no earlier answer. Waiting outside a transaction, the writer holds SQLite's write
//! lock only while it runs a batch, never while the disk syncs: other connections to the file
//! (an application writing the outbox in its own transaction) get their turns.
//!
//! A closure that fails must leave the rest of the batch alone. Savepoints would give that, at
//! the price of copying every page a closure touches (a sixth of the writer's time went to
//! them). Closures fail rarely, so the writer runs a batch without them, and only when one
//! fails rolls the batch back and runs it again with a savepoint per closure. Closures are
//! therefore `Fn`: running one twice must do the same writes.
//!
//! Jobs get the writer's connection as a [`Tx`]: it keeps the statements they run prepared for
//! as long as the thread lives, and what the batch has read of endpoints (`super::reads`).
//!
//! Reads run on a small pool of connections in WAL mode, off the async runtime. A new
//! connection is migrated first (`super::migrate`).

use std::cell::RefCell;
use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

use rusqlite::{Connection, Statement};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, WeakUnboundedSender};
use tokio::sync::oneshot;

use super::migrate::migrate;
use super::reads::{BatchReads, EndpointsWritten, watch_endpoints};
use crate::StoreError;

/// Most closures one transaction takes; bounds the latency a batch adds.
const MAX_BATCH: usize = 256;

/// Prepared statements kept per connection.
const STATEMENT_CACHE: usize = 128;

/// A write the writer thread runs inside the batch transaction, then answers after commit.
trait WriteJob: Send {
    /// Runs the write, keeping its outcome (that of the last run, if run again); `false`
    /// means it failed and its writes must be undone.
    fn run(&mut self, tx: &Tx<'_>) -> bool;
    /// Answers the caller once the batch's fate is known.
    fn finish(self: Box<Self>, commit: Result<(), StoreError>);
}

struct Job<F, R> {
    work: F,
    outcome: Option<Result<R, StoreError>>,
    reply: oneshot::Sender<Result<R, StoreError>>,
}

impl<F, R> WriteJob for Job<F, R>
where
    F: Fn(&Tx<'_>) -> Result<R, StoreError> + Send,
    R: Send,
{
    fn run(&mut self, tx: &Tx<'_>) -> bool {
        let outcome = (self.work)(tx);
        let ok = outcome.is_ok();
        self.outcome = Some(outcome);
        ok
    }

    fn finish(self: Box<Self>, commit: Result<(), StoreError>) {
        let answer = match (self.outcome, commit) {
            (Some(Err(error)), _) => Err(error),
            (Some(Ok(value)), Ok(())) => Ok(value),
            (_, Err(error)) => Err(error),
            (None, Ok(())) => Err(StoreError::Unavailable("the write was not run".into())),
        };
        let _ = self.reply.send(answer);
    }
}

/// What the writer thread is told.
enum ToWriter {
    /// A caller's write.
    Job(Box<dyn WriteJob>),
    /// The syncer has answered the last batch committed and is free.
    Synced,
}

/// Handle to one SQLite database file: the writer thread and the reader pool.
#[derive(Clone)]
pub struct Db {
    writer: UnboundedSender<ToWriter>,
    readers: Arc<Mutex<Vec<Connection>>>,
    path: Arc<Path>,
}

impl Db {
    /// Opens (creating if needed) the database at `path`, migrates it and starts the writer.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Config(format!("cannot create {}: {e}", dir.display())))?;
        }
        let conn = connect(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        migrate(&conn)?;
        // The writer commits without waiting for the disk; the syncer makes each committed
        // batch durable (fsync of the WAL) before its callers hear `Ok`. See `sync_loop`.
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Each job of a batch runs in a savepoint, whose journal (the pages a job changes,
        // as they were) SQLite spills to a temporary file past 64 KiB: in a batch of hundreds
        // of jobs, writing and rewriting that file cost more than the jobs' own writes.
        conn.pragma_update(None, "temp_store", "MEMORY")?;
        let endpoints_written = watch_endpoints(&conn)?;
        let (writer, inbox) = tokio::sync::mpsc::unbounded_channel();
        let (to_syncer, committed) = mpsc::channel();
        let wal = wal_path(path);
        // Weak: the writer stops once every `Db` is gone, whatever the syncer holds.
        let synced = writer.downgrade();
        spawn("hookd-sqlite-syncer", move || {
            sync_loop(&wal, committed, &synced)
        })?;
        spawn("hookd-sqlite-writer", move || {
            write_loop(&Tx::new(&conn, endpoints_written), inbox, &to_syncer)
        })?;
        Ok(Self {
            writer,
            readers: Arc::default(),
            path: path.into(),
        })
    }

    /// Runs `work` in the next group-committed write transaction. `work` may run more than
    /// once (see the module's documentation); only its last run's writes and answer count.
    pub async fn write<F, R>(&self, work: F) -> Result<R, StoreError>
    where
        F: Fn(&Tx<'_>) -> Result<R, StoreError> + Send + 'static,
        R: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Box::new(Job {
            work,
            outcome: None,
            reply,
        });
        self.writer
            .send(ToWriter::Job(job))
            .map_err(|_| StoreError::Unavailable("the SQLite writer has stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Unavailable("the SQLite writer has stopped".into()))?
    }

    /// Runs `work` on a reader connection, off the async runtime.
    pub async fn read<F, R>(&self, work: F) -> Result<R, StoreError>
    where
        F: FnOnce(&Connection) -> Result<R, StoreError> + Send + 'static,
        R: Send + 'static,
    {
        let db = self.clone();
        tokio::task::spawn_blocking(move || {
            let pooled = db.readers.lock().expect("reader pool poisoned").pop();
            let conn = match pooled {
                Some(conn) => conn,
                None => connect(&db.path)?,
            };
            let result = work(&conn);
            db.readers.lock().expect("reader pool poisoned").push(conn);
            result
        })
        .await
        .map_err(|e| StoreError::Unavailable(format!("reader task failed: {e}")))?
    }
}

pub(super) fn connect(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)?;
    // FULL: a committed batch survives power loss, not only a process crash.
    conn.execute_batch(
        "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON; PRAGMA busy_timeout = 5000;",
    )?;
    // The writer's hot path alone (publish, claim, record, batch control) uses about 20
    // statements; rusqlite's default cache of 16 would re-parse some of them on every batch.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> Result<(), StoreError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(body)
        .map(drop)
        .map_err(|e| StoreError::Config(format!("cannot start {name}: {e}")))
}

/// The write-ahead log beside the database file.
fn wal_path(path: &Path) -> PathBuf {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    PathBuf::from(wal)
}

/// A batch whose transaction has committed (or failed), waiting to be answered.
type Committed = (Vec<Box<dyn WriteJob>>, Result<(), String>);

fn write_loop(
    tx: &Tx<'_>,
    mut inbox: UnboundedReceiver<ToWriter>,
    syncer: &mpsc::Sender<Committed>,
) {
    let mut waiting: Vec<Box<dyn WriteJob>> = Vec::new();
    let mut syncing = false;
    while let Some(first) = inbox.blocking_recv() {
        let mut next = Some(first);
        while let Some(message) = next.take().or_else(|| inbox.try_recv().ok()) {
            match message {
                ToWriter::Synced => syncing = false,
                ToWriter::Job(job) => waiting.push(job),
            }
            if waiting.len() >= MAX_BATCH {
                break;
            }
        }
        if !waiting.is_empty() && (!syncing || waiting.len() >= MAX_BATCH) {
            if syncer
                .send(commit_batch(tx, std::mem::take(&mut waiting)))
                .is_err()
            {
                return;
            }
            syncing = true;
        }
    }
    // Every `Db` is gone: write what waits, so no caller waits in vain.
    if !waiting.is_empty() {
        let _ = syncer.send(commit_batch(tx, waiting));
    }
}

/// Runs and commits `batch` in one transaction, to be answered once synced.
fn commit_batch(tx: &Tx<'_>, mut batch: Vec<Box<dyn WriteJob>>) -> Committed {
    let outcome = run_batch(tx, &mut batch).map_err(|e| e.to_string());
    (batch, outcome)
}

/// Makes committed batches durable, then answers their callers and tells the writer it may
/// commit again.
///
/// The writer commits with `synchronous = NORMAL`: the batch's pages are in the WAL file (so a
/// crash of hookd loses nothing) but perhaps not yet on the disk. This thread fsyncs the WAL
/// and only then answers, which gives each `Ok` the guarantee of `synchronous = FULL`
/// (surviving power loss); the jobs that arrive meanwhile wait for its `Synced`.
fn sync_loop(
    wal: &Path,
    committed: mpsc::Receiver<Committed>,
    writer: &WeakUnboundedSender<ToWriter>,
) {
    let mut file: Option<File> = None;
    while let Ok(first) = committed.recv() {
        let mut batches = vec![first];
        batches.extend(committed.try_iter());
        let synced = sync(wal, &mut file);
        if let Some(writer) = writer.upgrade() {
            let _ = writer.send(ToWriter::Synced);
        }
        for (batch, commit) in batches {
            let outcome = commit.and_then(|()| synced.clone());
            for job in batch {
                job.finish(outcome.clone().map_err(StoreError::Unavailable));
            }
        }
    }
}

fn sync(wal: &Path, file: &mut Option<File>) -> Result<(), String> {
    if file.is_none() {
        *file = Some(File::open(wal).map_err(|e| format!("cannot open {}: {e}", wal.display()))?);
    }
    let handle = file.as_ref().expect("opened above");
    handle.sync_data().map_err(|e| {
        *file = None;
        format!("cannot sync {}: {e}", wal.display())
    })
}

/// Runs and commits a batch: first without savepoints, and if a job fails, once more with one
/// savepoint per job, so that only the failed jobs' writes are undone.
fn run_batch(tx: &Tx<'_>, batch: &mut [Box<dyn WriteJob>]) -> Result<(), rusqlite::Error> {
    // What an earlier batch read may have changed since (its transaction is over).
    tx.reads.forget();
    run(tx, "BEGIN IMMEDIATE")?;
    if batch.iter_mut().all(|job| job.run(tx)) {
        return commit(tx);
    }
    // A job failed partway, perhaps after some writes: undo them all, and those of the jobs
    // before it, then isolate each job. Reads made meanwhile may have seen the undone writes.
    let _ = tx.execute_batch("ROLLBACK");
    tx.reads.forget();
    run(tx, "BEGIN IMMEDIATE")?;
    for job in batch.iter_mut() {
        run(tx, "SAVEPOINT job")?;
        let ok = job.run(tx);
        let end = if ok {
            run(tx, "RELEASE job")
        } else {
            tx.reads.forget();
            run(tx, "ROLLBACK TO job").and_then(|()| run(tx, "RELEASE job"))
        };
        if let Err(error) = end {
            let _ = tx.execute_batch("ROLLBACK");
            return Err(error);
        }
    }
    commit(tx)
}

fn commit(tx: &Tx<'_>) -> Result<(), rusqlite::Error> {
    run(tx, "COMMIT").inspect_err(|_| {
        let _ = tx.execute_batch("ROLLBACK");
    })
}

/// Runs one transaction-control statement, kept prepared: these run several times per batch
/// (a savepoint per job), and need parsing only once.
fn run(tx: &Tx<'_>, sql: &'static str) -> Result<(), rusqlite::Error> {
    tx.kept(sql, |statement| statement.execute([]).map(drop))
}

/// The writer's connection as a job sees it (it derefs to the [`Connection`]), with the
/// statements the writer keeps prepared and what the batch has read of endpoints.
pub(super) struct Tx<'c> {
    conn: &'c Connection,
    /// Statements by the address of their text. A handful of addresses, compared as numbers:
    /// rusqlite's own cache hashes the whole text and moves the statement in and out of an LRU
    /// list on every use, which cost more than some of the statements themselves.
    kept: RefCell<Vec<(*const u8, Statement<'c>)>>,
    pub(super) reads: BatchReads,
}

impl<'c> Tx<'c> {
    /// `endpoints_written` must watch `conn` (see [`watch_endpoints`]).
    pub(super) fn new(conn: &'c Connection, endpoints_written: EndpointsWritten) -> Self {
        Self {
            conn,
            kept: RefCell::default(),
            reads: BatchReads::new(endpoints_written),
        }
    }

    /// The writer's view of `conn` in tests of the SQL itself.
    #[cfg(test)]
    pub(super) fn watching(conn: &'c Connection) -> Self {
        Self::new(
            conn,
            watch_endpoints(conn).expect("the test owns its connection"),
        )
    }

    /// Runs `work` with the statement for `sql`, prepared on its first use and kept after.
    /// `sql` is `'static`, so the statements kept are as many as the texts in the program.
    pub(super) fn kept<R, E: From<rusqlite::Error>>(
        &self,
        sql: &'static str,
        work: impl FnOnce(&mut Statement<'c>) -> Result<R, E>,
    ) -> Result<R, E> {
        let key = sql.as_ptr();
        let found = {
            let mut kept = self.kept.borrow_mut();
            let at = kept.iter().position(|(k, _)| *k == key);
            at.map(|at| kept.swap_remove(at).1)
        };
        // Taken out while in use: a statement used again inside `work` (an operational event
        // published while recording) gets one of its own.
        let mut statement = match found {
            Some(statement) => statement,
            None => self.conn.prepare(sql)?,
        };
        let outcome = work(&mut statement);
        let mut kept = self.kept.borrow_mut();
        if !kept.iter().any(|(k, _)| *k == key) {
            kept.push((key, statement));
        }
        outcome
    }
}

impl Deref for Tx<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

/// For tests of the SQL itself: an application `app_1` with an endpoint `ep_1` and two
/// messages, `msg_1` and `msg_2`.
#[cfg(test)]
pub(super) const TWO_MESSAGES_TO_ONE_ENDPOINT: &str = "
    INSERT INTO applications (id, name, metadata, created_at, updated_at)
        VALUES ('app_1', 'a', '{}', 0, 0);
    INSERT INTO endpoints (id, app_id, url, description, disabled, metadata, headers, secret,
        created_at, updated_at)
        VALUES ('ep_1', 'app_1', 'http://localhost/', '', 0, '{}', '{}', 's', 0, 0);
    INSERT INTO messages (id, app_id, event_type, created_at)
        VALUES ('msg_1', 'app_1', 't', 0), ('msg_2', 'app_1', 't', 0);";

/// A migrated connection to a new database at `path`, for tests of the SQL itself.
#[cfg(test)]
pub(super) fn migrated(path: &Path) -> Connection {
    let conn = connect(path).expect("test database opens");
    migrate(&conn).expect("test database migrates");
    conn
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A job that inserts `value` into `t`, then fails if `fail`.
    fn insert(
        value: i64,
        fail: bool,
    ) -> (Box<dyn WriteJob>, oneshot::Receiver<Result<(), StoreError>>) {
        let (reply, answer) = oneshot::channel();
        let work = move |conn: &Tx<'_>| {
            conn.execute("INSERT INTO t (x) VALUES (?1)", [value])?;
            match fail {
                true => Err(StoreError::NotFound("value")),
                false => Ok(()),
            }
        };
        let job = Job {
            work,
            outcome: None,
            reply,
        };
        (Box::new(job), answer)
    }

    /// A migrated database with a table `t (x)` for [`insert`] jobs.
    fn with_table_t(dir: &tempfile::TempDir) -> Connection {
        let conn = migrated(&dir.path().join("hookd.db"));
        conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        conn
    }

    #[test]
    fn a_job_failing_after_its_writes_loses_them_and_nothing_else_of_its_batch() {
        let dir = tempfile::tempdir().unwrap();
        let conn = with_table_t(&dir);
        let (jobs, answers): (Vec<_>, Vec<_>) = [(1, false), (2, true), (3, false)]
            .map(|(v, fail)| insert(v, fail))
            .into_iter()
            .unzip();
        let mut batch = jobs;
        run_batch(&Tx::watching(&conn), &mut batch).unwrap();
        for job in batch {
            job.finish(Ok(()));
        }
        let answered: Vec<bool> = answers
            .into_iter()
            .map(|mut answer| answer.try_recv().unwrap().is_ok())
            .collect();
        assert_eq!(answered, [true, false, true]);
        let kept: Vec<i64> = conn
            .prepare("SELECT x FROM t ORDER BY x")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(kept, [1, 3]);
    }

    #[test]
    fn writes_arriving_while_the_syncer_is_busy_wait_for_it_outside_a_transaction_and_commit_together()
     {
        let dir = tempfile::tempdir().unwrap();
        let conn = with_table_t(&dir);
        let (inbox, jobs) = tokio::sync::mpsc::unbounded_channel();
        let (to_syncer, committed) = mpsc::channel();
        let writer = std::thread::spawn(move || write_loop(&Tx::watching(&conn), jobs, &to_syncer));
        let send = |value| inbox.send(ToWriter::Job(insert(value, false).0)).is_ok();
        let size = |batch: Committed| batch.0.len();

        assert!(send(1));
        // The syncer is free: the first write is committed at once.
        let first = committed.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(size(first), 1);
        // The syncer is now busy with it: later writes wait for it.
        assert!(send(2) && send(3));
        assert!(
            committed.recv_timeout(Duration::from_millis(200)).is_err(),
            "a batch was committed while the syncer was busy"
        );
        // Meanwhile the file's write lock is free for other connections (outbox producers).
        let producer = Connection::open(dir.path().join("hookd.db")).unwrap();
        producer
            .execute_batch("PRAGMA busy_timeout = 0; BEGIN IMMEDIATE; ROLLBACK;")
            .expect("the writer holds no transaction open while the syncer works");
        assert!(inbox.send(ToWriter::Synced).is_ok());
        let second = committed.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(size(second), 2);

        drop(inbox);
        writer.join().unwrap();
    }
}
