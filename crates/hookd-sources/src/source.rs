//! [`SourceSpec`]: an outbox source as configured, and [`Kind`], the database its URL names.

use std::fmt;
use std::str::FromStr;

use crate::SourceError;

/// The kinds of database an outbox table can live in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Postgres,
    /// MySQL 8 or MariaDB 10.6 and later (both have `SKIP LOCKED`).
    MySql,
    /// A file the application owns, on this machine.
    Sqlite,
}

impl Kind {
    /// The kind a URL names: `postgres://` or `postgresql://`, `mysql://` or `mariadb://`,
    /// `sqlite://PATH`.
    pub fn of(url: &str) -> Result<Self, SourceError> {
        let scheme = url.split_once("://").map(|(scheme, _)| scheme);
        match scheme {
            Some("postgres" | "postgresql") => Ok(Self::Postgres),
            Some("mysql" | "mariadb") => Ok(Self::MySql),
            Some("sqlite") => Ok(Self::Sqlite),
            _ => Err(SourceError::Config(format!(
                "unsupported outbox source URL {:?}: use postgres://…, mysql://… (or \
                 mariadb://…) or sqlite://PATH",
                redacted(url)
            ))),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Postgres => "PostgreSQL",
            Self::MySql => "MySQL/MariaDB",
            Self::Sqlite => "SQLite",
        })
    }
}

/// An outbox source: `NAME=URL` (`--outbox-source`), and the application its rows go to when
/// it is bound to one (`--outbox-source-app NAME=APP`).
#[derive(Clone, PartialEq, Eq)]
pub struct SourceSpec {
    /// How logs and metrics name it: letters, digits, `_` and `-`, at most 64.
    pub name: String,
    pub url: String,
    pub kind: Kind,
    /// The application (id or uid) every row goes to; rows may then leave `app` NULL, and a
    /// row naming another application is refused. Without it each row names its own.
    pub app: Option<String>,
}

impl FromStr for SourceSpec {
    type Err = SourceError;

    fn from_str(spec: &str) -> Result<Self, SourceError> {
        let (name, url) = spec.split_once('=').ok_or_else(|| {
            SourceError::Config(format!(
                "outbox source {:?}: expected NAME=URL, e.g. orders=postgres://app@db/shop",
                redacted(spec)
            ))
        })?;
        check_name(name)?;
        Ok(Self {
            name: name.to_owned(),
            url: url.to_owned(),
            kind: Kind::of(url)?,
            app: None,
        })
    }
}

/// Checks a source's name: it labels metrics and log lines.
fn check_name(name: &str) -> Result<(), SourceError> {
    let fine = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if fine {
        Ok(())
    } else {
        Err(SourceError::Config(format!(
            "outbox source name {name:?}: use 1 to 64 letters, digits, `_` or `-`"
        )))
    }
}

impl SourceSpec {
    /// Binds the sources named in `bindings` (`NAME=APP` each) to their applications.
    pub fn bind_all(sources: &mut [SourceSpec], bindings: &[String]) -> Result<(), SourceError> {
        for binding in bindings {
            let (name, app) = binding
                .split_once('=')
                .filter(|(_, app)| !app.is_empty())
                .ok_or_else(|| {
                    SourceError::Config(format!(
                        "--outbox-source-app {binding:?}: expected NAME=APP (an application id or uid)"
                    ))
                })?;
            let source = sources
                .iter_mut()
                .find(|source| source.name == name)
                .ok_or_else(|| {
                    SourceError::Config(format!(
                        "--outbox-source-app {binding:?}: no --outbox-source is named {name:?}"
                    ))
                })?;
            source.app = Some(app.to_owned());
        }
        Ok(())
    }
}

/// Shown instead of the URL, which may carry a password.
impl fmt::Debug for SourceSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceSpec")
            .field("name", &self.name)
            .field("url", &redacted(&self.url))
            .field("app", &self.app)
            .finish()
    }
}

/// `url` with its password and secret query parameters replaced by `********`; any text
/// before the scheme (`NAME=` of a source) is kept ([`hookd_core::redact::url`]).
pub fn redacted(url: &str) -> String {
    hookd_core::redact::url(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_a_name_and_a_url_of_a_known_kind() {
        let spec: SourceSpec = "orders=postgres://app@db:5432/shop".parse().unwrap();
        assert_eq!(spec.name, "orders");
        assert_eq!(spec.url, "postgres://app@db:5432/shop");
        assert_eq!(spec.kind, Kind::Postgres);
        let kinds = [
            "x=mysql://root@h/d",
            "x=mariadb://h/d",
            "x=sqlite:///var/app.db",
        ]
        .map(|spec| spec.parse::<SourceSpec>().unwrap().kind);
        assert_eq!(kinds, [Kind::MySql, Kind::MySql, Kind::Sqlite]);
    }

    #[test]
    fn a_bad_source_says_what_is_wrong_and_never_shows_a_password() {
        let error = |spec: &str| spec.parse::<SourceSpec>().unwrap_err().to_string();
        assert!(error("postgres://u:secret@h/d").contains("NAME=URL"));
        assert!(!error("postgres://u:secret@h/d").contains("secret"));
        assert!(error("bad name=postgres://h/d").contains("source name"));
        let scheme = error("orders=redis://u:secret@h/0");
        assert!(
            scheme.contains("unsupported") && !scheme.contains("secret"),
            "{scheme}"
        );
    }

    #[test]
    fn a_binding_must_name_a_configured_source() {
        let mut sources = vec!["orders=sqlite:///a.db".parse::<SourceSpec>().unwrap()];
        SourceSpec::bind_all(&mut sources, &["orders=acme".into()]).unwrap();
        assert_eq!(sources[0].app.as_deref(), Some("acme"));
        let unknown = SourceSpec::bind_all(&mut sources, &["billing=acme".into()]).unwrap_err();
        assert!(
            unknown.to_string().contains("no --outbox-source"),
            "{unknown}"
        );
        assert!(SourceSpec::bind_all(&mut sources, &["orders=".into()]).is_err());
    }

    #[test]
    fn a_password_is_redacted_and_the_rest_kept() {
        assert_eq!(
            redacted("mysql://root:pw@127.0.0.1:3306/shop?ssl-mode=disabled"),
            "mysql://root:********@127.0.0.1:3306/shop?ssl-mode=disabled"
        );
        assert_eq!(redacted("postgres://app@db/shop"), "postgres://app@db/shop");
        assert_eq!(
            redacted("orders=postgres://app@db/shop?password=pw2"),
            "orders=postgres://app@db/shop?password=********"
        );
        assert_eq!(redacted("sqlite:///var/app.db"), "sqlite:///var/app.db");
    }
}
