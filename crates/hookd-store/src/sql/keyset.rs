//! Keyset pagination shared by both implementations.
//!
//! A page is "rows after (or before) the cursor's key, in the list's order, one more than the
//! limit": the extra row only says whether more follow. Pages that go backwards are fetched in
//! the opposite order and flipped, so callers always get the list's order.

use crate::{Cursor, Page, PageRequest};

/// The SQL pieces for one page of a list ordered by `column`.
pub struct Keyset {
    /// ` AND column > <placeholder>` (or `<`), empty without a cursor.
    pub condition: String,
    /// ` ORDER BY column ASC|DESC LIMIT n`.
    pub order_limit: String,
    /// The cursor's key, to bind to the placeholder.
    pub key: Option<String>,
    reverse: bool,
    limit: usize,
}

impl Keyset {
    /// Pieces for `page` of a list on `column`, newest (greatest) first when `descending`.
    /// `placeholder` is how the dialect names the cursor's parameter (`?5`, `$5`).
    pub fn new(column: &str, descending: bool, page: &PageRequest, placeholder: &str) -> Self {
        let backwards = matches!(page.cursor, Some(Cursor::Before(_)));
        // Scanning order: the list's order, flipped when paging backwards.
        let scan_descending = descending != backwards;
        let (condition, key) = match &page.cursor {
            None => (String::new(), None),
            Some(Cursor::After(key) | Cursor::Before(key)) => {
                let op = if scan_descending { "<" } else { ">" };
                (
                    format!(" AND {column} {op} {placeholder}"),
                    Some(key.clone()),
                )
            }
        };
        let direction = if scan_descending { "DESC" } else { "ASC" };
        Self {
            condition,
            order_limit: format!(" ORDER BY {column} {direction} LIMIT {}", page.limit + 1),
            key,
            reverse: backwards,
            limit: page.limit,
        }
    }

    /// Turns the fetched rows into a page in the list's order.
    pub fn page<T>(&self, mut rows: Vec<T>) -> Page<T> {
        let has_more = rows.len() > self.limit;
        rows.truncate(self.limit);
        if self.reverse {
            rows.reverse();
        }
        Page {
            items: rows,
            has_more,
        }
    }
}
