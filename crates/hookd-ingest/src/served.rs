//! The source types hookd serves, each with the scheme that verifies it: one table that parsing
//! looks types up in, the refusal of any other type names, and the docs render.

use std::fmt::Write as _;

/// How requests of a source type are checked and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemeKind {
    /// Standard Webhooks `v1` (HMAC) or `v1a` (ed25519), under the `webhook-*` or the `svix-*`
    /// header names.
    StandardWebhooks,
    /// `Stripe-Signature: t=…,v1=…`.
    Stripe,
    /// `X-Hub-Signature-256: sha256=…`.
    Github,
    /// `X-Shopify-Hmac-Sha256: <base64>`.
    Shopify,
    /// `X-Slack-Signature: v0=…` with `X-Slack-Request-Timestamp`.
    Slack,
    /// No signature; optional HTTP basic auth and/or a required API-key header.
    Generic,
}

impl SchemeKind {
    /// The headers that carry the signature (or the credentials) of a request.
    pub fn signature_headers(self) -> &'static str {
        match self {
            Self::StandardWebhooks => {
                "`webhook-id`, `webhook-timestamp`, `webhook-signature` (or `svix-id`, `svix-timestamp`, `svix-signature`)"
            }
            Self::Stripe => "`Stripe-Signature`",
            Self::Github => "`X-Hub-Signature-256` (none when the source has no secret)",
            Self::Shopify => "`X-Shopify-Hmac-Sha256`",
            Self::Slack => "`X-Slack-Signature`, `X-Slack-Request-Timestamp`",
            Self::Generic => {
                "`Authorization: Basic …` when `basicAuth` is set; the `apiKey.header` header when `apiKey` is set"
            }
        }
    }

    /// Where the provider's event id (the deduplication key) is read.
    pub fn event_id_from(self) -> &'static str {
        match self {
            Self::StandardWebhooks => "`webhook-id` (`svix-id`)",
            Self::Stripe => "body `id`",
            Self::Github => "`X-GitHub-Delivery`",
            Self::Shopify => "`X-Shopify-Event-Id`, else `X-Shopify-Webhook-Id`",
            Self::Slack => "body `event_id`",
            Self::Generic => "`Idempotency-Key`",
        }
    }

    /// Where the provider's event type is read.
    pub fn event_type_from(self) -> &'static str {
        match self {
            Self::StandardWebhooks | Self::Stripe | Self::Generic => "body `type`",
            Self::Github => "`X-GitHub-Event`",
            Self::Shopify => "`X-Shopify-Topic`",
            Self::Slack => "body `event.type` (`type` outside `event_callback`)",
        }
    }

    /// How far, in seconds, a signed timestamp may be from now, if the scheme signs one.
    pub fn tolerance(self) -> Option<u64> {
        match self {
            Self::StandardWebhooks | Self::Stripe | Self::Slack => {
                Some(webhook_signature::clock::DEFAULT_TOLERANCE)
            }
            Self::Github | Self::Shopify | Self::Generic => None,
        }
    }
}

/// One source type hookd serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedType {
    /// The Svix Ingest `type`, e.g. `"stripe"`.
    pub kind: &'static str,
    /// The scheme its requests are checked with.
    pub scheme: SchemeKind,
}

const fn served(kind: &'static str, scheme: SchemeKind) -> ServedType {
    ServedType { kind, scheme }
}

/// The first five have schemes of their own; the rest are every type Svix's SDK configures
/// with `SvixConfig`, senders that sign as Svix does.
static SERVED: [ServedType; 22] = [
    served("generic-webhook", SchemeKind::Generic),
    served("stripe", SchemeKind::Stripe),
    served("github", SchemeKind::Github),
    served("shopify", SchemeKind::Shopify),
    served("slack", SchemeKind::Slack),
    served("svix", SchemeKind::StandardWebhooks),
    served("beehiiv", SchemeKind::StandardWebhooks),
    served("brex", SchemeKind::StandardWebhooks),
    served("clerk", SchemeKind::StandardWebhooks),
    served("guesty", SchemeKind::StandardWebhooks),
    served("incident-io", SchemeKind::StandardWebhooks),
    served("lithic", SchemeKind::StandardWebhooks),
    served("nash", SchemeKind::StandardWebhooks),
    served("open-ai", SchemeKind::StandardWebhooks),
    served("pleo", SchemeKind::StandardWebhooks),
    served("psi-fi", SchemeKind::StandardWebhooks),
    served("render", SchemeKind::StandardWebhooks),
    served("replicate", SchemeKind::StandardWebhooks),
    served("resend", SchemeKind::StandardWebhooks),
    served("safebase", SchemeKind::StandardWebhooks),
    served("sardine", SchemeKind::StandardWebhooks),
    served("stych", SchemeKind::StandardWebhooks),
];

/// Every source type hookd serves; any other `type` is refused when a source is written.
pub fn served_types() -> &'static [ServedType] {
    &SERVED
}

/// The served type named `kind`, if hookd serves it.
pub(crate) fn lookup(kind: &str) -> Option<&'static ServedType> {
    SERVED.iter().find(|served| served.kind == kind)
}

/// The served types' names, comma-separated, for the message refusing any other.
pub(crate) fn names() -> String {
    SERVED
        .iter()
        .map(|served| served.kind)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The table of served types and their headers, as Markdown (the docs show it).
pub fn served_types_markdown() -> String {
    let mut out = String::from(
        "| `type` | signature headers | replay window | event id from | event type from |\n\
         |---|---|---|---|---|\n",
    );
    for served in &SERVED {
        let scheme = served.scheme;
        let window = scheme
            .tolerance()
            .map_or_else(|| "none".to_owned(), |s| format!("±{s} s"));
        let _ = writeln!(
            out,
            "| `{}` | {} | {window} | {} | {} |",
            served.kind,
            scheme.signature_headers(),
            scheme.event_id_from(),
            scheme.event_type_from(),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_is_served_once() {
        let mut kinds: Vec<_> = SERVED.iter().map(|served| served.kind).collect();
        kinds.sort_unstable();
        kinds.dedup();
        assert_eq!(kinds.len(), SERVED.len());
        assert_eq!(lookup("stripe").unwrap().scheme, SchemeKind::Stripe);
        assert_eq!(
            lookup("clerk").unwrap().scheme,
            SchemeKind::StandardWebhooks
        );
        assert_eq!(lookup("hubspot"), None);
    }

    #[test]
    fn docs_ingest_sources_md_shows_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ingest-sources.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let (_, rest) = doc.split_once("<!-- served-types:begin -->\n").unwrap();
        let (shown, _) = rest.split_once("<!-- served-types:end -->").unwrap();
        assert!(
            shown == served_types_markdown(),
            "docs/ingest-sources.md differs from served_types(); its table should read:\n{}",
            served_types_markdown()
        );
    }
}
