//! [`OutboxStore`] on PostgreSQL: the outbox relayed by any number of hookd processes, and
//! LISTEN/NOTIFY between them.
//!
//! A relay pass locks its rows with `FOR UPDATE SKIP LOCKED` and, in the same transaction,
//! writes their messages and deletes them: another relay skips rows held, and after the
//! commit they are gone. Uncommitted rows are invisible and rolled-back rows never existed.
//! A refused row rolls back to its own savepoint and keeps its error; the pass goes on.
//!
//! Rows with an ordering key are relayed by one pass at a time across the processes (the one
//! holding [`ORDERED_ROWS_LOCK`]; the others take only rows without a key), so a key's rows
//! become messages in the order they were committed, never two passes' rows interleaved.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use hookd_core::model::Message;
use hookd_core::{AppId, MessageId, Timestamp};
use sqlx::postgres::{PgConnection, PgListener, PgPoolOptions};
use sqlx::{Connection as _, Postgres, Transaction};
use tokio::sync::Notify;

use super::PgStore;
use super::publish::insert_message;
use super::rows::{fetch_one, run};
use crate::outbox::{
    DELIVERIES_CHANNEL, OUTBOX_CHANNEL, OutboxColumns, OutboxRow, strict_event_type, unknown_app,
};
use crate::sql::outbox as sql;
use crate::{OutboxStore, RelayRules, Relayed, Route, RowFate, StoreError, Wakeups};

/// The advisory lock held (for its transaction) by the relay pass that may take rows with an
/// ordering key.
pub const ORDERED_ROWS_LOCK: i64 = 0x686f_6f6b_6f72_6473;

/// How long the listener waits before reconnecting after an error.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

#[async_trait]
impl OutboxStore for PgStore {
    async fn relay_outbox(
        &self,
        limit: usize,
        rules: &RelayRules,
        now: Timestamp,
    ) -> Result<Relayed, StoreError> {
        let mut tx = self.pool.begin().await?;
        let ordered: bool = sqlx::query_scalar("SELECT pg_try_advisory_xact_lock($1)")
            .bind(ORDERED_ROWS_LOCK)
            .fetch_one(&mut *tx)
            .await?;
        let rows = waiting(&mut tx, limit, ordered).await?;
        lock_ordering(&mut tx, &rows).await?;
        let mut apps = HashMap::new();
        let mut relayed = Relayed::default();
        let (mut done, mut failed_ids, mut failures) = (Vec::new(), Vec::new(), Vec::new());
        let ids = MessageId::run(now, rows.len());
        for (row, id) in rows.into_iter().zip(ids) {
            let fate = relay_row(&mut tx, &row, id, None, rules, now, &mut apps).await?;
            relayed.count(&fate);
            if let RowFate::Refused(why) = &fate {
                failed_ids.push(row.id);
                failures.push(why.clone());
            } else {
                done.push(row.id);
            }
        }
        sqlx::query("DELETE FROM outbox WHERE id = ANY($1)")
            .bind(&done)
            .execute(&mut *tx)
            .await?;
        if !failures.is_empty() {
            sqlx::query(
                "UPDATE outbox o SET error = f.error, failed_at = to_timestamp($3::float8 / 1000)
                 FROM UNNEST($1::bigint[], $2::text[]) AS f(id, error) WHERE o.id = f.id",
            )
            .bind(&failed_ids)
            .bind(&failures)
            .bind(now.as_millis() as f64)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(relayed)
    }

    async fn relay_source_rows(
        &self,
        source: &str,
        rows: Vec<OutboxRow>,
        rules: &RelayRules,
        now: Timestamp,
    ) -> Result<Vec<RowFate>, StoreError> {
        let mut tx = self.pool.begin().await?;
        lock_ordering(&mut tx, &rows).await?;
        let mut apps = HashMap::new();
        let mut fates = Vec::with_capacity(rows.len());
        let ids = MessageId::run(now, rows.len());
        for (row, id) in rows.iter().zip(ids) {
            fates.push(relay_row(&mut tx, row, id, Some(source), rules, now, &mut apps).await?);
        }
        tx.commit().await?;
        Ok(fates)
    }

    async fn announce_deliveries(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(DELIVERIES_CHANNEL)
            .bind(&*self.origin)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn watch(&self, wakeups: Wakeups) -> Result<bool, StoreError> {
        // A connection of its own, outside the query pool: it is held for good.
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .max_lifetime(None)
            .idle_timeout(None)
            .connect_with(self.options.clone())
            .await?;
        let mut listener = PgListener::connect_with(&pool).await?;
        listener
            .listen_all([OUTBOX_CHANNEL, DELIVERIES_CHANNEL])
            .await?;
        let origin = self.origin.clone();
        tokio::spawn(async move {
            loop {
                match listener.try_recv().await {
                    Ok(Some(signal)) => {
                        if let Some(woken) =
                            woken(&wakeups, signal.channel(), signal.payload(), &origin)
                        {
                            woken.notify_one();
                        }
                    }
                    // The connection was lost (and is re-established): signals sent meanwhile
                    // are gone, so look at everything once.
                    Ok(None) => wake_all(&wakeups),
                    Err(error) => {
                        tracing::warn!(%error, "lost the PostgreSQL notification connection; polling until it is back");
                        tokio::time::sleep(RECONNECT_PAUSE).await;
                        wake_all(&wakeups);
                    }
                }
            }
        });
        Ok(true)
    }
}

/// Whom a signal on `channel` with `payload` wakes: the relay for outbox commits, the engine
/// for another process's announcement of deliveries, nobody for this store's own (`origin`):
/// its engine was woken when it announced.
fn woken<'w>(
    wakeups: &'w Wakeups,
    channel: &str,
    payload: &str,
    origin: &str,
) -> Option<&'w Notify> {
    match channel {
        OUTBOX_CHANNEL => Some(&wakeups.outbox),
        _ if payload == origin => None,
        _ => Some(&wakeups.deliveries),
    }
}

fn wake_all(wakeups: &Wakeups) {
    wakeups.outbox.notify_one();
    wakeups.deliveries.notify_one();
}

/// Why a row was not published: the row's fault (kept on it), or the database's (retried).
enum Refusal {
    Row(String),
    Store(StoreError),
}

impl From<sqlx::Error> for Refusal {
    fn from(error: sqlx::Error) -> Self {
        Self::Store(error.into())
    }
}

/// A pass's application lookups, by a row's application and event type: the application's
/// id and whether the message is enveloped, or `None` for no such application.
type AppLookups = HashMap<(String, String), Option<(String, bool)>>;

/// Publishes one row inside a savepoint, so that a refused row's writes roll back on their
/// own and the others' stay. A row of a `source` is recorded under its id there, and not
/// published again: the record is written after the message, and a record another
/// transaction wrote first (a second relay of the same row) rolls this message back.
/// `apps` remembers this pass's application lookups (by application and event type).
async fn relay_row(
    tx: &mut Transaction<'static, Postgres>,
    row: &OutboxRow,
    id: MessageId,
    source: Option<&str>,
    rules: &RelayRules,
    now: Timestamp,
    apps: &mut AppLookups,
) -> Result<RowFate, StoreError> {
    if let Some(source) = source {
        let seen = fetch_one(&mut **tx, sql::relayed(source, row.id), |r| r.bool(0)).await?;
        if seen == Some(true) {
            return Ok(RowFate::AlreadyPublished);
        }
    }
    let message = match checked_message(tx, row, id, rules, now, apps).await {
        Ok(message) => message,
        Err(Refusal::Row(why)) => return Ok(RowFate::Refused(why)),
        Err(Refusal::Store(error)) => return Err(error),
    };
    let mut savepoint = (**tx).begin().await?;
    let created = match insert_message(&mut savepoint, &message, &Route::Subscribers).await {
        Ok(created) => created,
        Err(StoreError::Conflict(why)) => {
            savepoint.rollback().await?;
            return Ok(RowFate::Refused(why));
        }
        Err(StoreError::NotFound(what)) => {
            savepoint.rollback().await?;
            return Ok(RowFate::Refused(format!("{what} not found")));
        }
        Err(other) => return Err(other),
    };
    if let Some(source) = source {
        let recorded = run(
            &mut *savepoint,
            sql::record_relayed(source, row.id, &message.id),
        )
        .await?;
        if recorded == 0 {
            savepoint.rollback().await?;
            return Ok(RowFate::AlreadyPublished);
        }
    }
    savepoint.commit().await?;
    Ok(RowFate::Published {
        deliveries: created.deliveries,
    })
}

/// The message `row` becomes, once it passed the API's rules and its application and event
/// type were found.
async fn checked_message(
    tx: &mut Transaction<'static, Postgres>,
    row: &OutboxRow,
    id: MessageId,
    rules: &RelayRules,
    now: Timestamp,
    apps: &mut AppLookups,
) -> Result<Message, Refusal> {
    row.check(rules).map_err(Refusal::Row)?;
    let key = (row.app.clone(), row.event_type.clone());
    let app = match apps.get(&key) {
        Some(app) => app.clone(),
        None => {
            let app = fetch_one(&mut **tx, sql::app_of_row(row), sql::app_of_row_row);
            let app = app.await.map_err(Refusal::Store)?;
            apps.insert(key, app.clone());
            app
        }
    };
    let (app, enveloped) = app.ok_or_else(|| Refusal::Row(unknown_app(&row.app)))?;
    if rules.strict_event_types {
        let statement = sql::event_type(&row.event_type);
        let found = fetch_one(&mut **tx, statement, sql::event_type_row);
        let found = found.await.map_err(Refusal::Store)?;
        strict_event_type(found, row).map_err(Refusal::Row)?;
    }
    Ok(row.message(id, (AppId::from_stored(app), enveloped), now))
}

/// Takes, in the order every writer takes them, the ordering locks the pass's rows may need:
/// their keys', and those of their applications' strict endpoints (see
/// `deliveries_in_order.sql`). Taken row by row as the rows are written, they would come in
/// row order, and a pass could wait for a publish that waits for it.
async fn lock_ordering(tx: &mut PgConnection, rows: &[OutboxRow]) -> Result<(), StoreError> {
    let keys: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.ordering_key.as_deref())
        .collect();
    let apps: Vec<&str> = rows.iter().map(|r| r.app.as_str()).collect();
    sqlx::query(
        "SELECT lock_ordering_keys(
             array_fill(''::text, ARRAY[cardinality($1::text[])]) || s.eps,
             $1::text[] || array_fill(''::text, ARRAY[cardinality(s.eps)]))
         FROM (SELECT coalesce(array_agg(e.id), '{}') AS eps FROM endpoints e
               WHERE e.strict_order AND NOT e.disabled AND e.app_id IN (
                   SELECT a.id FROM applications a WHERE a.id = ANY($2) OR a.uid = ANY($2))) s",
    )
    .bind(keys)
    .bind(apps)
    .execute(tx)
    .await?;
    Ok(())
}

/// Up to `limit` waiting rows, oldest first, locked; rows other relays hold are skipped, and
/// so are rows with an ordering key unless `ordered`.
async fn waiting(
    tx: &mut PgConnection,
    limit: usize,
    ordered: bool,
) -> Result<Vec<OutboxRow>, StoreError> {
    let rows: Vec<OutboxColumns> = sqlx::query_as(
        "SELECT id, app, event_type, payload::text, event_id, to_json(channels)::text,
                ordering_key
             FROM outbox WHERE error IS NULL AND ($2 OR ordering_key IS NULL)
             ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED",
    )
    .bind(i64::try_from(limit).unwrap_or(i64::MAX))
    .bind(ordered)
    .fetch_all(tx)
    .await?;
    Ok(rows.into_iter().map(OutboxRow::from).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_woken_by_the_others_announcements_not_its_own() {
        let wakeups = Wakeups::default();
        let whom = |channel, payload| match woken(&wakeups, channel, payload, "mine") {
            Some(woken) if std::ptr::eq(woken, &*wakeups.outbox) => "relay",
            Some(woken) if std::ptr::eq(woken, &*wakeups.deliveries) => "engine",
            Some(_) => unreachable!("only the relay and the engine are woken"),
            None => "nobody",
        };

        assert_eq!(whom(DELIVERIES_CHANNEL, "theirs"), "engine");
        assert_eq!(whom(DELIVERIES_CHANNEL, ""), "engine", "an older version's");
        assert_eq!(whom(DELIVERIES_CHANNEL, "mine"), "nobody");
        assert_eq!(whom(OUTBOX_CHANNEL, ""), "relay");
    }
}
