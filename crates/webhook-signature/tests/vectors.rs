//! The fixed vectors and negative cases of the project's signature reference (values copied
//! here so the tests stand alone).

use webhook_signature::{
    Ed25519PublicKey, Ed25519SecretKey, KeyError, Secret, SignError, Signer, SigningKey,
    TimeWindow, Verifier, VerifyError, VerifyingKey, github, header, shopify, slack, stripe,
};

const SECRET_1: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const ID_1: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
const TS_1: u64 = 1614265330;
const BODY_1: &[u8] = br#"{"test": 2432232314}"#;
const SIG_1: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
const WHSK_6: &str =
    "whsk_6Xb/dCcHpPea21PS1N9VY/NZW723CEc77N4rJCubMbfVKIDij2HKpMKkioLlX0dRqSKJp4AJ6p9lMicMFs6Kvg==";
const WHPK_6: &str = "whpk_1SiA4o9hyqTCpIqC5V9HUakiiaeACeqfZTInDBbOir4=";
const SIG_6: &str =
    "v1a,hnO3f9T8Ytu9HwrXslvumlUpqtNVqkhqw/enGzPCXe5BdqzCInXqYXFymVJaA7AZdpXwVLPo3mNl8EM+m7TBAg==";

/// Verifies with `key` at "now" = vector 1's timestamp.
fn verify_with(key: &str, id: &str, ts: &str, sig: &str, body: &[u8]) -> Result<(), VerifyError> {
    let headers = [
        (header::ID, id),
        (header::TIMESTAMP, ts),
        (header::SIGNATURE, sig),
    ];
    Verifier::new(VerifyingKey::parse(key).unwrap())
        .now(TS_1)
        .verify(body, headers)
}

/// Vector 1 with the given timestamp, signature and body.
fn verify_1(ts: &str, sig: &str, body: &[u8]) -> Result<(), VerifyError> {
    verify_with(SECRET_1, ID_1, ts, sig, body)
}

#[test]
fn hmac_vectors_sign_and_verify() {
    let a = |n| vec![b'a'; n];
    let vectors: [(&str, &str, u64, Vec<u8>, &str); 5] = [
        (SECRET_1, ID_1, TS_1, BODY_1.to_vec(), SIG_1),
        (
            "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
            "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
            1649367553,
            br#"{"email":"test@example.com","username":"test_user"}"#.to_vec(),
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=",
        ),
        (
            SECRET_1,
            ID_1,
            TS_1,
            a(262_143),
            "v1,NTItnqyWMoFhk2Bbe5V/BMdcFRWgcSQaTgqLHX7FC7c=",
        ),
        (
            SECRET_1,
            ID_1,
            TS_1,
            a(262_144),
            "v1,Mw4Pe2WgApuT7NSqnSq0PQPV9gbLdggCl9B865x5Xh0=",
        ),
        (
            SECRET_1,
            ID_1,
            TS_1,
            a(1_048_576),
            "v1,txpEUxqWZJ5nteTnymUVa+7C4NHpBeXJ6CsBAW0c3/A=",
        ),
    ];
    for (secret, id, ts, body, sig) in vectors {
        let key = SigningKey::parse(secret).unwrap();
        assert_eq!(key.sign(id, ts, &body).unwrap(), sig);
        let headers = [
            (header::ID, id),
            (header::TIMESTAMP, &ts.to_string()),
            (header::SIGNATURE, sig),
        ];
        assert_eq!(
            Verifier::new(key).now(ts).verify(&body, headers),
            Ok(()),
            "{sig}"
        );
    }
}

#[test]
fn ed25519_vector_signs_and_verifies_with_public_key() {
    let secret = Ed25519SecretKey::parse(WHSK_6).unwrap();
    assert_eq!(
        secret.public_key(),
        Ed25519PublicKey::parse(WHPK_6).unwrap()
    );
    assert_eq!(secret.public_key().to_string(), WHPK_6);
    assert_eq!(secret.to_string(), WHSK_6);
    assert_eq!(
        SigningKey::from(secret).sign(ID_1, TS_1, BODY_1).unwrap(),
        SIG_6
    );
    assert_eq!(
        verify_with(WHPK_6, ID_1, "1614265330", SIG_6, BODY_1),
        Ok(())
    );
    assert_eq!(
        verify_with(WHPK_6, ID_1, "1614265330", SIG_6, b"{}"),
        Err(VerifyError::NoMatchingSignature)
    );
    // A v1a entry is skipped by an HMAC verifier, a v1 entry by an ed25519 verifier.
    assert_eq!(
        verify_1("1614265330", SIG_6, BODY_1),
        Err(VerifyError::NoMatchingSignature)
    );
    assert_eq!(
        verify_with(WHPK_6, ID_1, "1614265330", SIG_1, BODY_1),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn empty_secrets_are_rejected() {
    assert_eq!(Secret::parse(""), Err(KeyError::Empty));
    assert_eq!(Secret::parse("whsec_"), Err(KeyError::Empty));
}

#[test]
fn each_missing_header_is_named() {
    let all = [
        (header::ID, ID_1),
        (header::TIMESTAMP, "1614265330"),
        (header::SIGNATURE, SIG_1),
    ];
    let verifier = Verifier::new(Secret::parse(SECRET_1).unwrap()).now(TS_1);
    for skip in 0..3 {
        let headers = all
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != skip)
            .map(|(_, h)| *h);
        assert_eq!(
            verifier.verify(BODY_1, headers),
            Err(VerifyError::MissingHeader(all[skip].0))
        );
    }
}

#[test]
fn reference_negative_cases_name_the_failed_check() {
    let ts = "1614265330";
    assert_eq!(
        verify_1("hello", SIG_1, BODY_1),
        Err(VerifyError::InvalidTimestamp)
    );
    let wrong = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OA=";
    assert_eq!(
        verify_1(ts, wrong, BODY_1),
        Err(VerifyError::NoMatchingSignature)
    );
    assert_eq!(
        verify_1(ts, "v1,", BODY_1),
        Err(VerifyError::NoMatchingSignature)
    );
    let v2 = SIG_1.replacen("v1,", "v2,", 1);
    assert_eq!(
        verify_1(ts, &v2, BODY_1),
        Err(VerifyError::NoMatchingSignature)
    );

    let signer = Signer::from(SigningKey::parse(SECRET_1).unwrap());
    let at = |offset: i64| {
        let ts = TS_1.checked_add_signed(offset).unwrap();
        verify_1(
            &ts.to_string(),
            &signer.signature(ID_1, ts, BODY_1).unwrap(),
            BODY_1,
        )
    };
    assert_eq!(at(-300), Ok(()));
    assert_eq!(at(300), Ok(()));
    let err = at(-301).unwrap_err();
    assert!(
        matches!(err, VerifyError::TimestampTooOld { tolerance: 300, .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "timestamp too old: 1614265029 is more than 300 s before now (1614265330)"
    );
    assert!(matches!(
        at(301),
        Err(VerifyError::TimestampTooNew { tolerance: 300, .. })
    ));
    assert_eq!(
        VerifyError::NoMatchingSignature.to_string(),
        "no matching signature"
    );
}

#[test]
fn tolerance_is_configurable() {
    let key = SigningKey::parse(SECRET_1).unwrap();
    let sig = key.sign(ID_1, TS_1, BODY_1).unwrap();
    let headers = [
        (header::ID, ID_1),
        (header::TIMESTAMP, "1614265330"),
        (header::SIGNATURE, &sig),
    ];
    let verifier = Verifier::new(key).tolerance(10);
    assert_eq!(
        verifier.clone().now(TS_1 + 10).verify(BODY_1, headers),
        Ok(())
    );
    assert!(matches!(
        verifier.now(TS_1 + 11).verify(BODY_1, headers),
        Err(VerifyError::TimestampTooOld { tolerance: 10, .. })
    ));
}

#[test]
fn reference_positive_cases() {
    let ts = "1614265330";
    let several = format!("v1,Zm9v v2,YmFy {SIG_1} v1,junk!");
    assert_eq!(verify_1(ts, &several, BODY_1), Ok(()));
    assert_eq!(
        verify_with("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", ID_1, ts, SIG_1, BODY_1),
        Ok(())
    );
    let mixed_case = [
        ("Webhook-ID", ID_1),
        ("WEBHOOK-timestamp", ts),
        ("wEbHoOk-SiGnAtUrE", SIG_1),
    ];
    let verifier = Verifier::new(Secret::parse(SECRET_1).unwrap()).now(TS_1);
    assert_eq!(verifier.verify(BODY_1, mixed_case), Ok(()));
    let empty = SigningKey::parse(SECRET_1)
        .unwrap()
        .sign(ID_1, TS_1, b"")
        .unwrap();
    assert_eq!(verify_1(ts, &empty, b""), Ok(()));
}

#[test]
fn tampering_is_rejected() {
    let ts = "1614265330";
    let no = Err(VerifyError::NoMatchingSignature);
    assert_eq!(verify_1(ts, SIG_1, br#"{"test": 2432232315}"#), no);
    assert_eq!(
        verify_with(SECRET_1, "msg_p5jXN8AQM9LWM0D4loKWxJeK", ts, SIG_1, BODY_1),
        no
    );
    assert_eq!(verify_1("1614265331", SIG_1, BODY_1), no);
    let other = Secret::generate().to_string();
    assert_eq!(verify_with(&other, ID_1, ts, SIG_1, BODY_1), no);
}

#[test]
fn signer_rejects_forbidden_ids_and_empty_key_sets() {
    let signer = Signer::from(SigningKey::parse(SECRET_1).unwrap());
    assert_eq!(
        signer.signature("msg.1", TS_1, BODY_1),
        Err(SignError::IdContainsDot)
    );
    assert_eq!(signer.signature("", TS_1, BODY_1), Err(SignError::EmptyId));
    assert_eq!(
        Signer::new([]).signature(ID_1, TS_1, BODY_1),
        Err(SignError::NoKeys)
    );
}

#[test]
fn rotation_signs_with_every_key_and_verifies_with_any() {
    let old = SigningKey::parse(SECRET_1).unwrap();
    let new = SigningKey::Hmac(Secret::generate());
    let ed = SigningKey::parse(WHSK_6).unwrap();
    let signer = Signer::new([old.clone(), new.clone(), ed.clone()]);
    let headers = signer.headers(ID_1, TS_1, BODY_1).unwrap();
    assert_eq!(headers.id, ID_1);
    assert_eq!(headers.timestamp, "1614265330");
    let entries: Vec<&str> = headers.signature.split(' ').collect();
    assert_eq!(entries.len(), 3);
    assert_eq!((entries[0], entries[2]), (SIG_1, SIG_6));
    for key in [old, new, ed] {
        assert_eq!(
            Verifier::new(key)
                .now(TS_1)
                .verify_headers(BODY_1, &headers),
            Ok(())
        );
    }
    let others = [
        VerifyingKey::Hmac(Secret::generate()),
        VerifyingKey::parse(SECRET_1).unwrap(),
    ];
    assert_eq!(
        Verifier::with_keys(others)
            .now(TS_1)
            .verify(BODY_1, headers.pairs()),
        Ok(())
    );
    let strangers = [VerifyingKey::Hmac(Secret::generate())];
    assert_eq!(
        Verifier::with_keys(strangers)
            .now(TS_1)
            .verify(BODY_1, headers.pairs()),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn stripe_vector() {
    let header = "t=1614265330,v1=2e37df5d4a028c51a7f3133d64ae1e300d2c2c900f1b1d49d4369ad2530f8964";
    assert_eq!(stripe::sign(SECRET_1, TS_1, BODY_1), header);
    let window = TimeWindow::default().now(TS_1);
    assert_eq!(stripe::verify(SECRET_1, header, BODY_1, &window), Ok(()));
    let several = format!("t=1614265330,v1=00ff,v0=abc,{},v1=zz", &header[13..]);
    assert_eq!(stripe::verify(SECRET_1, &several, BODY_1, &window), Ok(()));
    let no = Err(VerifyError::NoMatchingSignature);
    assert_eq!(stripe::verify(SECRET_1, header, b"{}", &window), no);
    assert_eq!(
        stripe::verify("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", header, BODY_1, &window),
        no
    );
    assert_eq!(
        stripe::verify(
            SECRET_1,
            &header.replace("1614265330", "1614265331"),
            BODY_1,
            &window
        ),
        no
    );
}

#[test]
fn stripe_checks_both_sides_of_the_window_and_header_shape() {
    let window = TimeWindow::default().now(TS_1);
    let at = |ts: u64| {
        stripe::verify(
            SECRET_1,
            &stripe::sign(SECRET_1, ts, BODY_1),
            BODY_1,
            &window,
        )
    };
    assert_eq!(at(TS_1 - 300), Ok(()));
    assert_eq!(at(TS_1 + 300), Ok(()));
    assert!(matches!(
        at(TS_1 - 301),
        Err(VerifyError::TimestampTooOld { .. })
    ));
    assert!(matches!(
        at(TS_1 + 301),
        Err(VerifyError::TimestampTooNew { .. })
    ));
    let err = stripe::verify(SECRET_1, "v1=00", BODY_1, &window).unwrap_err();
    assert_eq!(
        err.to_string(),
        "malformed header stripe-signature: no t= element"
    );
    assert_eq!(
        stripe::verify(SECRET_1, "t=+1614265330,v1=00", BODY_1, &window),
        Err(VerifyError::InvalidTimestamp)
    );
    assert_eq!(
        stripe::verify(SECRET_1, "t=1614265330", BODY_1, &window),
        Err(VerifyError::NoMatchingSignature)
    );
}

#[test]
fn github_vector() {
    let secret = "It's a Secret to Everybody";
    let header = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    assert_eq!(github::sign(secret, b"Hello, World!"), header);
    assert_eq!(github::verify(secret, header, b"Hello, World!"), Ok(()));
    assert_eq!(
        github::verify(
            secret,
            &header.to_uppercase().replace("SHA256", "sha256"),
            b"Hello, World!"
        ),
        Ok(())
    );
    let no = Err(VerifyError::NoMatchingSignature);
    assert_eq!(github::verify(secret, header, b"Hello, World?"), no);
    assert_eq!(
        github::verify("another secret", header, b"Hello, World!"),
        no
    );
    assert_eq!(github::verify(secret, "sha256=xyz", b"Hello, World!"), no);
    assert!(matches!(
        github::verify(secret, &header[7..], b"Hello, World!"),
        Err(VerifyError::MalformedHeader {
            header: "x-hub-signature-256",
            ..
        })
    ));
}

#[test]
fn shopify_vector() {
    // Computed with Python's `hmac` (base64 of HMAC-SHA256 over the body, key "hush").
    let (secret, body) = ("hush", br#"{"id":820982911946154508,"email":"jon@doe.ca"}"#);
    let header = "fp5HwmAHEVGQQwJU1KRpk57Ts2YHF6/TLOCczCtB5bs=";
    assert_eq!(shopify::sign(secret, body), header);
    assert_eq!(shopify::verify(secret, header, body), Ok(()));
    assert_eq!(
        shopify::verify(secret, header.trim_end_matches('='), body),
        Ok(())
    );
    let no = Err(VerifyError::NoMatchingSignature);
    assert_eq!(shopify::verify(secret, header, b"{}"), no);
    assert_eq!(shopify::verify("hush!", header, body), no);
    assert_eq!(shopify::verify(secret, "AAAA", body), no);
    assert!(matches!(
        shopify::verify(secret, "not base64!", body),
        Err(VerifyError::MalformedHeader {
            header: "x-shopify-hmac-sha256",
            ..
        })
    ));
}

/// Slack's documented example ("Verifying requests from Slack").
const SLACK_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
const SLACK_TS: u64 = 1531420618;
const SLACK_BODY: &[u8] = b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c";
const SLACK_SIG: &str = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503";

#[test]
fn slack_vector() {
    let window = TimeWindow::default().now(SLACK_TS);
    let verify = |secret: &str, sig: &str, ts: &str, body: &[u8]| {
        slack::verify(secret, sig, ts, body, &window)
    };
    let ts = SLACK_TS.to_string();
    assert_eq!(slack::sign(SLACK_SECRET, SLACK_TS, SLACK_BODY), SLACK_SIG);
    assert_eq!(verify(SLACK_SECRET, SLACK_SIG, &ts, SLACK_BODY), Ok(()));
    let no = Err(VerifyError::NoMatchingSignature);
    assert_eq!(verify(SLACK_SECRET, SLACK_SIG, &ts, b"token=x"), no);
    assert_eq!(verify("another", SLACK_SIG, &ts, SLACK_BODY), no);
    assert_eq!(
        verify(SLACK_SECRET, SLACK_SIG, "1531420619", SLACK_BODY),
        no
    );
    assert!(matches!(
        verify(SLACK_SECRET, &SLACK_SIG[3..], &ts, SLACK_BODY),
        Err(VerifyError::MalformedHeader {
            header: "x-slack-signature",
            ..
        })
    ));
    assert_eq!(
        verify(SLACK_SECRET, SLACK_SIG, "hello", SLACK_BODY),
        Err(VerifyError::InvalidTimestamp)
    );
}

#[test]
fn slack_checks_both_sides_of_the_window() {
    let window = TimeWindow::default().now(SLACK_TS);
    let at = |ts: u64| {
        let sig = slack::sign(SLACK_SECRET, ts, SLACK_BODY);
        slack::verify(SLACK_SECRET, &sig, &ts.to_string(), SLACK_BODY, &window)
    };
    assert_eq!(at(SLACK_TS - 300), Ok(()));
    assert_eq!(at(SLACK_TS + 300), Ok(()));
    assert!(matches!(
        at(SLACK_TS - 301),
        Err(VerifyError::TimestampTooOld { .. })
    ));
    assert!(matches!(
        at(SLACK_TS + 301),
        Err(VerifyError::TimestampTooNew { .. })
    ));
}
