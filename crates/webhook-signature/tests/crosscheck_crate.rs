//! Cross-check against code we did not write: the `standardwebhooks` crate (v1 only). Ours signs
//! and theirs verifies, theirs signs and ours verifies, and both sign identically. That crate
//! reads the system clock and needs UTF-8 bodies, so messages are stamped "now" and are text.

use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;
use standardwebhooks::Webhook;
use webhook_signature::{Secret, Signer, SigningKey, Verifier, clock, header};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn standardwebhooks_crate_agrees(
        secret in prop::collection::vec(any::<u8>(), 24..=64),
        id in "[A-Za-z0-9_-]{1,40}",
        age in -200..=200i64,
        body in prop_oneof![Just(String::new()), "\\PC{0,200}", "[ -~]{0,200}"],
    ) {
        let secret = Secret::from_bytes(secret);
        let theirs = Webhook::new(&secret.to_string()).unwrap();
        let ts = clock::unix_now().saturating_add_signed(age);

        let ours = Signer::from(SigningKey::Hmac(secret.clone())).headers(&id, ts, body.as_bytes()).unwrap();
        let their_signature = theirs.sign(&id, ts.try_into().unwrap(), body.as_bytes()).unwrap();
        prop_assert_eq!(&ours.signature, &their_signature);

        let mut map = HeaderMap::new();
        for (name, value) in ours.pairs() {
            map.insert(HeaderName::from_static(name), HeaderValue::from_str(value).unwrap());
        }
        prop_assert!(theirs.verify(body.as_bytes(), &map).is_ok());

        let headers = [(header::ID, id.as_str()), (header::TIMESTAMP, &ts.to_string()), (header::SIGNATURE, &their_signature)];
        prop_assert_eq!(Verifier::new(secret).verify(body.as_bytes(), headers), Ok(()));

        // And they reject what we reject: a changed body.
        let tampered = format!("{body}!");
        prop_assert!(theirs.verify(tampered.as_bytes(), &map).is_err());
    }
}
