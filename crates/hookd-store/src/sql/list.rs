//! [`ListQuery`]: a list's `select … where <fixed conditions>`, its optional filters and its
//! keyset page, built once for both databases.

use hookd_core::Timestamp;

use super::keyset::Keyset;
use super::{Arg, Dialect, Sql};
use crate::PageRequest;

/// A list query: `select … where <fixed conditions>` plus optional filters and a keyset page.
/// Built in the words of one [`Dialect`], as the backend that runs it asks.
pub struct ListQuery<'a> {
    dialect: Dialect,
    sql: String,
    args: Vec<Arg<'a>>,
}

/// A list query finished with its page: what a backend runs, and how its rows become a page.
pub struct PageQuery<'a> {
    pub sql: String,
    pub args: Vec<Arg<'a>>,
    pub keyset: Keyset,
}

impl PageQuery<'_> {
    /// The query with its arguments copied, for a connection on another thread.
    pub fn into_owned(self) -> PageQuery<'static> {
        PageQuery {
            sql: self.sql,
            args: self.args.into_iter().map(Arg::into_owned).collect(),
            keyset: self.keyset,
        }
    }
}

impl<'a> ListQuery<'a> {
    /// `select` refers to `args` as `?1`, `?2`, ….
    pub fn new(dialect: Dialect, select: Sql, args: Vec<Arg<'a>>) -> Self {
        Self {
            dialect,
            sql: select.text(dialect).to_owned(),
            args,
        }
    }

    /// Adds ` AND <condition>` with `?` standing for `value`.
    pub fn and(&mut self, condition: &str, value: impl Into<Arg<'a>>) {
        self.args.push(value.into());
        let placeholder = self.dialect.placeholder(self.args.len());
        self.sql.push_str(" AND ");
        self.sql.push_str(&condition.replace('?', &placeholder));
    }

    /// Adds ` AND <condition>`, which binds nothing.
    pub fn and_plain(&mut self, condition: &str) {
        self.sql.push_str(" AND ");
        self.sql.push_str(condition);
    }

    /// Adds ` AND <condition>` with `?` standing for `at`, if there is one.
    pub fn and_time(&mut self, condition: &str, at: Option<Timestamp>) {
        if let Some(at) = at {
            self.and(condition, at);
        }
    }

    /// Finishes the query with a page on `column`, newest (greatest) first when `descending`.
    pub fn page(mut self, column: &str, descending: bool, page: &PageRequest) -> PageQuery<'a> {
        let placeholder = self.dialect.placeholder(self.args.len() + 1);
        let keyset = Keyset::new(column, descending, page, &placeholder);
        if let Some(key) = &keyset.key {
            self.args.push(Arg::from(key.clone()));
        }
        self.sql.push_str(&keyset.condition);
        self.sql.push_str(&keyset.order_limit);
        PageQuery {
            sql: self.sql,
            args: self.args,
            keyset,
        }
    }
}
