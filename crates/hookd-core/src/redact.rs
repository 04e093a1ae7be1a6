//! Masking the secrets a URL carries before it is printed or logged.
//!
//! Operators give hookd URLs with passwords in them (`--database`, `--outbox-source`,
//! `--smtp-url`): in the userinfo (`postgres://user:password@db/hookd`) or in the query
//! (`?password=…`, `?sslpassword=…`). hookd prints and logs those URLs (`hookd config show`,
//! start-up errors, the outbox relays' logs), and so do the drivers' error texts about them;
//! everything that writes one goes through here first.

/// What a secret is shown as.
pub const MASK: &str = "********";

/// `text` with the secrets of the URL in it masked: the password of its userinfo, and the
/// value of every query parameter named for a secret ([`is_secret_parameter`]). Anything
/// before the scheme (an outbox source's `NAME=`) and the rest of the URL are kept; text that
/// is not a URL comes back unchanged.
pub fn url(text: &str) -> String {
    let Some(scheme_end) = text.find("://") else {
        return text.to_owned();
    };
    let (head, rest) = text.split_at(scheme_end + 3);
    let (userinfo, place) = split_userinfo(rest);
    let mut out = String::with_capacity(text.len());
    out.push_str(head);
    if let Some(userinfo) = userinfo {
        match userinfo.split_once(':') {
            Some((user, _password)) => {
                out.push_str(user);
                out.push(':');
                out.push_str(MASK);
            }
            None => out.push_str(userinfo),
        }
        out.push('@');
    }
    match place.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            out.push_str(&masked_query(query));
        }
        None => out.push_str(place),
    }
    out
}

/// `text` (an error message, a log line) with every URL in it masked ([`urls_in`]), and with
/// the secrets of `url` masked wherever else they appear: a driver may quote a password or a
/// query parameter without the URL around it.
pub fn error_text(text: &str, url: &str) -> String {
    let mut text = urls_in(text);
    for secret in secrets(url) {
        text = text.replace(&secret, MASK);
    }
    text
}

/// `text` with every URL in it (`scheme://…`, up to white space or a quote) masked.
pub fn urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(found) = rest.find("://") {
        let start = rest[..found]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |before| before + 1);
        let end = rest[found..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>'))
            .map_or(rest.len(), |after| found + after);
        out.push_str(&rest[..start]);
        out.push_str(&url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Whether a query parameter named `name` carries a secret: its name, lowercased and without
/// `-` and `_`, contains `pass` (`password`, `sslpassword`, `passwd`), `pwd`, `secret`,
/// `token`, `apikey`, `accesskey` or `credential`.
pub fn is_secret_parameter(name: &str) -> bool {
    let name: String = name
        .chars()
        .filter(|c| !matches!(c, '-' | '_'))
        .flat_map(char::to_lowercase)
        .collect();
    [
        "pass",
        "pwd",
        "secret",
        "token",
        "apikey",
        "accesskey",
        "credential",
    ]
    .iter()
    .any(|word| name.contains(word))
}

/// A URL's part after `scheme://`, split into its userinfo (up to the last `@` before the
/// query, so a password holding `/`, `:` or `@` is masked whole) and the rest. A part that
/// starts with `/` (`sqlite:///path`) has no authority, so no userinfo.
fn split_userinfo(rest: &str) -> (Option<&str>, &str) {
    if rest.starts_with('/') {
        return (None, rest);
    }
    let before_query = rest.find('?').unwrap_or(rest.len());
    match rest[..before_query].rfind('@') {
        Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
        None => (None, rest),
    }
}

/// `query` with the values of secret parameters masked.
fn masked_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name, _)) if is_secret_parameter(name) => format!("{name}={MASK}"),
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The secrets `url` carries, as written and percent-decoded.
fn secrets(url: &str) -> Vec<String> {
    let Some(scheme_end) = url.find("://") else {
        return Vec::new();
    };
    let (userinfo, place) = split_userinfo(&url[scheme_end + 3..]);
    let password = userinfo.and_then(|u| u.split_once(':')).map(|(_, p)| p);
    let query = place.split_once('?').map_or("", |(_, q)| q);
    let parameters = query.split('&').filter_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        is_secret_parameter(name).then_some(value)
    });
    let mut found: Vec<String> = password
        .into_iter()
        .chain(parameters)
        .filter(|secret| !secret.is_empty())
        .flat_map(|secret| [secret.to_owned(), percent_decoded(secret)])
        .collect();
    // Longest first: a secret holding another is masked whole.
    found.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
    found.dedup();
    found
}

/// `text` with its `%XX` escapes decoded (invalid UTF-8 replaced).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_userinfo_password_is_masked_and_the_rest_kept() {
        assert_eq!(
            url("postgres://hookd:s3cret@db:5432/hookd?sslmode=require"),
            "postgres://hookd:********@db:5432/hookd?sslmode=require"
        );
        assert_eq!(url("postgres://hookd@db/x"), "postgres://hookd@db/x");
        assert_eq!(url("postgres://:pw@db/x"), "postgres://:********@db/x");
        assert_eq!(
            url("orders=mysql://root:pw@127.0.0.1:3306/shop"),
            "orders=mysql://root:********@127.0.0.1:3306/shop"
        );
        assert_eq!(url("sqlite:///var/a@b:c.db"), "sqlite:///var/a@b:c.db");
        assert_eq!(url("0.0.0.0:8071"), "0.0.0.0:8071");
    }

    #[test]
    fn a_password_holding_url_delimiters_is_masked_whole() {
        let masked = url("postgres://u:p/a@ss:w#rd@db/hookd");
        assert_eq!(masked, "postgres://u:********@db/hookd");
    }

    #[test]
    fn secret_query_parameters_are_masked_whatever_their_spelling() {
        assert_eq!(
            url("postgres://db/hookd?user=u&password=pw2&sslmode=require&sslpassword=k&PWD=x"),
            "postgres://db/hookd?user=u&password=********&sslmode=require\
             &sslpassword=********&PWD=********"
        );
        assert_eq!(
            url("mysql://h/d?ssl-mode=REQUIRED&auth_token=t&api-key=k&client_secret=s"),
            "mysql://h/d?ssl-mode=REQUIRED&auth_token=********&api-key=********\
             &client_secret=********"
        );
        assert!(is_secret_parameter("apikey") && is_secret_parameter("Access-Key"));
        assert!(!is_secret_parameter("sslmode") && !is_secret_parameter("sslrootcert"));
    }

    #[test]
    fn urls_inside_error_texts_are_masked() {
        assert_eq!(
            urls_in(r#"unsupported database URL "redis://u:pw@h/0?token=t": use postgres://…"#),
            r#"unsupported database URL "redis://u:********@h/0?token=********": use postgres://…"#
        );
        assert_eq!(
            urls_in("cannot reach x+y://a:b@h and mysql://c:d@h2\nthen"),
            "cannot reach x+y://a:********@h and mysql://c:********@h2\nthen"
        );
    }

    #[test]
    fn secrets_quoted_without_their_url_are_masked_too() {
        let database = "postgres://u:p%40ss@db/x?password=second";
        let text = "password p@ss refused; tried p%40ss, then second";
        assert_eq!(
            error_text(text, database),
            "password ******** refused; tried ********, then ********"
        );
        assert_eq!(
            error_text("no secret here", "sqlite:///a.db"),
            "no secret here"
        );
    }
}
