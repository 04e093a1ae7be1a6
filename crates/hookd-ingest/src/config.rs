//! A source's `type` and `config` as hookd keeps them: parsed once when the source is written
//! (so a bad secret is a 422 then, not a 401 on every request later), answered without secrets,
//! stored with them.

use serde_json::Value;

use crate::scheme::Scheme;
use crate::served::{self, ServedType};
use crate::{Accepted, InboundRequest, Rejection, SchemeKind};

/// A source's `type` or `config` could not be used; `field` names the part at fault (`type`,
/// `config`, `config.secret`, …) for the API's 422.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// The field at fault, as a JSON path from the source (`type`, `config.secret`).
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl ConfigError {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// A source's verification settings: its served type and the scheme's parsed configuration.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    served: &'static ServedType,
    scheme: Scheme,
}

impl SourceConfig {
    /// Parses a source's `type` and `config` (`Value::Null` when the request had none). A type
    /// hookd does not serve is refused naming `type` and listing the served ones.
    pub fn parse(kind: &str, config: &Value) -> Result<Self, ConfigError> {
        let served = served::lookup(kind).ok_or_else(|| {
            ConfigError::new(
                "type",
                format!(
                    "source type `{kind}` is not served by hookd; served types: {}",
                    served::names()
                ),
            )
        })?;
        let scheme = Scheme::parse(served.scheme, config)?;
        Ok(Self { served, scheme })
    }

    /// The source's `type`.
    pub fn kind(&self) -> &str {
        self.served.kind
    }

    /// The scheme its requests are checked with.
    pub fn scheme(&self) -> SchemeKind {
        self.served.scheme
    }

    /// The `config` an API answer shows: Svix's `*ConfigOut` models are empty, so no secret is
    /// ever answered; a generic source shows which credentials it requires, without them.
    pub fn to_out(&self) -> Value {
        self.scheme.out()
    }

    /// The `config` to store, secrets included: [`SourceConfig::parse`] of it gives this
    /// configuration back.
    pub fn to_stored(&self) -> Value {
        self.scheme.stored()
    }

    /// Checks `req` against the source's scheme and reads the provider's event id and type.
    pub fn verify(&self, req: &InboundRequest<'_>) -> Result<Accepted, Rejection> {
        self.scheme.verify(req, self.served.kind)
    }
}
