//! Running shared statements on SQLite: [`Columns`] for rusqlite's rows, [`Arg`] as a
//! rusqlite parameter, and the few calls every resource makes (run, fetch rows, fetch a page),
//! on any connection or the writer's ([`Prepare`]). The decoders themselves are shared
//! ([`crate::sql::rows`], re-exported here).

use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{Connection, ToSql, params_from_iter};

use super::writer::Tx;
use super::{SqliteStore, refused};
use crate::sql::list::PageQuery;
pub use crate::sql::rows::*;
use crate::sql::{Arg, Database, Decoder, Dialect, Refusals, Statement};
use crate::{Page, StoreError};

impl Columns for rusqlite::Row<'_> {
    fn opt_i64(&self, index: usize) -> Decoded<Option<i64>> {
        self.get(index).map_err(corrupt)
    }

    fn opt_text(&self, index: usize) -> Decoded<Option<String>> {
        self.get(index).map_err(corrupt)
    }

    fn opt_bytes(&self, index: usize) -> Decoded<Option<Vec<u8>>> {
        let value = self.get_ref(index).map_err(corrupt)?;
        match value {
            ValueRef::Null => Ok(None),
            ValueRef::Blob(bytes) | ValueRef::Text(bytes) => Ok(Some(bytes.to_vec())),
            other => Err(StoreError::Corrupt(format!(
                "column {index} is {:?}, not bytes",
                other.data_type()
            ))),
        }
    }

    fn bool(&self, index: usize) -> Decoded<bool> {
        self.get(index).map_err(corrupt)
    }
}

fn corrupt(error: rusqlite::Error) -> StoreError {
    StoreError::Corrupt(error.to_string())
}

impl ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Arg::Text(Some(text)) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Arg::Bytes(Some(bytes)) => ToSqlOutput::Borrowed(ValueRef::Blob(bytes)),
            Arg::Text(None) | Arg::Bytes(None) | Arg::Int(None) | Arg::Texts(None) => {
                ToSqlOutput::Owned(Value::Null)
            }
            Arg::Int(Some(value)) => ToSqlOutput::Owned(Value::Integer(*value)),
            Arg::Bool(value) => ToSqlOutput::Owned(Value::Integer((*value).into())),
            Arg::Texts(Some(values)) => {
                ToSqlOutput::Owned(Value::Text(crate::json::encode(values)))
            }
        })
    }
}

/// Where a statement of the program's own (its text `'static`) is prepared: on a reader's
/// connection, rusqlite's statement cache; on the writer's, the statements it keeps.
pub trait Prepare {
    /// Runs `work` with the statement for `sql`, prepared once for the connection.
    fn prepared<R, E: From<rusqlite::Error>>(
        &self,
        sql: &'static str,
        work: impl FnOnce(&mut rusqlite::Statement<'_>) -> Result<R, E>,
    ) -> Result<R, E>;
}

impl Prepare for Connection {
    fn prepared<R, E: From<rusqlite::Error>>(
        &self,
        sql: &'static str,
        work: impl FnOnce(&mut rusqlite::Statement<'_>) -> Result<R, E>,
    ) -> Result<R, E> {
        work(&mut *self.prepare_cached(sql)?)
    }
}

impl Prepare for Tx<'_> {
    fn prepared<R, E: From<rusqlite::Error>>(
        &self,
        sql: &'static str,
        work: impl FnOnce(&mut rusqlite::Statement<'_>) -> Result<R, E>,
    ) -> Result<R, E> {
        self.kept(sql, work)
    }
}

/// Runs a statement that writes; how many rows it changed.
pub fn run(conn: &impl Prepare, statement: &Statement<'_>) -> rusqlite::Result<usize> {
    conn.prepared(statement.sql.sqlite(), |prepared| {
        prepared.execute(params_from_iter(&statement.args))
    })
}

/// Runs a statement and decodes every row.
pub fn fetch<T>(
    conn: &impl Prepare,
    statement: &Statement<'_>,
    decode_row: impl FnMut(&dyn Columns) -> Decoded<T>,
) -> Result<Vec<T>, StoreError> {
    let params = params_from_iter(&statement.args);
    conn.prepared(statement.sql.sqlite(), |prepared| {
        decode_all(prepared, params, decode_row)
    })
}

/// Runs a statement expected to match at most one row and decodes it.
pub fn fetch_one<T>(
    conn: &impl Prepare,
    statement: &Statement<'_>,
    decode_row: impl FnMut(&dyn Columns) -> Decoded<T>,
) -> Result<Option<T>, StoreError> {
    Ok(fetch(conn, statement, decode_row)?.into_iter().next())
}

/// Runs a list query's page and decodes it.
pub fn page<T>(
    conn: &Connection,
    query: PageQuery<'_>,
    decode_row: impl Fn(&dyn Columns) -> Decoded<T>,
) -> Result<Page<T>, StoreError> {
    let rows = collect(conn, &query.sql, params_from_iter(&query.args), decode_row)?;
    Ok(query.keyset.page(rows))
}

/// Runs a prepared query and decodes every row.
pub fn collect<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    decode_row: impl FnMut(&dyn Columns) -> Decoded<T>,
) -> Result<Vec<T>, StoreError> {
    decode_all(&mut *conn.prepare_cached(sql)?, params, decode_row)
}

/// Runs a prepared statement and decodes every row.
pub fn decode_all<T>(
    statement: &mut rusqlite::Statement<'_>,
    params: impl rusqlite::Params,
    mut decode_row: impl FnMut(&dyn Columns) -> Decoded<T>,
) -> Result<Vec<T>, StoreError> {
    let mut rows = statement.query(params)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.push(decode_row(row)?);
    }
    Ok(out)
}

/// Reads on the reader pool, writes as jobs of the one writer.
#[async_trait::async_trait]
impl Database for SqliteStore {
    const DIALECT: Dialect = Dialect::Sqlite;

    async fn read<T: Send + 'static>(
        &self,
        statement: Statement<'_>,
        decode: Decoder<T>,
    ) -> Result<Vec<T>, StoreError> {
        let statement = statement.into_owned();
        self.db
            .read(move |conn| fetch(conn, &statement, decode))
            .await
    }

    async fn read_page<T: Send + 'static>(
        &self,
        query: PageQuery<'_>,
        decode: Decoder<T>,
    ) -> Result<Page<T>, StoreError> {
        let query = query.into_owned();
        self.db.read(move |conn| page(conn, query, decode)).await
    }

    async fn write(
        &self,
        statement: Statement<'_>,
        refusals: Option<Refusals>,
    ) -> Result<u64, StoreError> {
        let statement = statement.into_owned();
        self.db
            .write(move |conn| {
                let written = run(conn, &statement).map_err(|error| match &refusals {
                    Some(r) => refused(r.taken.clone(), r.parent)(error),
                    None => error.into(),
                })?;
                Ok(written as u64)
            })
            .await
    }

    async fn write_returning<T: Send + 'static>(
        &self,
        statement: Statement<'_>,
        decode: Decoder<T>,
    ) -> Result<Option<T>, StoreError> {
        let statement = statement.into_owned();
        self.db
            .write(move |conn| fetch_one(conn, &statement, decode))
            .await
    }
}
