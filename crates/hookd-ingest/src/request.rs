//! What a verifier is given (the request's headers and raw body, and "now") and what it answers:
//! the event it accepted, a challenge to answer, or why it refused, in terms the receive route
//! maps to HTTP and `/metrics` labels without knowing any scheme.

use webhook_signature::VerifyError;

/// An inbound request, as received.
#[derive(Debug, Clone, Copy)]
pub struct InboundRequest<'a> {
    /// Every header of the request.
    pub headers: &'a http::HeaderMap,
    /// The body exactly as received; signatures cover these bytes.
    pub body: &'a [u8],
    /// The current time in unix seconds, for the schemes that sign a timestamp.
    pub now: i64,
}

/// A request that passed its source's checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accepted {
    /// An event to keep and forward.
    Event {
        /// The provider's id of the event, the same on the provider's retries (the
        /// deduplication key), verbatim; `None` when the request carries none.
        event_id: Option<String>,
        /// The provider's event type as an event-type name hookd accepts (1..=256 of
        /// `[A-Za-z0-9._-]`): any other character becomes `.` (Shopify's `orders/create` is
        /// `orders.create`); the source's `type` when the request names none.
        event_type: String,
    },
    /// A handshake to answer with this body and nothing to keep (Slack's `url_verification`).
    Challenge {
        /// The answer's `Content-Type`.
        content_type: &'static str,
        /// The answer's body.
        body: Vec<u8>,
    },
}

impl Accepted {
    /// The event a request names: its id verbatim, its type made an event-type name (`kind`,
    /// the source's type, when it names none).
    pub(crate) fn event(event_id: Option<&str>, event_type: Option<&str>, kind: &str) -> Self {
        Self::Event {
            event_id: event_id.map(str::to_owned),
            event_type: crate::body::event_type(event_type, kind),
        }
    }
}

/// Why a request was refused (answered 401); a small closed set, fit for a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RejectReason {
    /// A header the scheme requires is absent.
    MissingSignature,
    /// No signature matches the source's secret.
    BadSignature,
    /// The signed timestamp is outside the replay window.
    StaleTimestamp,
    /// The basic-auth credentials or API key of a generic source are absent or wrong.
    Unauthorized,
    /// A header is present but not in its expected shape, or a handshake lacks its fields.
    Malformed,
}

impl RejectReason {
    /// Every reason, e.g. to register a counter for each before the first refusal.
    pub const ALL: [Self; 5] = [
        Self::MissingSignature,
        Self::BadSignature,
        Self::StaleTimestamp,
        Self::Unauthorized,
        Self::Malformed,
    ];

    /// The reason's snake_case name, as a metric label or in a JSON answer.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissingSignature => "missing_signature",
            Self::BadSignature => "bad_signature",
            Self::StaleTimestamp => "stale_timestamp",
            Self::Unauthorized => "unauthorized",
            Self::Malformed => "malformed",
        }
    }
}

/// A refused request: the reason, and a sentence for the record of the rejection (it names
/// headers and times, never the body or a secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {detail}", reason.as_str())]
pub struct Rejection {
    /// Which check failed.
    pub reason: RejectReason,
    /// What exactly was wrong.
    pub detail: String,
}

impl Rejection {
    pub(crate) fn new(reason: RejectReason, detail: impl Into<String>) -> Self {
        Self {
            reason,
            detail: detail.into(),
        }
    }
}

impl From<VerifyError> for Rejection {
    fn from(error: VerifyError) -> Self {
        let reason = match error {
            VerifyError::MissingHeader(_) => RejectReason::MissingSignature,
            VerifyError::MalformedHeader { .. } | VerifyError::InvalidTimestamp => {
                RejectReason::Malformed
            }
            VerifyError::TimestampTooOld { .. } | VerifyError::TimestampTooNew { .. } => {
                RejectReason::StaleTimestamp
            }
            VerifyError::NoMatchingSignature => RejectReason::BadSignature,
        };
        Self::new(reason, error.to_string())
    }
}

impl InboundRequest<'_> {
    /// The value of header `name`, if present; a value that is not visible ASCII is refused
    /// as malformed rather than ignored, so a mangled header is never read as an absent one.
    pub(crate) fn header(&self, name: &'static str) -> Result<Option<&str>, Rejection> {
        self.headers
            .get(name)
            .map(|value| {
                value.to_str().map_err(|_| {
                    Rejection::new(
                        RejectReason::Malformed,
                        format!("header {name} is not visible ASCII"),
                    )
                })
            })
            .transpose()
    }

    /// The value of header `name`, which the scheme requires.
    pub(crate) fn required(&self, name: &'static str) -> Result<&str, Rejection> {
        self.header(name)?
            .ok_or_else(|| VerifyError::MissingHeader(name).into())
    }

    /// "Now" for a time window (a clock before 1970 reads as 1970).
    pub(crate) fn now(&self) -> u64 {
        u64::try_from(self.now).unwrap_or(0)
    }

    /// The window signed timestamps must fall in: the default ±300 s around `now`.
    pub(crate) fn window(&self) -> webhook_signature::TimeWindow {
        webhook_signature::TimeWindow::default().now(self.now())
    }
}
