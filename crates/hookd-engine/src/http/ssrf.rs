//! The SSRF guard: which addresses a webhook delivery may connect to.
//!
//! Endpoint URLs come from customers, so without a guard hookd could be pointed at its own
//! loopback services, the private network it runs in, or a cloud metadata service. The
//! [`AddressPolicy`] refuses every address that is not globally routable (the table in the
//! delivery rules), unless an operator opens a range with `--allow-subnet` or turns the guard
//! off. Addresses that embed an IPv4 address (IPv4-mapped `::ffff:a.b.c.d`, the deprecated
//! IPv4-compatible `::a.b.c.d` and NAT64 `64:ff9b::/96`) are judged by that IPv4 address.
//!
//! Host names are checked where they are resolved (see `http`); IP-literal hosts never reach a
//! resolver, so [`AddressPolicy::check_url_host`] checks them after URL parsing.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use url::{Host, Url};

/// A range refused by default, with the words a refusal uses for it.
struct Forbidden<N> {
    net: N,
    kind: &'static str,
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8, kind: &'static str) -> Forbidden<Ipv4Net> {
    Forbidden {
        net: Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len),
        kind,
    }
}

const fn v6(segments: [u16; 8], len: u8, kind: &'static str) -> Forbidden<Ipv6Net> {
    let [a, b, c, d, e, f, g, h] = segments;
    Forbidden {
        net: Ipv6Net::new_assert(Ipv6Addr::new(a, b, c, d, e, f, g, h), len),
        kind,
    }
}

/// IPv4 ranges that are not globally routable.
const FORBIDDEN_V4: [Forbidden<Ipv4Net>; 15] = [
    v4(0, 0, 0, 0, 8, "\"this network\""),
    v4(10, 0, 0, 0, 8, "private"),
    v4(
        100,
        64,
        0,
        0,
        10,
        "shared address space (carrier-grade NAT)",
    ),
    v4(127, 0, 0, 0, 8, "loopback"),
    v4(169, 254, 0, 0, 16, "link-local (cloud metadata)"),
    v4(172, 16, 0, 0, 12, "private"),
    v4(192, 0, 0, 0, 24, "IETF protocol assignments"),
    v4(192, 0, 2, 0, 24, "documentation"),
    v4(192, 88, 99, 0, 24, "6to4 relay anycast"),
    v4(192, 168, 0, 0, 16, "private"),
    v4(198, 18, 0, 0, 15, "benchmarking"),
    v4(198, 51, 100, 0, 24, "documentation"),
    v4(203, 0, 113, 0, 24, "documentation"),
    v4(224, 0, 0, 0, 4, "multicast"),
    v4(240, 0, 0, 0, 4, "reserved"),
];

/// IPv6 ranges that are not globally routable.
const FORBIDDEN_V6: [Forbidden<Ipv6Net>; 13] = [
    v6([0, 0, 0, 0, 0, 0, 0, 0], 128, "unspecified"),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, "loopback"),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique local"),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local"),
    v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "site-local (deprecated)"),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast"),
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, "documentation"),
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, "6to4"),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only"),
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        "IETF protocol assignments",
    ),
    v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, "local-use NAT64"),
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, "documentation"),
    v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16, "segment routing (SRv6)"),
];

/// NAT64 well-known prefix `64:ff9b::/96`: the last 32 bits are an IPv4 address.
const NAT64: Ipv6Net = Ipv6Net::new_assert(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96);

/// Which addresses deliveries may connect to. The default refuses every range in the table
/// above; [`allow`](Self::allow) opens ranges and [`disabled`](Self::disabled) turns the guard
/// off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressPolicy {
    enabled: bool,
    allowed: Vec<IpNet>,
}

impl Default for AddressPolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            allowed: Vec::new(),
        }
    }
}

impl AddressPolicy {
    /// No guard at all: every address may be connected to.
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            allowed: Vec::new(),
        }
    }

    /// Opens `net` (an `--allow-subnet` value), keeping the guard on for everything else.
    pub fn allow(mut self, net: IpNet) -> Self {
        self.allowed.push(net);
        self
    }

    /// Whether `address` may be connected to.
    pub fn check(&self, address: IpAddr) -> Result<(), Refused> {
        if !self.enabled {
            return Ok(());
        }
        let embedded = embedded_ipv4(address);
        let judged = embedded.map_or(address, IpAddr::V4);
        let Some((range, kind)) = forbidden_range(judged) else {
            return Ok(());
        };
        if self.is_allowed(address) || self.is_allowed(judged) {
            return Ok(());
        }
        Err(Refused {
            host: None,
            address,
            embedded,
            range,
            kind,
        })
    }

    /// Checks a URL whose host is an IP literal (`http://127.0.0.1`, `http://2130706433`,
    /// `http://[::ffff:127.0.0.1]`, ...): HTTP clients connect to those without resolving, so
    /// no resolver-side check sees them. Host names pass here; they are checked on resolution.
    pub fn check_url_host(&self, url: &Url) -> Result<(), Refused> {
        match url.host() {
            Some(Host::Ipv4(ip)) => self.check(IpAddr::V4(ip)),
            Some(Host::Ipv6(ip)) => self.check(IpAddr::V6(ip)),
            Some(Host::Domain(_)) | None => Ok(()),
        }
    }

    fn is_allowed(&self, address: IpAddr) -> bool {
        self.allowed.iter().any(|net| net.contains(&address))
    }
}

/// The IPv4 address an IPv6 address stands for, if it embeds one: IPv4-mapped, NAT64 or the
/// deprecated IPv4-compatible form (`::` and `::1` excepted: they are IPv6's own).
fn embedded_ipv4(address: IpAddr) -> Option<Ipv4Addr> {
    let IpAddr::V6(v6) = address else {
        return None;
    };
    if let Some(mapped) = v6.to_ipv4_mapped() {
        return Some(mapped);
    }
    let segments = v6.segments();
    let compatible = segments[..6] == [0; 6] && !matches!(segments[6..], [0, 0 | 1]);
    (compatible || NAT64.contains(&v6)).then(|| low_32_bits(v6))
}

fn low_32_bits(v6: Ipv6Addr) -> Ipv4Addr {
    let [.., a, b, c, d] = v6.octets();
    Ipv4Addr::new(a, b, c, d)
}

/// The forbidden range holding `address`, and what kind of range it is.
fn forbidden_range(address: IpAddr) -> Option<(IpNet, &'static str)> {
    match address {
        IpAddr::V4(ip) => FORBIDDEN_V4
            .iter()
            .find(|range| range.net.contains(&ip))
            .map(|range| (IpNet::V4(range.net), range.kind)),
        IpAddr::V6(ip) => FORBIDDEN_V6
            .iter()
            .find(|range| range.net.contains(&ip))
            .map(|range| (IpNet::V6(range.net), range.kind)),
    }
}

/// An address the [`AddressPolicy`] refused, with the range that made it so. Its message names
/// the host (when a name was resolved), the address and the range, e.g. `refused 10.0.0.5
/// (private range 10.0.0.0/8); allow it with --allow-subnet`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct Refused {
    host: Option<String>,
    address: IpAddr,
    embedded: Option<Ipv4Addr>,
    range: IpNet,
    kind: &'static str,
}

impl Refused {
    /// The refused address.
    pub fn address(&self) -> IpAddr {
        self.address
    }

    /// The forbidden range it falls in (for an embedded IPv4 address, the IPv4 range).
    pub fn range(&self) -> IpNet {
        self.range
    }

    /// The same refusal, saying which host name resolved to the address.
    pub(crate) fn for_host(self, host: &str) -> Self {
        Self {
            host: Some(host.to_owned()),
            ..self
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("refused ")?;
        if let Some(host) = &self.host {
            write!(f, "{host}: it resolves to ")?;
        }
        write!(f, "{} (", self.address)?;
        if let Some(embedded) = self.embedded {
            write!(f, "embeds {embedded}, ")?;
        }
        write!(
            f,
            "{} range {}); allow it with --allow-subnet",
            self.kind, self.range
        )
    }
}
