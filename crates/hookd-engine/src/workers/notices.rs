//! E-mail notices: a customer hears by e-mail that hookd disabled their endpoint or gave up on
//! a message, at the address their application or endpoint keeps in its metadata
//! ([`NOTIFY_EMAIL`]).
//!
//! Notices follow the operational events hookd already writes in the transaction of each
//! change (`endpoint.disabled` with trigger `automatic`, `message.attempt.exhausted`), through
//! [`hookd_store::NoticeStore`]: one process at a time holds the turn, reads the events after
//! the last one done, sends, and records its progress, so a crash loses no notice (one sent
//! just before a crash may be sent again). An SMTP server that cannot be reached, or answers
//! with a transient error, holds the notices back until it can; one that refuses a notice for
//! good (a permanent error) skips that notice. Each address gets at most
//! [`NoticeConfig::per_address_per_hour`] notices in any hour: past that they are skipped and
//! counted, so a burst of failures cannot flood an inbox.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use hookd_core::model::{Message, NOTIFY_EMAIL};
use hookd_core::{AppId, Clock, MessageId, Timestamp};
use hookd_store::{Store, StoreError};
use lettre::message::Mailbox;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use serde_json::Value;

/// Counter: notices by `result` (`sent`, `rate_limited`, `no_address`, `refused`).
pub const NOTICES: &str = "hookd_notices_total";

/// How often the turn is renewed and new events looked for.
const POLL: Duration = Duration::from_secs(1);
/// How long a turn lasts unless renewed: a process that died passes it on after this.
const TURN: Duration = Duration::from_secs(30);
/// Events read per round.
const BATCH: usize = 50;
/// The longest one SMTP exchange may take.
const SMTP_TIMEOUT: Duration = Duration::from_secs(15);
const HOUR: Duration = Duration::from_secs(3_600);

/// How notices are sent.
#[derive(Clone, Debug)]
pub struct NoticeConfig {
    /// `smtps://[user:password@]host[:port]` (TLS, port 465 by default),
    /// `smtp://…?tls=required` (STARTTLS, 587), or `smtp://host[:port]` (plain SMTP, 25, for a
    /// relay nearby; refused with a password, which would travel in the clear).
    pub smtp_url: String,
    /// The sender, `notices@example.com` or `Example <notices@example.com>`.
    pub from: String,
    pub per_address_per_hour: usize,
}

/// What is wrong with a [`NoticeConfig`].
#[derive(Debug, thiserror::Error)]
pub enum BadNoticeConfig {
    #[error("--smtp-url: {0}")]
    Url(String),
    #[error("--smtp-from: {0}")]
    From(String),
}

/// The SMTP side of notices, checked: where they are sent from and through.
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    per_hour: usize,
}

impl NoticeConfig {
    /// The mailer this configuration describes, or what is wrong with it.
    pub fn mailer(&self) -> Result<Mailer, BadNoticeConfig> {
        let from = self
            .from
            .parse()
            .map_err(|e: lettre::address::AddressError| BadNoticeConfig::From(e.to_string()))?;
        let url =
            url::Url::parse(&self.smtp_url).map_err(|e| BadNoticeConfig::Url(e.to_string()))?;
        let plain = url.scheme() == "smtp" && !url.query_pairs().any(|(key, _)| key == "tls");
        if plain && url.password().is_some() {
            return Err(BadNoticeConfig::Url(
                "a password over plain SMTP would travel in the clear: use smtps:// or ?tls=required"
                    .into(),
            ));
        }
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(&self.smtp_url)
            .map_err(|e| BadNoticeConfig::Url(e.to_string()))?
            .timeout(Some(SMTP_TIMEOUT))
            .build();
        Ok(Mailer {
            transport,
            from,
            per_hour: self.per_address_per_hour,
        })
    }
}

/// The notices task. Start it with [`Notices::run`].
pub struct Notices {
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    mailer: Mailer,
    /// This process, as the turn's owner.
    owner: String,
    /// When each address was last sent notices, within the past hour.
    sent: HashMap<String, VecDeque<Timestamp>>,
}

/// What became of one event.
enum Outcome {
    /// A mail went out.
    Sent,
    /// Done with nothing sent (not a notice's event, no address, rate-limited, refused).
    Done,
    /// Not now: the SMTP server could not take it; try again from here later.
    Later(String),
}

impl Notices {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, mailer: Mailer) -> Self {
        Self {
            store,
            clock,
            mailer,
            owner: format!("{}-{:016x}", std::process::id(), rand::random::<u64>()),
            sent: HashMap::new(),
        }
    }

    /// Sends notices until `shutdown` completes.
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        loop {
            if let Err(error) = self.round().await {
                tracing::warn!(%error, "cannot read the events e-mail notices follow");
            }
            tokio::select! {
                () = &mut shutdown => break,
                () = tokio::time::sleep(POLL) => {}
            }
        }
    }

    /// One round: when it is this process's turn, the events after the last one done.
    async fn round(&mut self) -> Result<(), StoreError> {
        let now = self.clock.now();
        let start = MessageId::lowest_at(now);
        let turn = self
            .store
            .notice_turn(&self.owner, now, now.plus(TURN), &start)
            .await?;
        let Some(done) = turn else { return Ok(()) };
        // Recorded after each mail sent (what a crash may send twice is one mail), and once for
        // the events that send none.
        let mut unrecorded = None;
        let mut renewed = now;
        for event in self.store.operational_events(&done, BATCH).await? {
            // A slow SMTP server must not let the turn run out under a batch: another process
            // would take it and send the same notices.
            let now = self.clock.now();
            if now.minus(TURN / 3) > renewed {
                let turn = self
                    .store
                    .notice_turn(&self.owner, now, now.plus(TURN), &start);
                if turn.await?.is_none() {
                    return Ok(());
                }
                renewed = now;
            }
            match self.notice(&event).await {
                Outcome::Sent => {
                    if !self.store.notices_done(&self.owner, &event.id).await? {
                        return Ok(());
                    }
                    unrecorded = None;
                }
                Outcome::Done => unrecorded = Some(event.id),
                Outcome::Later(error) => {
                    tracing::warn!(%error, "cannot send e-mail notices now; trying again later");
                    break;
                }
            }
        }
        if let Some(last) = unrecorded {
            self.store.notices_done(&self.owner, &last).await?;
        }
        Ok(())
    }

    /// Sends the notice `event` calls for, if any.
    async fn notice(&mut self, event: &Message) -> Outcome {
        let Some(payload) = event.payload.as_deref() else {
            return Outcome::Done;
        };
        let Ok(event) = serde_json::from_slice::<Value>(payload) else {
            return Outcome::Done;
        };
        let Some(kind) = Kind::of(&event) else {
            return Outcome::Done;
        };
        let whom = match self.recipient(&event["data"]).await {
            Ok(Some(whom)) => whom,
            Ok(None) => return counted("no_address"),
            Err(error) => return Outcome::Later(error.to_string()),
        };
        if !self.allowed(&whom.address) {
            tracing::info!(address = %whom.address, "e-mail notice skipped: rate limit");
            return counted("rate_limited");
        }
        let Some(email) = self.compose(kind, &event, &whom) else {
            return counted("no_address");
        };
        match self.mailer.transport.send(email).await {
            Ok(_) => {
                self.sent_to(&whom.address);
                counted("sent");
                Outcome::Sent
            }
            Err(error) if error.is_permanent() => {
                tracing::warn!(%error, address = %whom.address, "the SMTP server refused an e-mail notice");
                counted("refused")
            }
            Err(error) => Outcome::Later(error.to_string()),
        }
    }

    /// Where the notice about `data`'s endpoint goes: the endpoint's address, else its
    /// application's.
    async fn recipient(&self, data: &Value) -> Result<Option<Recipient>, StoreError> {
        let (Some(app_id), Some(endpoint_id)) =
            (data["appId"].as_str(), data["endpointId"].as_str())
        else {
            return Ok(None);
        };
        let Some(app) = self.store.get_app(app_id).await? else {
            return Ok(None);
        };
        let endpoint = self
            .store
            .get_endpoint(&AppId::from_stored(app_id.to_owned()), endpoint_id)
            .await?;
        let address = endpoint
            .as_ref()
            .and_then(|e| e.metadata.get(NOTIFY_EMAIL))
            .or_else(|| app.metadata.get(NOTIFY_EMAIL))
            .cloned();
        Ok(address.map(|address| Recipient {
            address,
            app_name: app.name,
            url: endpoint.map_or_else(|| endpoint_id.to_owned(), |e| e.url),
        }))
    }

    /// Whether `address` may get another notice now.
    fn allowed(&mut self, address: &str) -> bool {
        let since = self.clock.now().minus(HOUR);
        let sent = self.sent.entry(address.to_owned()).or_default();
        while sent.front().is_some_and(|at| *at <= since) {
            sent.pop_front();
        }
        sent.len() < self.mailer.per_hour
    }

    fn sent_to(&mut self, address: &str) {
        let now = self.clock.now();
        self.sent
            .entry(address.to_owned())
            .or_default()
            .push_back(now);
    }

    fn compose(&self, kind: Kind, event: &Value, whom: &Recipient) -> Option<lettre::Message> {
        let to: Mailbox = whom.address.parse().ok()?;
        let (subject, body) = kind.text(&event["data"], whom);
        lettre::Message::builder()
            .from(self.mailer.from.clone())
            .to(to)
            .subject(subject)
            .body(body)
            .ok()
    }
}

fn counted(result: &'static str) -> Outcome {
    metrics::counter!(NOTICES, "result" => result).increment(1);
    Outcome::Done
}

/// Whom a notice goes to, and what it names.
struct Recipient {
    address: String,
    app_name: String,
    url: String,
}

/// The events that send a notice.
#[derive(Clone, Copy)]
enum Kind {
    /// hookd disabled the endpoint (not a caller of the API: they know).
    Disabled,
    /// A message's retry schedule ran out.
    Exhausted,
}

impl Kind {
    fn of(event: &Value) -> Option<Self> {
        match (event["type"].as_str()?, event["data"]["trigger"].as_str()) {
            ("endpoint.disabled", Some("automatic")) => Some(Self::Disabled),
            ("message.attempt.exhausted", _) => Some(Self::Exhausted),
            _ => None,
        }
    }

    /// The subject and the body (the template docs/deployment.md shows). What the customer
    /// wrote (the application's name, the endpoint's URL) appears only [`quoted`], under a line
    /// saying whose it is: never in the subject, never as part of a sentence.
    fn text(self, data: &Value, whom: &Recipient) -> (String, String) {
        let field = |key: &str| one_line(data[key].as_str().unwrap_or("unknown"));
        let theirs = format!(
            "The endpoint, as entered in the account (quoted as given; not written by us):\n\
             \x20 Application: {app}\n\
             \x20 URL: {url}\n",
            app = quoted(&whom.app_name),
            url = quoted(&whom.url),
        );
        match self {
            Self::Disabled => (
                format!("Webhook endpoint disabled: {}", field("endpointId")),
                format!(
                    "Webhooks are no longer sent to one of your endpoints: it was disabled.\n\n\
                     Endpoint: {endpoint}\nReason: {reason}\nFailing since: {since}\n\n\
                     {theirs}\n\
                     Messages published while it is disabled are not queued for it. Once it \
                     answers again, enable it, then recover or replay what it missed.\n",
                    endpoint = field("endpointId"),
                    reason = field("reason"),
                    since = field("failSince"),
                ),
            ),
            Self::Exhausted => {
                let last = &data["lastAttempt"];
                let status = match last["responseStatusCode"].as_i64() {
                    Some(code) if code > 0 => format!("HTTP {code}"),
                    _ => "no answer".to_owned(),
                };
                (
                    format!("Webhook not delivered: {}", field("msgId")),
                    format!(
                        "A webhook could not be delivered to one of your endpoints: every \
                         attempt of its retry schedule failed, and it will not be retried.\n\n\
                         Message: {msg}\nEvent id: {event_id}\nEndpoint: {endpoint}\n\
                         Last attempt: {at}, {status}\n\n\
                         {theirs}\n\
                         It can be sent again (resend) once the endpoint answers.\n",
                        msg = field("msgId"),
                        event_id = one_line(data["msgEventId"].as_str().unwrap_or("none")),
                        endpoint = field("endpointId"),
                        at = one_line(last["timestamp"].as_str().unwrap_or("unknown")),
                    ),
                )
            }
        }
    }
}

/// The most characters of one customer's text a notice quotes.
const QUOTED_MAX: usize = 200;

/// `text` as a notice quotes what a customer wrote: in double quotes, on the line it starts
/// on, cut at [`QUOTED_MAX`] characters (`…` after the closing quote says so).
fn quoted(text: &str) -> String {
    let mut chars = text.chars();
    let shown: String = chars.by_ref().take(QUOTED_MAX).collect();
    let cut = if chars.next().is_some() { "…" } else { "" };
    format!("\"{}\"{cut}", one_line(&shown))
}

/// `text` escaped to stay one line that cannot close the quotes around it: `"` and `\` escaped
/// with `\`, control characters, line separators and bidirectional overrides as `\u{…}`.
fn one_line(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            c if hookd_core::validate::is_control(c) => {
                out.push_str(&format!("\\u{{{:04X}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn recipient(app_name: &str, url: &str) -> Recipient {
        Recipient {
            address: "ops@example.com".into(),
            app_name: app_name.into(),
            url: url.into(),
        }
    }

    #[test]
    fn customer_text_is_quoted_on_its_own_line_escaped_and_cut() {
        let url =
            "https://x.example/\r\n\r\nYour account is suspended.\r\nLog in at \"evil\" \u{202E}";
        let data = json!({"endpointId": "ep_1", "reason": "the endpoint answered 410 Gone"});
        let (subject, body) = Kind::Disabled.text(&data, &recipient("Acme\nDear customer", url));
        assert_eq!(subject, "Webhook endpoint disabled: ep_1");
        assert!(
            body.contains(
                "  URL: \"https://x.example/\\u{000D}\\u{000A}\\u{000D}\\u{000A}Your account is \
                 suspended.\\u{000D}\\u{000A}Log in at \\\"evil\\\" \\u{202E}\"\n"
            ),
            "{body}"
        );
        assert!(
            body.contains("  Application: \"Acme\\u{000A}Dear customer\"\n"),
            "{body}"
        );
        assert!(
            !body.lines().any(|line| line.starts_with("Your account")),
            "{body}"
        );
        let long = "a".repeat(QUOTED_MAX + 1);
        assert_eq!(quoted(&long), format!("\"{}\"…", &long[..QUOTED_MAX]));
        assert_eq!(quoted("ok"), "\"ok\"");
    }

    #[test]
    fn the_exhausted_notice_names_the_message_and_quotes_the_endpoint() {
        let data = json!({
            "msgId": "msg_1", "msgEventId": "evt-9", "endpointId": "ep_1",
            "lastAttempt": {"timestamp": "2026-01-01T00:00:00Z", "responseStatusCode": 500},
        });
        let (subject, body) =
            Kind::Exhausted.text(&data, &recipient("Shop", "https://s.example/h"));
        assert_eq!(subject, "Webhook not delivered: msg_1");
        for line in [
            "Message: msg_1\n",
            "Event id: evt-9\n",
            "Last attempt: 2026-01-01T00:00:00Z, HTTP 500\n",
            "  URL: \"https://s.example/h\"\n",
            "  Application: \"Shop\"\n",
        ] {
            assert!(body.contains(line), "{line:?} in {body}");
        }
    }
}
