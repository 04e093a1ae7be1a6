//! Running shared statements on PostgreSQL: [`Columns`] for sqlx's rows, [`Arg`] bound to a
//! query, and the few calls every resource makes (run, fetch rows, fetch a page). The
//! decoders themselves are shared ([`crate::sql::rows`], re-exported here).

use std::borrow::Cow;

use sqlx::postgres::{PgArguments, PgExecutor, PgRow};
use sqlx::query::Query;
use sqlx::{AssertSqlSafe, Decode, Postgres, Row, Type};

use super::{PgStore, refused};
use crate::sql::list::PageQuery;
pub use crate::sql::rows::*;
use crate::sql::{Arg, Database, Decoder, Dialect, Refusals, Statement};
use crate::{Page, StoreError};

impl Columns for PgRow {
    fn opt_i64(&self, index: usize) -> Decoded<Option<i64>> {
        get(self, index)
    }

    fn opt_text(&self, index: usize) -> Decoded<Option<String>> {
        get(self, index)
    }

    fn opt_bytes(&self, index: usize) -> Decoded<Option<Vec<u8>>> {
        get(self, index)
    }

    fn bool(&self, index: usize) -> Decoded<bool> {
        get(self, index)
    }
}

/// Column `index` of `row`; a missing column or a wrong type is corrupt data (or a bug).
fn get<'r, T: Decode<'r, Postgres> + Type<Postgres>>(row: &'r PgRow, index: usize) -> Decoded<T> {
    row.try_get(index)
        .map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Binds `arg` as the query's next parameter.
pub fn bind<'q>(
    query: Query<'q, Postgres, PgArguments>,
    arg: Arg<'q>,
) -> Query<'q, Postgres, PgArguments> {
    match arg {
        Arg::Text(None) => query.bind(None::<&str>),
        Arg::Text(Some(Cow::Borrowed(text))) => query.bind(text),
        Arg::Text(Some(Cow::Owned(text))) => query.bind(text),
        Arg::Bytes(None) => query.bind(None::<&[u8]>),
        Arg::Bytes(Some(Cow::Borrowed(bytes))) => query.bind(bytes),
        Arg::Bytes(Some(Cow::Owned(bytes))) => query.bind(bytes),
        Arg::Int(value) => query.bind(value),
        Arg::Bool(value) => query.bind(value),
        Arg::Texts(values) => query.bind(values),
    }
}

/// A shared statement as a query with its arguments bound.
pub fn query(statement: Statement<'_>) -> Query<'_, Postgres, PgArguments> {
    let query = sqlx::query(statement.sql.postgres());
    statement.args.into_iter().fold(query, bind)
}

/// Runs a statement that writes; how many rows it changed.
pub async fn run<'c>(
    conn: impl PgExecutor<'c>,
    statement: Statement<'_>,
) -> Result<u64, sqlx::Error> {
    Ok(query(statement).execute(conn).await?.rows_affected())
}

/// Runs a statement and decodes every row.
pub async fn fetch<'c, T>(
    conn: impl PgExecutor<'c>,
    statement: Statement<'_>,
    decode_row: impl Fn(&dyn Columns) -> Decoded<T>,
) -> Result<Vec<T>, StoreError> {
    let rows = query(statement).fetch_all(conn).await?;
    rows.iter().map(|row| decode_row(row)).collect()
}

/// Runs a statement expected to match at most one row and decodes it.
pub async fn fetch_one<'c, T>(
    conn: impl PgExecutor<'c>,
    statement: Statement<'_>,
    decode_row: impl Fn(&dyn Columns) -> Decoded<T>,
) -> Result<Option<T>, StoreError> {
    let row = query(statement).fetch_optional(conn).await?;
    row.as_ref().map(|row| decode_row(row)).transpose()
}

/// Runs a list query's page and decodes it.
pub async fn page<'c, T>(
    conn: impl PgExecutor<'c>,
    query: PageQuery<'_>,
    decode_row: impl Fn(&dyn Columns) -> Decoded<T>,
) -> Result<Page<T>, StoreError> {
    let PageQuery { sql, args, keyset } = query;
    let bound = args.into_iter().fold(sqlx::query(AssertSqlSafe(sql)), bind);
    let rows = bound.fetch_all(conn).await?;
    let items = rows
        .iter()
        .map(|row| decode_row(row))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(keyset.page(items))
}

/// Every call on the pool, each in a transaction of its own.
#[async_trait::async_trait]
impl Database for PgStore {
    const DIALECT: Dialect = Dialect::Postgres;

    async fn read<T: Send + 'static>(
        &self,
        statement: Statement<'_>,
        decode: Decoder<T>,
    ) -> Result<Vec<T>, StoreError> {
        fetch(&self.pool, statement, decode).await
    }

    async fn read_one<T: Send + 'static>(
        &self,
        statement: Statement<'_>,
        decode: Decoder<T>,
    ) -> Result<Option<T>, StoreError> {
        fetch_one(&self.pool, statement, decode).await
    }

    async fn read_page<T: Send + 'static>(
        &self,
        query: PageQuery<'_>,
        decode: Decoder<T>,
    ) -> Result<Page<T>, StoreError> {
        page(&self.pool, query, decode).await
    }

    async fn write(
        &self,
        statement: Statement<'_>,
        refusals: Option<Refusals>,
    ) -> Result<u64, StoreError> {
        run(&self.pool, statement)
            .await
            .map_err(|error| match refusals {
                Some(r) => refused(r.taken, r.parent)(error),
                None => error.into(),
            })
    }

    async fn write_returning<T: Send + 'static>(
        &self,
        statement: Statement<'_>,
        decode: Decoder<T>,
    ) -> Result<Option<T>, StoreError> {
        fetch_one(&self.pool, statement, decode).await
    }
}
