//! What one pass over a source table takes and settles, in every database: the rows taken and
//! what holds them, the contract row, the settling's outcome, the backlog. [`crate::table`]
//! and the per-database sources (`postgres`, `mysql`, `sqlite`) both use these, so neither
//! imports the other's.

use std::time::Duration;

use hookd_store::{OutboxColumns, OutboxRow, RowFate};

use crate::SourceError;

/// Rows taken by a pass, held (locked, on PostgreSQL and MySQL) until [`Table::settle`].
pub struct Taken {
    /// The table's identity (chosen at install): the rows' key in hookd's store, with their
    /// ids.
    pub table_id: String,
    /// Oldest first.
    pub rows: Vec<OutboxRow>,
    pub hold: Hold,
}

impl Taken {
    /// The rows a pass selected (`None` when none), held by `hold` until settled.
    pub(crate) fn of(
        contract: Contract,
        rows: Vec<OutboxColumns>,
        hold: HoldInner,
    ) -> Option<Self> {
        (!rows.is_empty()).then(|| Self {
            table_id: contract.table_id,
            rows: rows.into_iter().map(OutboxRow::from).collect(),
            hold: Hold(hold),
        })
    }
}

/// What a pass holds in the producer's database between take and settle.
pub struct Hold(pub(crate) HoldInner);

pub(crate) enum HoldInner {
    Postgres(sqlx::Transaction<'static, sqlx::Postgres>),
    MySql(sqlx::Transaction<'static, sqlx::MySql>),
    Nothing,
}

/// How many rows wait, and for how long.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Backlog {
    /// Rows not yet relayed.
    pub waiting: u64,
    /// Rows kept with an error.
    pub failed: u64,
    /// How long the oldest waiting row has waited, by the producer database's clock.
    pub oldest: Duration,
}

/// The contract row as a pass reads it.
pub(crate) struct Contract {
    pub version: i64,
    pub table_id: String,
}

impl Contract {
    /// Refuses a table installed by a newer hookd, whose rows this one may misread.
    pub fn check(self) -> Result<Self, SourceError> {
        if self.version > crate::CONTRACT_VERSION {
            return Err(SourceError::NotInstalled(format!(
                "the outbox table's contract is version {}, newer than this hookd's {}: \
                 upgrade hookd",
                self.version,
                crate::CONTRACT_VERSION
            )));
        }
        Ok(self)
    }
}

/// What settling does: the rows to remove, and the rows to keep with their reason.
pub(crate) struct Outcome {
    pub published: Vec<i64>,
    pub refused: Vec<(i64, String)>,
}

impl Outcome {
    /// The outcome of rows `ids` whose fates are `fates`, in the same order.
    pub(crate) fn of(ids: &[i64], fates: &[RowFate]) -> Self {
        let mut outcome = Self {
            published: Vec::new(),
            refused: Vec::new(),
        };
        for (&id, fate) in ids.iter().zip(fates) {
            match fate {
                RowFate::Refused(why) => outcome.refused.push((id, why.clone())),
                _ => outcome.published.push(id),
            }
        }
        outcome
    }
}

/// A database error that means "no such table", as [`SourceError::NotInstalled`].
pub(crate) fn not_installed(error: SourceError, missing: bool) -> SourceError {
    if missing {
        SourceError::NotInstalled(format!(
            "no `{}` table in the source database: run `hookd outbox install --source URL`",
            crate::TABLE
        ))
    } else {
        error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settling_removes_published_rows_and_keeps_refused_ones_with_their_reason() {
        let fates = [
            RowFate::Published { deliveries: 2 },
            RowFate::Refused("payload: is not valid JSON".into()),
            RowFate::AlreadyPublished,
        ];
        let outcome = Outcome::of(&[7, 8, 9], &fates);
        assert_eq!(outcome.published, [7, 9]);
        assert_eq!(
            outcome.refused,
            [(8, "payload: is not valid JSON".to_owned())]
        );
    }
}
