//! `hookd sign`, `verify` and `keygen`, run as the built binary.

use std::io::Write;
use std::process::{Command, Output, Stdio};

const SECRET_1: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const ID_1: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TS_1: &str = "1614265330";
const BODY_1: &str = r#"{"test": 2432232314}"#;
const SIG_1: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";

/// Runs hookd with `args`, feeding `stdin`.
fn hookd(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_hookd"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn stdout(output: &Output) -> &str {
    std::str::from_utf8(&output.stdout).unwrap().trim_end()
}

/// `hookd verify` with `key` of `body` under vector 1's id, at vector 1's time.
fn verify(key: &str, timestamp: &str, signature: &str, body: &str) -> Output {
    let args = ["verify", "--id", ID_1, "--now", TS_1, "--secret", key];
    hookd(
        &[
            &args[..],
            &["--timestamp", timestamp, "--signature", signature],
        ]
        .concat(),
        body,
    )
}

/// `hookd sign` of `body` with `keys` under vector 1's id and timestamp; the signature printed.
fn sign_1(keys: &[&str], body: &str) -> String {
    let mut args = vec!["sign", "--id", ID_1, "--timestamp", TS_1];
    keys.iter().for_each(|key| args.extend(["--secret", key]));
    let output = hookd(&args, body);
    assert!(output.status.success(), "{output:?}");
    stdout(&output).to_owned()
}

#[test]
fn vector_1_signs_and_verifies() {
    assert_eq!(sign_1(&[SECRET_1], BODY_1), SIG_1);
    let verified = verify(SECRET_1, TS_1, SIG_1, BODY_1);
    assert_eq!(
        (verified.status.code(), stdout(&verified)),
        (Some(0), "valid")
    );
}

#[test]
fn sign_then_verify_round_trips_at_the_current_time() {
    let signed = hookd(
        &["sign", "--secret", SECRET_1, "--id", "msg_1", "--headers"],
        "héllo\n",
    );
    assert!(signed.status.success());
    let lines: Vec<(&str, &str)> = stdout(&signed)
        .lines()
        .map(|line| line.split_once(": ").unwrap())
        .collect();
    let names: Vec<&str> = lines.iter().map(|(name, _)| *name).collect();
    assert_eq!(
        names,
        ["webhook-id", "webhook-timestamp", "webhook-signature"]
    );
    let args = [
        "verify",
        "--secret",
        SECRET_1,
        "--id",
        lines[0].1,
        "--timestamp",
        lines[1].1,
        "--signature",
        lines[2].1,
    ];
    let verified = hookd(&args, "héllo\n");
    assert_eq!(
        (verified.status.code(), stdout(&verified)),
        (Some(0), "valid")
    );
}

#[test]
fn failures_exit_1_with_the_reason() {
    let tampered = verify(SECRET_1, TS_1, SIG_1, r#"{"test": 2432232315}"#);
    assert_eq!(tampered.status.code(), Some(1));
    assert_eq!(stdout(&tampered), "invalid: no matching signature");
    let old = verify(SECRET_1, "1614265029", SIG_1, BODY_1);
    assert_eq!(old.status.code(), Some(1));
    assert!(
        stdout(&old).starts_with("invalid: timestamp too old"),
        "{}",
        stdout(&old)
    );
    let bad = verify(SECRET_1, "+1614265330", SIG_1, BODY_1);
    assert_eq!(
        stdout(&bad),
        "invalid: invalid timestamp: expected integer unix seconds"
    );
}

#[test]
fn bad_arguments_exit_2_with_a_clear_message() {
    let bad_secret = verify("whsec_!!", TS_1, SIG_1, BODY_1);
    assert_eq!(bad_secret.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&bad_secret.stderr);
    assert!(stderr.contains("secret is not valid base64"), "{stderr}");
    let dotted = hookd(&["sign", "--secret", SECRET_1, "--id", "a.b"], BODY_1);
    assert_eq!(dotted.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&dotted.stderr).contains("must not contain '.'"));
}

#[test]
fn keygen_output_parses_and_v1a_verifies_with_the_public_key() {
    let symmetric = hookd(&["keygen"], "");
    let secret = stdout(&symmetric);
    assert!(
        webhook_signature::Secret::parse_endpoint(secret).is_ok(),
        "{secret}"
    );

    let asymmetric = hookd(&["keygen", "--asymmetric"], "");
    let text = stdout(&asymmetric);
    let (secret, public) = text.split_once('\n').unwrap();
    let secret = secret.strip_prefix("secret: ").unwrap();
    let public = public.strip_prefix("public: ").unwrap();
    let pair = webhook_signature::Ed25519SecretKey::parse(secret).unwrap();
    assert_eq!(pair.public_key().to_string(), public);

    let signature = sign_1(&[secret], BODY_1);
    assert!(signature.starts_with("v1a,"), "{signature}");
    assert_eq!(stdout(&verify(public, TS_1, &signature, BODY_1)), "valid");
    assert_eq!(
        stdout(&verify(public, TS_1, &signature, "{}")),
        "invalid: no matching signature"
    );
}

#[test]
fn ed25519_vector_6_verifies_with_whpk() {
    let public = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=";
    let sig = "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==";
    assert_eq!(stdout(&verify(public, TS_1, sig, BODY_1)), "valid");
}

#[test]
fn several_keys_sign_one_entry_each() {
    let other = stdout(&hookd(&["keygen"], "")).to_owned();
    let signature = sign_1(&[&other, SECRET_1], BODY_1);
    assert_eq!(signature.split(' ').nth(1), Some(SIG_1));
    assert_eq!(stdout(&verify(SECRET_1, TS_1, &signature, BODY_1)), "valid");
}
