//! `hookd listen`: a local receiver for development, the habit `stripe listen` taught. It
//! prints each delivery (headers, the body indented without being re-serialized, and whether
//! the signature verified and why not) and answers the way the developer chose: at once or
//! late, failing the first attempts of each message, with `Retry-After` or a redirect. So a
//! developer can watch hookd deliver, retry and give up without writing a receiver first.
//!
//! With a secret, a delivery whose signature does not verify is answered 401 whatever the
//! chosen answer, as a real receiver must, so the sender records a failure and never a
//! success for a forged or mis-signed request.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use hookd_core::parse_duration;
use hookd_receiver::WebhookVerifier;
use webhook_signature::clock;

use super::database::runtime;
use super::usage_error;

/// Receive webhooks locally: print each one, verify it if given a secret, answer as chosen.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Port to listen on (0: any free port; the address is printed first).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    host: IpAddr,
    /// Key to verify with (whsec_… for v1, whpk_… for v1a; the whole secret for Stripe and
    /// GitHub). Repeat during a rotation. Without one, signatures are shown but not checked;
    /// with one, a delivery that does not verify is answered 401.
    #[arg(long = "secret", value_name = "KEY")]
    secrets: Vec<String>,
    /// How the sender signs.
    #[arg(long, value_enum, default_value_t = Scheme::Standard)]
    scheme: Scheme,
    #[command(flatten)]
    answer: AnswerArgs,
    /// Seconds a signed timestamp may be from now, in either direction.
    #[arg(long, value_name = "SECS", default_value_t = clock::DEFAULT_TOLERANCE)]
    tolerance: u64,
}

/// How `listen` answers a delivery that verified (or was not checked).
#[derive(Debug, clap::Args)]
struct AnswerArgs {
    /// HTTP status to answer with (e.g. 500 or 429 to watch retries, 410 to see an endpoint
    /// disabled, 301 with --location to see a redirect refused).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u16).range(100..=599))]
    status: u16,
    /// Answer the first N attempts of each message (by `webhook-id`) with 500, then --status.
    #[arg(long, value_name = "N", default_value_t = 0)]
    fail: u32,
    /// Wait this long before answering (`20s`, `2m`), to see hookd's timeout.
    #[arg(long, value_name = "DURATION", value_parser = parse_delay)]
    delay: Option<Duration>,
    /// Add `Retry-After: SECS` to every answer that is not a success.
    #[arg(long, value_name = "SECS")]
    retry_after: Option<u64>,
    /// Add `Location: URL` to every answer (with --status 301 or another redirect).
    #[arg(long, value_name = "URL")]
    location: Option<String>,
}

fn parse_delay(text: &str) -> Result<Duration, String> {
    parse_duration(text).map_err(|err| err.to_string())
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Scheme {
    /// Standard Webhooks (hookd, Svix): webhook-id, webhook-timestamp, webhook-signature.
    Standard,
    /// Stripe-Signature.
    Stripe,
    /// X-Hub-Signature-256.
    Github,
}

/// The answer chosen on the command line, checked once at start.
struct Answer {
    status: StatusCode,
    fail: u32,
    delay: Option<Duration>,
    retry_after: Option<HeaderValue>,
    location: Option<HeaderValue>,
}

impl Answer {
    fn from_args(args: AnswerArgs) -> Result<Self, String> {
        let header = |flag: &str, value: String| {
            HeaderValue::try_from(value).map_err(|_| format!("{flag}: not a valid header value"))
        };
        Ok(Self {
            status: StatusCode::from_u16(args.status).expect("range-checked by clap"),
            fail: args.fail,
            delay: args.delay,
            retry_after: args.retry_after.map(HeaderValue::from),
            location: args
                .location
                .map(|url| header("--location", url))
                .transpose()?,
        })
    }

    /// The status for the `attempt`th request (from 1) of one message.
    fn status_for(&self, attempt: u32) -> StatusCode {
        if attempt <= self.fail {
            StatusCode::INTERNAL_SERVER_ERROR
        } else {
            self.status
        }
    }

    /// How `listen` announces itself: what it answers, in words.
    fn describe(&self) -> String {
        let mut words = String::new();
        if self.fail > 0 {
            let _ = write!(
                words,
                "500 to the first {} attempt(s) of each message, then ",
                self.fail
            );
        }
        let _ = write!(words, "{}", self.status.as_u16());
        if let Some(delay) = self.delay {
            let _ = write!(words, " after {delay:?}");
        }
        words
    }

    fn respond(&self, status: StatusCode) -> Response {
        let mut response = status.into_response();
        let headers = response.headers_mut();
        if let (Some(value), false) = (&self.retry_after, status.is_success()) {
            headers.insert(header::RETRY_AFTER, value.clone());
        }
        if let Some(value) = &self.location {
            headers.insert(header::LOCATION, value.clone());
        }
        response
    }
}

/// What `listen` remembers of one message: how many attempts arrived and the last one's
/// signed timestamp, to show the sender's retry delays.
#[derive(Default)]
struct Seen {
    attempts: u32,
    last_timestamp: Option<i64>,
}

struct Listener {
    verifier: Option<WebhookVerifier>,
    answer: Answer,
    received: AtomicU64,
    in_flight: AtomicU64,
    messages: Mutex<HashMap<String, Seen>>,
}

pub fn run(args: Args) -> ExitCode {
    let verifier = match (args.secrets.is_empty(), args.scheme) {
        (true, _) => None,
        (false, Scheme::Standard) => match WebhookVerifier::standard_from_strs(&args.secrets) {
            Ok(verifier) => Some(verifier),
            Err(err) => return usage_error(format_args!("--secret: {err}")),
        },
        (false, Scheme::Stripe) => Some(WebhookVerifier::stripe(args.secrets.clone())),
        (false, Scheme::Github) => Some(WebhookVerifier::github(args.secrets.clone())),
    };
    let answer = match Answer::from_args(args.answer) {
        Ok(answer) => answer,
        Err(err) => return usage_error(err),
    };
    let listener = Arc::new(Listener {
        verifier: verifier.map(|v| v.tolerance(args.tolerance)),
        answer,
        received: AtomicU64::new(0),
        in_flight: AtomicU64::new(0),
        messages: Mutex::default(),
    });
    match runtime().block_on(listen(SocketAddr::new(args.host, args.port), listener)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn listen(address: SocketAddr, listener: Arc<Listener>) -> std::io::Result<()> {
    let socket = tokio::net::TcpListener::bind(address).await?;
    println!(
        "hookd listen: receiving on http://{} (any path), answering {}{}",
        socket.local_addr()?,
        listener.answer.describe(),
        if listener.verifier.is_some() {
            "; 401 when the signature does not verify"
        } else {
            "; signatures not checked (no --secret)"
        }
    );
    std::io::stdout().flush()?;
    let app = axum::Router::new().fallback(receive).with_state(listener);
    axum::serve(socket, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}

async fn receive(
    State(listener): State<Arc<Listener>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let n = listener.received.fetch_add(1, Ordering::Relaxed) + 1;
    let mut pending = Pending::enter(listener.clone(), n);
    let verified = listener
        .verifier
        .as_ref()
        .map(|verifier| verifier.verify(&headers, body.clone()).map(drop));
    let attempt = listener.note_attempt(&headers);
    let status = match &verified {
        Some(Err(_)) => StatusCode::UNAUTHORIZED,
        _ => listener.answer.status_for(attempt.number),
    };

    let mut report = format!("━━ #{n} {method} {uri} ━━\n");
    let _ = writeln!(report, "in flight: {}{attempt}", pending.in_flight);
    for (name, value) in &headers {
        let _ = writeln!(
            report,
            "{name}: {}",
            String::from_utf8_lossy(value.as_bytes())
        );
    }
    report.push('\n');
    report.push_str(&pretty_body(&body));
    let verdict = match &verified {
        None => "not checked (no --secret)".to_owned(),
        Some(Ok(())) => "yes".to_owned(),
        Some(Err(err)) => format!("NO: {err}"),
    };
    let _ = write!(report, "\nverified: {verdict}\n");
    match listener
        .answer
        .delay
        .filter(|_| status != StatusCode::UNAUTHORIZED)
    {
        None => {
            let _ = write!(report, "answered: {}\n\n", status.as_u16());
            print(&report);
        }
        Some(delay) => {
            let _ = write!(report, "answering: {} in {delay:?}\n\n", status.as_u16());
            print(&report);
            tokio::time::sleep(delay).await;
            print(&format!(
                "━━ #{n} answered: {} after {:.1?}\n\n",
                status.as_u16(),
                pending.started.elapsed()
            ));
        }
    }
    pending.answered = true;
    listener.answer.respond(status)
}

/// One request being answered: counted in flight until it is dropped, which also tells when
/// the sender hung up (its timeout) before a delayed answer.
struct Pending {
    listener: Arc<Listener>,
    n: u64,
    in_flight: u64,
    started: Instant,
    answered: bool,
}

impl Pending {
    fn enter(listener: Arc<Listener>, n: u64) -> Self {
        let in_flight = listener.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        Self {
            listener,
            n,
            in_flight,
            started: Instant::now(),
            answered: false,
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.listener.in_flight.fetch_sub(1, Ordering::SeqCst);
        if !self.answered {
            print(&format!(
                "━━ #{} the sender hung up after {:.1?}, before the answer\n\n",
                self.n,
                self.started.elapsed()
            ));
        }
    }
}

/// Which attempt of its message a request is, for the report line and for `--fail`.
struct Attempt {
    /// The message's `webhook-id`, if the request carried one.
    id: Option<String>,
    /// 1 for the first request with this `webhook-id` (every request without one is a 1).
    number: u32,
    /// Seconds between this attempt's signed timestamp and the previous one's: the sender's
    /// retry delay, on the sender's clock.
    after_previous: Option<i64>,
}

impl std::fmt::Display for Attempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(id) = &self.id else { return Ok(()) };
        write!(f, " · attempt {} of {id}", self.number)?;
        if let Some(seconds) = self.after_previous {
            write!(f, ", {seconds} s after the previous (by webhook-timestamp)")?;
        }
        Ok(())
    }
}

impl Listener {
    fn note_attempt(&self, headers: &HeaderMap) -> Attempt {
        let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        let Some(id) = text("webhook-id") else {
            return Attempt {
                id: None,
                number: 1,
                after_previous: None,
            };
        };
        let timestamp = text("webhook-timestamp").and_then(|t| t.parse::<i64>().ok());
        let mut messages = self.messages.lock().expect("not poisoned");
        let seen = messages.entry(id.to_owned()).or_default();
        seen.attempts += 1;
        let after_previous = seen
            .last_timestamp
            .zip(timestamp)
            .map(|(last, now)| now - last);
        seen.last_timestamp = timestamp.or(seen.last_timestamp);
        Attempt {
            id: Some(id.to_owned()),
            number: seen.attempts,
            after_previous,
        }
    }
}

fn print(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// The body for a person: JSON indented by two spaces without parsing it into values (key order
/// and number spelling stay exactly as sent), anything else as text.
fn pretty_body(body: &[u8]) -> String {
    let Ok(text) = std::str::from_utf8(body) else {
        return format!("({} bytes, not UTF-8)", body.len());
    };
    if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len() * 2);
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut chars = text.trim().chars().peekable();
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.push_str(&"  ".repeat(depth));
    };
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                while chars.next_if(|c| c.is_whitespace()).is_some() {}
                if let Some(close) = chars.next_if(|&n| n == '}' || n == ']') {
                    out.push(close);
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::pretty_body;

    #[test]
    fn json_is_indented_with_order_and_spelling_kept() {
        let body = br#"{"z":1.50,"a":[1, {}, []],"s":"x,{\"y\": [}"}"#;
        assert_eq!(
            pretty_body(body),
            "{\n  \"z\": 1.50,\n  \"a\": [\n    1,\n    {},\n    []\n  ],\n  \"s\": \"x,{\\\"y\\\": [}\"\n}"
        );
        assert_eq!(pretty_body(b"not json {"), "not json {");
        assert_eq!(pretty_body(b"\xff\xfe"), "(2 bytes, not UTF-8)");
    }
}
