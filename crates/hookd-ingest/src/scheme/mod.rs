//! Each scheme's configuration and check, behind one enum the source keeps: parsing picks the
//! variant from the served type, and verifying dispatches to the scheme's own file.

mod generic;
mod github;
mod shopify;
mod slack;
mod standard;
mod stripe;

use serde_json::{Value, json};
use webhook_signature::VerifyingKey;

use crate::fields::Fields;
use crate::{Accepted, ConfigError, InboundRequest, Rejection, SchemeKind};

/// A scheme's parsed configuration. Apart from the Standard Webhooks key and the generic
/// source's credentials, every scheme keys its MAC with the secret's text as given.
#[derive(Debug, Clone)]
pub(crate) enum Scheme {
    Standard {
        /// `config.secret` as given (`whsec_…` or `whpk_…`), kept to store it back.
        text: String,
        key: VerifyingKey,
    },
    Stripe(String),
    Github(Option<String>),
    Shopify(String),
    Slack(String),
    Generic(generic::Generic),
}

impl Scheme {
    pub(crate) fn parse(kind: SchemeKind, config: &Value) -> Result<Self, ConfigError> {
        let secret_only = || Fields::new("config", config, &["secret"]);
        Ok(match kind {
            SchemeKind::StandardWebhooks => {
                let text = secret_only()?.secret("secret")?;
                let key = standard::key(&text)?;
                Self::Standard { text, key }
            }
            SchemeKind::Stripe => Self::Stripe(secret_only()?.secret("secret")?),
            SchemeKind::Github => Self::Github(secret_only()?.optional_secret("secret")?),
            SchemeKind::Shopify => Self::Shopify(secret_only()?.secret("secret")?),
            SchemeKind::Slack => Self::Slack(secret_only()?.secret("secret")?),
            SchemeKind::Generic => Self::Generic(generic::Generic::parse(config)?),
        })
    }

    pub(crate) fn out(&self) -> Value {
        match self {
            Self::Generic(generic) => generic.out(),
            _ => json!({}),
        }
    }

    pub(crate) fn stored(&self) -> Value {
        match self {
            Self::Standard { text: secret, .. }
            | Self::Stripe(secret)
            | Self::Shopify(secret)
            | Self::Slack(secret)
            | Self::Github(Some(secret)) => json!({ "secret": secret }),
            Self::Github(None) => json!({}),
            Self::Generic(generic) => generic.stored(),
        }
    }

    /// Checks `req`; `kind` (the source's type) is the event type when the request names none.
    pub(crate) fn verify(
        &self,
        req: &InboundRequest<'_>,
        kind: &str,
    ) -> Result<Accepted, Rejection> {
        match self {
            Self::Standard { key, .. } => standard::verify(key, req, kind),
            Self::Stripe(secret) => stripe::verify(secret, req, kind),
            Self::Github(secret) => github::verify(secret.as_deref(), req, kind),
            Self::Shopify(secret) => shopify::verify(secret, req, kind),
            Self::Slack(secret) => slack::verify(secret, req, kind),
            Self::Generic(generic) => generic.verify(req, kind),
        }
    }
}
