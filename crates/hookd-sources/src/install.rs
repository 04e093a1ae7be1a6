//! `hookd outbox install --source URL`: the outbox table in a producer's database.
//!
//! The same table, `hookd_outbox`, in every kind of database, with the same columns as hookd's
//! own outbox (docs/outbox.md), an index on the waiting rows, and a one-row contract table
//! holding the contract version and the table's identity: published rows are keyed by that
//! identity and their ids, so a table dropped and installed again never has a new row taken
//! for an old one. Installing again changes nothing that exists.

use crate::source::{Kind, redacted};
use crate::{SourceError, mysql, postgres, sqlite};

/// What `install` did, and what to grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    pub kind: Kind,
    /// Whether the table is new (`false`: it was already there, and is unchanged).
    pub created: bool,
    /// The statements giving a producer role and hookd's relay role what they need, and no
    /// more.
    pub grants: String,
}

/// Installs the outbox table at `url`, and returns the grants for roles `producer` and
/// `relay`: PostgreSQL roles, or MySQL accounts (`name`, `name@host`, `'name'@'host'`), named
/// exactly as the database knows them and printed quoted, so no name reads as SQL. A name the
/// grants cannot quote (empty, or with control characters) is refused before anything is
/// installed.
pub async fn install(url: &str, producer: &str, relay: &str) -> Result<Installed, SourceError> {
    let kind = Kind::of(url)?;
    let table_id = table_id();
    let (created, grants) = match kind {
        Kind::Postgres => {
            let roles = (postgres_role(producer)?, postgres_role(relay)?);
            let created = postgres::install(url, &table_id).await?;
            (created, postgres::grants(&roles.0, &roles.1))
        }
        Kind::MySql => {
            let accounts = (mysql_account(producer)?, mysql_account(relay)?);
            let created = mysql::install(url, &table_id).await?;
            let database = mysql_identifier(&mysql::database(url).await?);
            (created, mysql::grants(&database, &accounts.0, &accounts.1))
        }
        Kind::Sqlite => {
            let url = url.to_owned();
            let created = tokio::task::spawn_blocking(move || sqlite::install(&url, &table_id))
                .await
                .map_err(|e| SourceError::Database(e.to_string()))??;
            let grants = "-- SQLite has no roles: the application and hookd both need to read \
                          and write the file and its folder (for the WAL files)."
                .to_owned();
            (created, grants)
        }
    };
    tracing::info!(source = %redacted(url), %kind, created, "outbox table installed");
    Ok(Installed {
        kind,
        created,
        grants,
    })
}

/// A PostgreSQL role as an identifier: in double quotes, any `"` doubled (so `App` stays
/// `App`, where unquoted PostgreSQL would read `app`).
pub fn postgres_role(name: &str) -> Result<String, SourceError> {
    printable("role", name)?;
    Ok(format!("\"{}\"", name.replace('"', "\"\"")))
}

/// A MySQL/MariaDB identifier: in backticks, any backtick doubled.
pub fn mysql_identifier(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A MySQL/MariaDB account as given (`name`, `name@host`, or either part quoted with `'`,
/// `"` or backticks, the quote doubled inside), written with each part as an identifier:
/// `` `app`@`%` ``.
pub fn mysql_account(account: &str) -> Result<String, SourceError> {
    printable("account", account)?;
    let bad = |why: &str| SourceError::Config(format!("account {account:?}: {why}"));
    let (user, rest) = account_part(account).ok_or_else(|| bad("a quote is not closed"))?;
    if user.is_empty() {
        return Err(bad("names no user"));
    }
    let host = match rest.strip_prefix('@') {
        None if rest.is_empty() => return Ok(mysql_identifier(&user)),
        None => return Err(bad("expected `@` after the user name")),
        Some(host) => host,
    };
    match account_part(host) {
        Some((host, "")) => Ok(format!(
            "{}@{}",
            mysql_identifier(&user),
            mysql_identifier(&host)
        )),
        Some(_) => Err(bad("text after the host name")),
        None => Err(bad("a quote is not closed")),
    }
}

/// The first part of an account and what follows it: a quoted part up to its closing quote
/// (a doubled quote is one quote), or a bare one up to `@`. `None` if a quote is not closed.
fn account_part(text: &str) -> Option<(String, &str)> {
    let Some(quote) = text
        .chars()
        .next()
        .filter(|c| matches!(c, '\'' | '"' | '`'))
    else {
        let end = text.find('@').unwrap_or(text.len());
        return Some((text[..end].to_owned(), &text[end..]));
    };
    let mut part = String::new();
    let mut rest = &text[1..];
    loop {
        let end = rest.find(quote)?;
        part.push_str(&rest[..end]);
        rest = &rest[end + 1..];
        match rest.strip_prefix(quote) {
            Some(after) => {
                part.push(quote);
                rest = after;
            }
            None => return Some((part, rest)),
        }
    }
}

/// Refuses a role or account name that is empty or holds control characters: no quoting
/// makes those a name a DBA meant.
fn printable(what: &str, name: &str) -> Result<(), SourceError> {
    if name.is_empty() {
        return Err(SourceError::Config(format!("the {what} name is empty")));
    }
    hookd_core::validate::one_line(name)
        .map_err(|e| SourceError::Config(format!("{what} {name:?}: {e}")))
}

/// The SQL `install` runs on a database of `kind`, with a new table identity: for a DBA who
/// applies schema changes through the application's own migrations.
pub fn sql(kind: Kind) -> String {
    let table_id = table_id();
    match kind {
        Kind::Postgres => postgres::INSTALL.replace("{table_id}", &table_id),
        Kind::MySql => mysql::INSTALL
            .map(|statement| format!("{};\n", statement.replace("{table_id}", &table_id)))
            .join("\n"),
        Kind::Sqlite => format!(
            "PRAGMA journal_mode = WAL;\n{}",
            sqlite::INSTALL.replace("{table_id}", &table_id)
        ),
    }
}

/// A new table identity: 16 random hex digits.
fn table_id() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).expect("the OS random number generator failed");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_roles_are_quoted_identifiers() {
        assert_eq!(postgres_role("app").unwrap(), r#""app""#);
        assert_eq!(postgres_role("App").unwrap(), r#""App""#);
        assert_eq!(
            postgres_role(r#"x"; DROP TABLE t; --"#).unwrap(),
            r#""x""; DROP TABLE t; --""#
        );
        assert!(postgres_role("").is_err());
        assert!(postgres_role("a\nb").is_err());
        let grants = postgres::grants(&postgres_role("a b").unwrap(), r#""hookd""#);
        assert!(
            grants.starts_with(r#"GRANT INSERT ON hookd_outbox TO "a b";"#),
            "{grants}"
        );
    }

    #[test]
    fn mysql_accounts_are_read_as_mysql_writes_them_and_quoted() {
        for (given, quoted) in [
            ("app", "`app`"),
            ("app@%", "`app`@`%`"),
            ("'app'@'%'", "`app`@`%`"),
            ("\"app\"@\"10.0.0.%\"", "`app`@`10.0.0.%`"),
            ("`ap``p`@localhost", "`ap``p`@`localhost`"),
            ("'o''brien'@'%'", "`o'brien`@`%`"),
            ("x`; DROP TABLE t; --", "`x``; DROP TABLE t; --`"),
        ] {
            assert_eq!(mysql_account(given).unwrap(), quoted, "{given}");
        }
        for bad in ["", "'app", "'app'x@'%'", "'app'@'%'x", "@%", "a\tb"] {
            assert!(mysql_account(bad).is_err(), "{bad:?}");
        }
        assert_eq!(mysql_identifier("sh`op"), "`sh``op`");
    }
}
