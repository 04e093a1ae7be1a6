//! Svix's list envelope and its cursor ("iterator") parameters.
//!
//! `iterator` is the id (or event-type name) of the last item of the page; `prevIterator` is
//! the first item's, prefixed with `-`, and passing it back pages the other way.

use hookd_store::{Cursor, Page, PageRequest};
use serde::Serialize;

use crate::ApiError;
use crate::extract::QueryParams;

const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 250;

/// `limit` from the query string: 1 to 250, 50 when not given.
pub fn limit(query: &QueryParams) -> Result<usize, ApiError> {
    let limit = query.parse::<usize>("limit")?.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::query_param(
            "limit",
            format!("must be between 1 and {MAX_LIMIT}"),
        ));
    }
    Ok(limit)
}

/// `limit` and `iterator` from the query string.
pub fn page_request(query: &QueryParams) -> Result<PageRequest, ApiError> {
    let limit = limit(query)?;
    let cursor = query
        .get("iterator")
        .filter(|i| !i.is_empty())
        .map(|iterator| match iterator.strip_prefix('-') {
            Some(before) => Cursor::Before(before.to_owned()),
            None => Cursor::After(iterator.to_owned()),
        });
    Ok(PageRequest { limit, cursor })
}

/// `{"data": […], "iterator": …, "prevIterator": …, "done": …}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListOut<T> {
    pub data: Vec<T>,
    pub iterator: Option<String>,
    pub prev_iterator: Option<String>,
    pub done: bool,
}

impl<T> ListOut<T> {
    /// The envelope for `page`, with `key` giving each item's cursor key and `out` its shape.
    pub fn from_page<R>(page: Page<R>, key: impl Fn(&R) -> String, out: impl Fn(R) -> T) -> Self {
        let iterator = page.items.last().map(&key);
        let prev_iterator = page.items.first().map(|first| format!("-{}", key(first)));
        Self {
            data: page.items.into_iter().map(out).collect(),
            iterator,
            prev_iterator,
            done: !page.has_more,
        }
    }

    /// The envelope for `page`, each endpoint shown by `shown` (which may fail, say opening
    /// its keys), its id the cursor key.
    pub fn of_endpoints(
        page: Page<hookd_core::model::Endpoint>,
        shown: impl Fn(hookd_core::model::Endpoint) -> Result<T, crate::ApiError>,
    ) -> Result<Self, crate::ApiError> {
        let key = |ep: &hookd_core::model::Endpoint| ep.id.to_string();
        let iterator = page.items.last().map(key);
        let prev_iterator = page.items.first().map(|first| format!("-{}", key(first)));
        Ok(Self {
            data: page
                .items
                .into_iter()
                .map(shown)
                .collect::<Result<_, _>>()?,
            iterator,
            prev_iterator,
            done: !page.has_more,
        })
    }
}
