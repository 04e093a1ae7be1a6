//! Table tests for the SSRF guard: every forbidden range, its borders, the IPv6 forms that
//! embed an IPv4 address, URL host spellings that reach loopback, and the allow-list.

use std::net::IpAddr;

use hookd_engine::http::ssrf::AddressPolicy;
use ipnet::IpNet;
use url::Url;

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn net(text: &str) -> IpNet {
    text.parse().unwrap()
}

/// (address, the range that refuses it)
const REFUSED: &[(&str, &str)] = &[
    ("0.0.0.0", "0.0.0.0/8"),
    ("0.255.255.255", "0.0.0.0/8"),
    ("10.0.0.5", "10.0.0.0/8"),
    ("10.255.255.255", "10.0.0.0/8"),
    ("100.64.0.1", "100.64.0.0/10"),
    ("100.127.255.255", "100.64.0.0/10"),
    ("127.0.0.1", "127.0.0.0/8"),
    ("127.255.255.254", "127.0.0.0/8"),
    ("169.254.169.254", "169.254.0.0/16"),
    ("172.16.0.1", "172.16.0.0/12"),
    ("172.31.255.255", "172.16.0.0/12"),
    ("192.0.0.8", "192.0.0.0/24"),
    ("192.0.2.1", "192.0.2.0/24"),
    ("192.88.99.1", "192.88.99.0/24"),
    ("192.168.1.1", "192.168.0.0/16"),
    ("198.18.0.1", "198.18.0.0/15"),
    ("198.19.255.255", "198.18.0.0/15"),
    ("198.51.100.7", "198.51.100.0/24"),
    ("203.0.113.9", "203.0.113.0/24"),
    ("224.0.0.1", "224.0.0.0/4"),
    ("239.255.255.250", "224.0.0.0/4"),
    ("240.0.0.1", "240.0.0.0/4"),
    ("255.255.255.255", "240.0.0.0/4"),
    ("::", "::/128"),
    ("::1", "::1/128"),
    ("fc00::1", "fc00::/7"),
    ("fdff:ffff::1", "fc00::/7"),
    ("fe80::1", "fe80::/10"),
    ("febf:ffff::1", "fe80::/10"),
    ("fec0::1", "fec0::/10"),
    ("feff::1", "fec0::/10"),
    ("ff02::1", "ff00::/8"),
    ("2001:db8::1", "2001:db8::/32"),
    ("2002:c000:204::1", "2002::/16"),
    ("100::1", "100::/64"),
    ("100::ffff:ffff:ffff:ffff", "100::/64"),
    ("2001::1", "2001::/23"),
    ("2001:1ff:ffff::1", "2001::/23"),
    ("64:ff9b:1::1", "64:ff9b:1::/48"),
    ("3fff::1", "3fff::/20"),
    ("3fff:fff::1", "3fff::/20"),
    ("5f00::1", "5f00::/16"),
    // IPv6 forms judged by the IPv4 address they embed.
    ("::ffff:127.0.0.1", "127.0.0.0/8"),
    ("::ffff:10.1.2.3", "10.0.0.0/8"),
    ("::ffff:169.254.169.254", "169.254.0.0/16"),
    ("::127.0.0.1", "127.0.0.0/8"),
    ("::192.168.0.1", "192.168.0.0/16"),
    ("::0.0.0.2", "0.0.0.0/8"),
    ("64:ff9b::127.0.0.1", "127.0.0.0/8"),
    ("64:ff9b::a9fe:a9fe", "169.254.0.0/16"),
];

const ALLOWED: &[&str] = &[
    "93.184.215.14",
    "1.1.1.1",
    "8.8.8.8",
    "9.255.255.255",
    "11.0.0.0",
    "100.63.255.255",
    "100.128.0.0",
    "126.255.255.255",
    "128.0.0.0",
    "169.253.255.255",
    "169.255.0.0",
    "172.15.255.255",
    "172.32.0.0",
    "192.0.1.1",
    "192.0.3.0",
    "192.88.98.255",
    "192.167.255.255",
    "192.169.0.0",
    "198.17.255.255",
    "198.20.0.0",
    "203.0.114.0",
    "223.255.255.255",
    "2606:4700::1111",
    "2001:4860:4860::8888",
    "2a00:1450:4001::1",
    "100:0:0:1::1",
    "2001:200::1",
    "2001:db9::1",
    "2003::1",
    "3fff:1000::1",
    "64:ff9b:2::1",
    "::ffff:93.184.215.14",
    "::8.8.8.8",
    "64:ff9b::8.8.8.8",
];

#[test]
fn every_forbidden_range_is_refused_by_default() {
    let policy = AddressPolicy::default();
    for &(address, range) in REFUSED {
        let refused = policy
            .check(ip(address))
            .expect_err(&format!("{address} should be refused"));
        assert_eq!(refused.address(), ip(address), "{address}");
        assert_eq!(refused.range(), net(range), "{address}");
    }
}

#[test]
fn public_addresses_are_allowed() {
    let policy = AddressPolicy::default();
    for &address in ALLOWED {
        assert_eq!(policy.check(ip(address)), Ok(()), "{address}");
    }
}

#[test]
fn refusals_say_which_address_and_why() {
    let policy = AddressPolicy::default();
    assert_eq!(
        policy.check(ip("10.0.0.5")).unwrap_err().to_string(),
        "refused 10.0.0.5 (private range 10.0.0.0/8); allow it with --allow-subnet"
    );
    assert_eq!(
        policy
            .check(ip("::ffff:127.0.0.1"))
            .unwrap_err()
            .to_string(),
        "refused ::ffff:127.0.0.1 (embeds 127.0.0.1, loopback range 127.0.0.0/8); \
         allow it with --allow-subnet"
    );
    assert_eq!(
        policy.check(ip("fe80::1")).unwrap_err().to_string(),
        "refused fe80::1 (link-local range fe80::/10); allow it with --allow-subnet"
    );
}

#[test]
fn the_allow_list_opens_only_its_ranges() {
    let policy = AddressPolicy::default()
        .allow(net("127.0.0.0/8"))
        .allow(net("10.1.0.0/16"));
    for allowed in ["127.0.0.1", "127.9.9.9", "::ffff:127.0.0.1", "10.1.2.3"] {
        assert_eq!(policy.check(ip(allowed)), Ok(()), "{allowed}");
    }
    for refused in ["10.2.0.1", "::1", "169.254.169.254", "192.168.0.1"] {
        assert!(policy.check(ip(refused)).is_err(), "{refused}");
    }
}

#[test]
fn an_allowed_ipv6_range_opens_its_own_addresses() {
    let policy = AddressPolicy::default().allow(net("::1/128"));
    assert_eq!(policy.check(ip("::1")), Ok(()));
    assert!(policy.check(ip("127.0.0.1")).is_err());
}

#[test]
fn a_disabled_policy_allows_everything() {
    let policy = AddressPolicy::disabled();
    for &(address, _) in REFUSED {
        assert_eq!(policy.check(ip(address)), Ok(()), "{address}");
    }
}

#[test]
fn every_spelling_of_a_forbidden_literal_host_is_refused() {
    let policy = AddressPolicy::default();
    for spelling in [
        "http://127.0.0.1/",
        "http://127.1/",
        "http://2130706433/",
        "http://0x7f.1/",
        "http://0x7f000001/",
        "http://017700000001/",
        "http://0177.0.0.1/",
        "http://%31%32%37.0.0.1/",
        "http://0/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://[::127.0.0.1]/",
        "https://[64:ff9b::7f00:1]:8443/",
        "http://169.254.169.254/latest/meta-data/",
        "https://user:pass@10.0.0.1:8080/hook",
    ] {
        let url = Url::parse(spelling).unwrap();
        assert!(
            policy.check_url_host(&url).is_err(),
            "{spelling} (parsed as {url}) should be refused"
        );
    }
}

#[test]
fn url_hosts_that_are_names_or_public_literals_pass() {
    let policy = AddressPolicy::default();
    for allowed in [
        "https://example.com/hook",
        "http://localhost/",
        "http://93.184.215.14/",
        "http://[2606:4700::1111]/",
    ] {
        let url = Url::parse(allowed).unwrap();
        assert_eq!(policy.check_url_host(&url), Ok(()), "{allowed}");
    }
}
