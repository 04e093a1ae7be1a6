//! The SQL both implementations share, written once.
//!
//! SQLite and PostgreSQL accept the same SQL for most of what hookd asks of them; what differs
//! is how a statement names its parameters (`?1` on SQLite, `$1` on PostgreSQL), how values are
//! bound, and the row type they come back in. So a statement is written here once, with `?N`
//! placeholders, and [`sql!`] makes both texts of it at compile time: a statement that uses `$`
//! or a bare `?` does not build, rather than failing on one database at run time. Its values
//! are [`Arg`]s, which each backend binds its own way, and rows are read by one set of decoders
//! over either database's row type ([`rows::Columns`]). Each backend says how it runs a
//! [`Statement`] (it is a [`Database`]) and keeps the SQL that really differs between the two.
//!
//! - [`rows`]: the row decoders, over both row types.
//! - [`list`]: [`ListQuery`], a list with optional filters and a page ([`keyset`]).
//! - [`search`]: the message search's conditions and endpoint statistics' ranges.
//! - [`health`]: an endpoint's history in slices of time, and its oldest waiting message.
//! - one module per resource trait (`applications`, `endpoints`, …): its statements, each
//!   with its arguments, the decoders of the rows only it reads, and the trait itself,
//!   implemented once for any [`Database`]. What a backend must do its own way (publishing,
//!   writes that commit operational events with them, a task's or a purge's batch) it
//!   provides through a small trait of that module (`messages::Publish`,
//!   `endpoints::EventWrites`, `tasks::StepTasks`, `retention::PurgeBatches`).
//! - [`task_chunks`]: a background task's row and the chunks both backends' steps run.

pub mod applications;
pub mod auth;
pub mod endpoints;
pub mod event_types;
pub mod health;
pub mod ingest;
pub mod keyset;
pub mod list;
pub mod messages;
pub mod notices;
pub mod outbox;
pub mod poller;
pub mod retention;
pub mod rows;
pub mod search;
pub mod task_chunks;
pub mod tasks;

use std::borrow::Cow;

use hookd_core::Timestamp;

pub use list::ListQuery;

use crate::{Page, StoreError};

/// A statement written once for both databases: the text SQLite runs, with `?1`, `?2`, …, and
/// the text PostgreSQL runs, the same but for `$1`, `$2`, …. Made by [`sql!`]. Where the two
/// databases need different words, each text is written for one of them ([`Sql::only`]), and
/// asking it for the other's is a bug that panics at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sql {
    sqlite: Option<&'static str>,
    postgres: Option<&'static str>,
}

impl Sql {
    /// The two texts [`sql!`] rendered.
    #[doc(hidden)]
    pub const fn from_rendered(sqlite: &'static [u8], postgres: &'static [u8]) -> Self {
        match (std::str::from_utf8(sqlite), std::str::from_utf8(postgres)) {
            (Ok(sqlite), Ok(postgres)) => Self {
                sqlite: Some(sqlite),
                postgres: Some(postgres),
            },
            _ => panic!("shared SQL is not UTF-8"),
        }
    }

    /// The statement for `dialect` alone: it uses words the other database does not know.
    pub const fn only(self, dialect: Dialect) -> Self {
        match dialect {
            Dialect::Sqlite => Self {
                postgres: None,
                ..self
            },
            Dialect::Postgres => Self {
                sqlite: None,
                ..self
            },
        }
    }

    /// The text with SQLite's placeholders.
    pub const fn sqlite(self) -> &'static str {
        match self.sqlite {
            Some(text) => text,
            None => panic!("a statement for PostgreSQL alone was run on SQLite"),
        }
    }

    /// The text with PostgreSQL's placeholders.
    pub const fn postgres(self) -> &'static str {
        match self.postgres {
            Some(text) => text,
            None => panic!("a statement for SQLite alone was run on PostgreSQL"),
        }
    }

    /// The text for `dialect`.
    pub const fn text(self, dialect: Dialect) -> &'static str {
        match dialect {
            Dialect::Sqlite => self.sqlite(),
            Dialect::Postgres => self.postgres(),
        }
    }
}

/// A shared statement from pieces (string literals and `&str` constants such as the column
/// lists), joined at compile time: `sql!("SELECT ", APP_COLUMNS, " FROM applications WHERE id = ?1")`.
/// Parameters are written `?1`, `?2`, …; a `$` or a `?` without its number does not build.
macro_rules! sql {
    ($($piece:expr),+ $(,)?) => {{
        const PIECES: &[&str] = &[$($piece),+];
        const LEN: usize = $crate::sql::rendered_len(PIECES);
        const SQLITE: [u8; LEN] = $crate::sql::render(PIECES, b'?');
        const POSTGRES: [u8; LEN] = $crate::sql::render(PIECES, b'$');
        const SQL: $crate::sql::Sql = $crate::sql::Sql::from_rendered(&SQLITE, &POSTGRES);
        SQL
    }};
}
pub(crate) use sql;

/// How long the pieces of a statement are together.
#[doc(hidden)]
pub const fn rendered_len(pieces: &[&str]) -> usize {
    let (mut len, mut i) = (0, 0);
    while i < pieces.len() {
        len += pieces[i].len();
        i += 1;
    }
    len
}

/// The pieces joined, each placeholder's `?` written as `mark`. Panics (at compile time, in
/// [`sql!`]) on a `$` or a `?` not followed by its number.
#[doc(hidden)]
pub const fn render<const N: usize>(pieces: &[&str], mark: u8) -> [u8; N] {
    let mut out = [0u8; N];
    let (mut at, mut p) = (0, 0);
    while p < pieces.len() {
        let bytes = pieces[p].as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            out[at] = bytes[i];
            at += 1;
            i += 1;
        }
        p += 1;
    }
    let mut i = 0;
    while i < N {
        if out[i] == b'$' {
            panic!("shared SQL names its parameters ?1, ?2, …: never $");
        }
        if out[i] == b'?' {
            if i + 1 >= N || !out[i + 1].is_ascii_digit() {
                panic!("a ? in shared SQL needs its number: ?1, ?2, …");
            }
            out[i] = mark;
        }
        i += 1;
    }
    out
}

/// Which database a text is for, where the shared SQL has to say something in each one's own
/// words (JSON lists, arrays).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

impl Dialect {
    /// How this database writes parameter `n`.
    pub fn placeholder(self, n: usize) -> String {
        match self {
            Self::Sqlite => format!("?{n}"),
            Self::Postgres => format!("${n}"),
        }
    }

    /// The condition that `expr` is one of the strings of a [`Arg::Texts`] bound to `?`.
    pub fn is_one_of(self, expr: &str) -> String {
        match self {
            Self::Sqlite => format!("{expr} IN (SELECT value FROM json_each(?))"),
            Self::Postgres => format!("{expr} = ANY(?)"),
        }
    }

    /// The condition that the JSON list of strings in `column` (text, or NULL: which holds
    /// nothing) holds the string bound to `?`.
    pub fn list_holds(self, column: &str) -> String {
        match self {
            Self::Sqlite => format!("EXISTS (SELECT 1 FROM json_each({column}) WHERE value = ?)"),
            Self::Postgres => format!("? = ANY(SELECT json_array_elements_text({column}::json))"),
        }
    }
}

/// One value bound to a statement's parameter. Integers are stored as 64 bits on both
/// databases (BIGINT on PostgreSQL), so every integer goes as [`Arg::Int`].
#[derive(Clone, Debug, PartialEq)]
pub enum Arg<'a> {
    Text(Option<Cow<'a, str>>),
    Bytes(Option<Cow<'a, [u8]>>),
    Int(Option<i64>),
    Bool(bool),
    /// A list of strings: a `text[]` on PostgreSQL, a JSON list (read with `json_each`) on
    /// SQLite; see [`Dialect::is_one_of`].
    Texts(Option<Vec<String>>),
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(value: &'a str) -> Self {
        Self::Text(Some(Cow::Borrowed(value)))
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(value: &'a String) -> Self {
        Self::Text(Some(Cow::Borrowed(value)))
    }
}

impl<'a> From<Option<&'a str>> for Arg<'a> {
    fn from(value: Option<&'a str>) -> Self {
        Self::Text(value.map(Cow::Borrowed))
    }
}

impl From<String> for Arg<'_> {
    fn from(value: String) -> Self {
        Self::Text(Some(Cow::Owned(value)))
    }
}

impl From<Option<String>> for Arg<'_> {
    fn from(value: Option<String>) -> Self {
        Self::Text(value.map(Cow::Owned))
    }
}

impl<'a> From<Option<&'a [u8]>> for Arg<'a> {
    fn from(value: Option<&'a [u8]>) -> Self {
        Self::Bytes(value.map(Cow::Borrowed))
    }
}

impl<'a> From<&'a [u8]> for Arg<'a> {
    fn from(value: &'a [u8]) -> Self {
        Self::Bytes(Some(Cow::Borrowed(value)))
    }
}

impl From<Vec<String>> for Arg<'_> {
    fn from(values: Vec<String>) -> Self {
        Self::Texts(Some(values))
    }
}

impl From<Option<Vec<String>>> for Arg<'_> {
    fn from(values: Option<Vec<String>>) -> Self {
        Self::Texts(values)
    }
}

impl From<bool> for Arg<'_> {
    fn from(value: bool) -> Self {
        Self::Bool(value)
    }
}

impl From<Timestamp> for Arg<'_> {
    fn from(value: Timestamp) -> Self {
        Self::Int(Some(value.as_millis()))
    }
}

impl From<Option<Timestamp>> for Arg<'_> {
    fn from(value: Option<Timestamp>) -> Self {
        Self::Int(value.map(Timestamp::as_millis))
    }
}

/// Integers of every width the records hold.
macro_rules! int_args {
    ($($int:ty),*) => {$(
        impl From<$int> for Arg<'_> {
            fn from(value: $int) -> Self {
                Self::Int(Some(i64::from(value)))
            }
        }
        impl From<Option<$int>> for Arg<'_> {
            fn from(value: Option<$int>) -> Self {
                Self::Int(value.map(i64::from))
            }
        }
    )*};
}
int_args!(i16, u16, i32, u32, i64);

impl From<usize> for Arg<'_> {
    /// A count or a limit; one past `i64::MAX` is as good as no limit.
    fn from(value: usize) -> Self {
        Self::Int(Some(i64::try_from(value).unwrap_or(i64::MAX)))
    }
}

/// The arguments of a statement, in the order of its placeholders: `args![app.id.as_str(), 5]`.
macro_rules! args {
    ($($value:expr),* $(,)?) => {
        vec![$($crate::sql::Arg::from($value)),*]
    };
}
pub(crate) use args;

/// A shared statement with its arguments: what a backend runs.
#[derive(Clone, Debug)]
pub struct Statement<'a> {
    pub sql: Sql,
    pub args: Vec<Arg<'a>>,
}

impl<'a> Statement<'a> {
    pub fn new(sql: Sql, args: Vec<Arg<'a>>) -> Self {
        Self { sql, args }
    }

    /// The statement with its arguments copied, for a connection on another thread.
    pub fn into_owned(self) -> Statement<'static> {
        Statement {
            sql: self.sql,
            args: self.args.into_iter().map(Arg::into_owned).collect(),
        }
    }
}

impl Arg<'_> {
    /// The value, copied if borrowed.
    pub fn into_owned(self) -> Arg<'static> {
        match self {
            Self::Text(text) => Arg::Text(text.map(|t| Cow::Owned(t.into_owned()))),
            Self::Bytes(bytes) => Arg::Bytes(bytes.map(|b| Cow::Owned(b.into_owned()))),
            Self::Int(value) => Arg::Int(value),
            Self::Bool(value) => Arg::Bool(value),
            Self::Texts(values) => Arg::Texts(values),
        }
    }
}

/// What a write's refusal by a constraint means: a taken unique key is a conflict described
/// by `taken`, a missing parent row (a foreign key) is `parent` not found.
#[derive(Clone, Debug)]
pub struct Refusals {
    pub taken: String,
    pub parent: &'static str,
}

impl Refusals {
    /// For a write whose only constraint is a unique key.
    pub fn taken(taken: String) -> Self {
        Self {
            taken,
            parent: "referenced record",
        }
    }
}

/// How a row becomes a record: one of [`rows`]' decoders, or a statement's own.
pub type Decoder<T> = fn(&dyn rows::Columns) -> rows::Decoded<T>;

/// A database the shared statements run on: each backend says how it reads and writes, and
/// the resource traits are implemented once, for any `Database`.
#[async_trait::async_trait]
pub trait Database: Send + Sync {
    /// The words the database's own SQL is written in.
    const DIALECT: Dialect;

    /// Every row `statement` reads, decoded.
    async fn read<T: Send + 'static>(
        &self,
        statement: Statement<'_>,
        decode: Decoder<T>,
    ) -> Result<Vec<T>, StoreError>;

    /// The row `statement` reads (it matches one at most), decoded.
    async fn read_one<T: Send + 'static>(
        &self,
        statement: Statement<'_>,
        decode: Decoder<T>,
    ) -> Result<Option<T>, StoreError> {
        Ok(self.read(statement, decode).await?.into_iter().next())
    }

    /// One page of a list.
    async fn read_page<T: Send + 'static>(
        &self,
        query: list::PageQuery<'_>,
        decode: Decoder<T>,
    ) -> Result<Page<T>, StoreError>;

    /// Runs a write on its own; how many rows it changed. A constraint's refusal reads as
    /// `refusals` says, or as the database's failure without them.
    async fn write(
        &self,
        statement: Statement<'_>,
        refusals: Option<Refusals>,
    ) -> Result<u64, StoreError>;

    /// Runs a write that returns a row (at most one), decoded.
    async fn write_returning<T: Send + 'static>(
        &self,
        statement: Statement<'_>,
        decode: Decoder<T>,
    ) -> Result<Option<T>, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_database_gets_its_own_placeholders() {
        const COLUMNS: &str = "id, name";
        let statement = sql!("SELECT ", COLUMNS, " FROM t WHERE id = ?1 OR uid = ?12");
        assert_eq!(
            statement.sqlite(),
            "SELECT id, name FROM t WHERE id = ?1 OR uid = ?12"
        );
        assert_eq!(
            statement.postgres(),
            "SELECT id, name FROM t WHERE id = $1 OR uid = $12"
        );
    }

    #[test]
    #[should_panic(expected = "for PostgreSQL alone")]
    fn a_statement_for_one_database_is_not_run_on_the_other() {
        sql!("SELECT 1 FOR UPDATE").only(Dialect::Postgres).sqlite();
    }

    #[test]
    #[should_panic(expected = "needs its number")]
    fn a_bare_question_mark_is_refused() {
        render::<9>(&["id = ? OR"], b'$');
    }

    #[test]
    #[should_panic(expected = "never $")]
    fn a_dollar_placeholder_is_refused() {
        render::<7>(&["id = $1"], b'$');
    }
}
