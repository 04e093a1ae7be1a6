//! Which of an endpoint's custom headers carry credentials: those are sealed with its signing
//! keys (see [`crate::EndpointKeys::headers`]), not stored in clear, and shown to customers'
//! tokens by name only.
//!
//! A name is a credential's when its last word (split at `-` and `_`, any case) is one of
//! [`CREDENTIAL_WORDS`]: `Authorization`, `Proxy-Authorization`, `Cookie`, `X-Api-Key`,
//! `Api-Key`, `X-Auth-Token`, `X-Client-Secret`, `X-Webhook-Signature` and the like. A word
//! list errs on the side of sealing: a header sealed needlessly is still sent, and only its
//! value is hidden from customers. The operator names any other header (`--sensitive-header`).

use std::collections::BTreeMap;

/// The last words that make a header name a credential's.
pub const CREDENTIAL_WORDS: &[&str] = &[
    "authorization",
    "auth",
    "cookie",
    "token",
    "secret",
    "key",
    "apikey",
    "password",
    "passwd",
    "passphrase",
    "credential",
    "credentials",
    "signature",
    "session",
];

/// The rule for which header names carry credentials: [`CREDENTIAL_WORDS`] and the names the
/// operator adds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CredentialHeaders {
    /// The operator's names, lowercase.
    extra: Vec<String>,
}

impl CredentialHeaders {
    /// The built-in rule and the header names in `extra` (any case).
    pub fn new<S: AsRef<str>>(extra: impl IntoIterator<Item = S>) -> Self {
        Self {
            extra: extra
                .into_iter()
                .map(|name| name.as_ref().trim().to_ascii_lowercase())
                .filter(|name| !name.is_empty())
                .collect(),
        }
    }

    /// Whether a header called `name` carries a credential.
    pub fn covers(&self, name: &str) -> bool {
        let name = name.to_ascii_lowercase();
        let last_word = name.rsplit(['-', '_']).next().unwrap_or_default();
        CREDENTIAL_WORDS.contains(&last_word) || self.extra.contains(&name)
    }

    /// `headers` split into those kept in clear and those sealed, in that order.
    pub fn split(
        &self,
        headers: BTreeMap<String, String>,
    ) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
        headers
            .into_iter()
            .partition(|(name, _)| !self.covers(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names_are_known_by_their_last_word_in_any_case() {
        let rule = CredentialHeaders::default();
        for name in [
            "Authorization",
            "proxy-authorization",
            "Cookie",
            "X-Api-Key",
            "api-key",
            "APIKEY",
            "X-Auth-Token",
            "x_client_secret",
            "X-Hub-Signature",
            "X-Db-Password",
        ] {
            assert!(rule.covers(name), "{name}");
        }
        for name in [
            "X-Tenant",
            "Content-Language",
            "X-Token-Id",
            "Keyboard",
            "X-Monkey",
        ] {
            assert!(!rule.covers(name), "{name}");
        }
    }

    #[test]
    fn the_operator_adds_exact_names_and_split_keeps_the_rest_in_clear() {
        let rule = CredentialHeaders::new([" X-Shop-Pass ", ""]);
        assert!(rule.covers("x-shop-pass"));
        assert!(!rule.covers("X-Shop"), "exact names, not prefixes");
        let headers = BTreeMap::from([
            ("X-Shop-Pass".to_owned(), "p".to_owned()),
            ("Authorization".to_owned(), "Bearer t".to_owned()),
            ("X-Tenant".to_owned(), "42".to_owned()),
        ]);
        let (clear, sealed) = rule.split(headers);
        assert_eq!(clear.keys().collect::<Vec<_>>(), ["X-Tenant"]);
        assert_eq!(
            sealed.keys().collect::<Vec<_>>(),
            ["Authorization", "X-Shop-Pass"]
        );
    }
}
