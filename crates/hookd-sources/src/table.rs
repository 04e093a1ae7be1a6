//! [`Table`]: an installed outbox table in a producer's database, as the relay uses it.
//!
//! A pass takes the oldest waiting rows (`failed_at IS NULL`), hands them to hookd's store and
//! then settles them: removes those now published, keeps an error on those refused. On
//! PostgreSQL and MySQL the rows stay locked (`FOR UPDATE SKIP LOCKED`, read committed: row
//! locks only, never a gap lock an insert would wait on) from take to settle, so several
//! relays never take one row at once; the producer's inserts never wait for them. On SQLite
//! nothing is held between the two: a write lock there would stop the producer, and a row
//! two relays both took is still published once (see `hookd-store`'s `outbox_relayed`).
//!
//! Rows with an ordering key are taken only by the relay holding the lock on the contract
//! row, one at a time across processes, so a key's rows are published in table order.

use std::sync::Arc;

use hookd_store::{OutboxRow, RowFate};
use tokio::sync::Notify;

pub use crate::pass::{Backlog, Hold, Taken};
use crate::pass::{HoldInner, Outcome};
use crate::source::Kind;
use crate::{SourceError, mysql, postgres, sqlite};

/// An outbox table in a producer's database. Connects lazily: a source that is down when
/// hookd starts delays only its own rows.
pub struct Table {
    inner: Inner,
}

enum Inner {
    Postgres(postgres::Source),
    MySql(mysql::Source),
    Sqlite(sqlite::Source),
}

impl Table {
    /// The table at `url`; nothing is connected until it is used.
    pub fn new(url: &str) -> Result<Self, SourceError> {
        let inner = match Kind::of(url)? {
            Kind::Postgres => Inner::Postgres(postgres::Source::new(url)?),
            Kind::MySql => Inner::MySql(mysql::Source::new(url)?),
            Kind::Sqlite => Inner::Sqlite(sqlite::Source::new(url)?),
        };
        Ok(Self { inner })
    }

    /// Takes up to `limit` waiting rows, oldest first; `None` when none waits. `app` is the
    /// application the source is bound to, if any (see [`bind`]).
    pub async fn take(
        &self,
        limit: usize,
        app: Option<&str>,
    ) -> Result<Option<Taken>, SourceError> {
        let taken = match &self.inner {
            Inner::Postgres(source) => source.take(limit).await?,
            Inner::MySql(source) => source.take(limit).await?,
            Inner::Sqlite(source) => source.take(limit).await?,
        };
        Ok(taken.map(|mut taken| {
            for row in &mut taken.rows {
                bind(row, app);
            }
            taken
        }))
    }

    /// Removes the rows whose fate is published and keeps each refused row's reason on it;
    /// `ids` and `fates` are in the order the rows were taken.
    pub async fn settle(
        &self,
        hold: Hold,
        ids: &[i64],
        fates: &[RowFate],
    ) -> Result<(), SourceError> {
        let outcome = Outcome::of(ids, fates);
        match (&self.inner, hold.0) {
            (Inner::Postgres(_), HoldInner::Postgres(tx)) => postgres::settle(tx, &outcome).await,
            (Inner::MySql(_), HoldInner::MySql(tx)) => mysql::settle(tx, &outcome).await,
            (Inner::Sqlite(source), HoldInner::Nothing) => source.settle(outcome).await,
            _ => unreachable!("a hold is settled on the table that took it"),
        }
    }

    /// How many rows wait, and the oldest's age.
    pub async fn backlog(&self) -> Result<Backlog, SourceError> {
        match &self.inner {
            Inner::Postgres(source) => source.backlog().await,
            Inner::MySql(source) => source.backlog().await,
            Inner::Sqlite(source) => source.backlog().await,
        }
    }

    /// Starts notifying `wake` whenever the producer commits rows, if the database can say so
    /// (PostgreSQL: LISTEN, kept up across outages); returns whether it can. Others are polled.
    pub fn watch(&self, wake: Arc<Notify>) -> bool {
        match &self.inner {
            Inner::Postgres(source) => {
                source.watch(wake);
                true
            }
            Inner::MySql(_) | Inner::Sqlite(_) => false,
        }
    }
}

/// Applies a source's binding to a row: a row without `app` goes to the bound application; a
/// row naming another is refused (kept with the reason), as is a row without one when the
/// source is bound to none.
fn bind(row: &mut OutboxRow, app: Option<&str>) {
    match app {
        Some(app) if row.app.is_empty() => row.app = app.to_owned(),
        Some(app) if row.app != app => {
            row.problem.get_or_insert_with(|| {
                format!("app: this source publishes to application {app:?} only; leave `app` NULL")
            });
        }
        Some(_) => {}
        None if row.app.is_empty() => {
            row.problem.get_or_insert_with(|| {
                "app: is required (this source is bound to no application)".to_owned()
            });
        }
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(app: &str) -> OutboxRow {
        OutboxRow::from_columns(1, app.into(), "a.b".into(), "{}".into(), None, None, None)
    }

    #[test]
    fn a_bound_source_fills_in_its_application_and_refuses_another() {
        let mut unnamed = row("");
        bind(&mut unnamed, Some("acme"));
        assert_eq!((unnamed.app.as_str(), unnamed.problem), ("acme", None));
        let mut same = row("acme");
        bind(&mut same, Some("acme"));
        assert_eq!(same.problem, None);
        let mut other = row("globex");
        bind(&mut other, Some("acme"));
        assert!(other.problem.unwrap().contains("\"acme\" only"));
    }

    #[test]
    fn an_unbound_source_needs_each_row_to_name_its_application() {
        let mut named = row("acme");
        bind(&mut named, None);
        assert_eq!(named.problem, None);
        let mut unnamed = row("");
        bind(&mut unnamed, None);
        assert!(unnamed.problem.unwrap().starts_with("app: is required"));
    }
}
