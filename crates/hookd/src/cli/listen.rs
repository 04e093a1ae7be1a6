//! `hookd listen`: a local receiver for development, the habit `stripe listen` taught. It
//! prints each delivery (headers, the body indented without being re-serialized, and whether
//! the signature verified and why not) and answers the status the developer chose, so they
//! can watch hookd deliver and try their retry handling without writing a receiver first.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use hookd_receiver::WebhookVerifier;
use webhook_signature::clock;

use super::database::runtime;
use super::usage_error;

/// Receive webhooks locally: print each one, verify it if given a secret, answer a status.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Port to listen on (0: any free port; the address is printed first).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    host: IpAddr,
    /// Key to verify with (whsec_… for v1, whpk_… for v1a; the whole secret for Stripe and
    /// GitHub). Repeat during a rotation. Without one, signatures are shown but not checked.
    #[arg(long = "secret", value_name = "KEY")]
    secrets: Vec<String>,
    /// How the sender signs.
    #[arg(long, value_enum, default_value_t = Scheme::Standard)]
    scheme: Scheme,
    /// HTTP status to answer every delivery with (e.g. 500 or 429 to watch retries, 410 to
    /// see an endpoint disabled).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u16).range(100..=599))]
    status: u16,
    /// Seconds a signed timestamp may be from now, in either direction.
    #[arg(long, value_name = "SECS", default_value_t = clock::DEFAULT_TOLERANCE)]
    tolerance: u64,
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

struct Listener {
    verifier: Option<WebhookVerifier>,
    status: StatusCode,
    received: AtomicU64,
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
    let listener = Arc::new(Listener {
        verifier: verifier.map(|v| v.tolerance(args.tolerance)),
        status: StatusCode::from_u16(args.status).expect("range-checked by clap"),
        received: AtomicU64::new(0),
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
        listener.status.as_u16(),
        if listener.verifier.is_some() {
            ""
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
) -> StatusCode {
    let n = listener.received.fetch_add(1, Ordering::Relaxed) + 1;
    let verdict = match &listener.verifier {
        None => "not checked (no --secret)".to_owned(),
        Some(verifier) => match verifier.verify(&headers, body.clone()) {
            Ok(_) => "yes".to_owned(),
            Err(err) => format!("NO: {err}"),
        },
    };
    let mut report = format!("━━ #{n} {method} {uri} ━━\n");
    for (name, value) in &headers {
        let _ = writeln!(
            report,
            "{name}: {}",
            String::from_utf8_lossy(value.as_bytes())
        );
    }
    report.push('\n');
    report.push_str(&pretty_body(&body));
    let _ = write!(
        report,
        "\nverified: {verdict}\nanswered: {}\n\n",
        listener.status.as_u16()
    );
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(report.as_bytes());
    let _ = stdout.flush();
    listener.status
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
