//! The proxies whose forwarded headers are believed, and the walk through what they
//! report.

use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net};

use super::InvalidNetwork;

/// Trusted proxy networks, host bits cleared, IPv4-mapped ones as IPv4.
#[derive(Clone, Debug, Default)]
pub(super) struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Also trusts `network`: see [`ClientIp::trust`](super::ClientIp::trust).
    pub(super) fn add(&mut self, network: &str) -> Result<(), InvalidNetwork> {
        self.0.push(parse_network(network)?);
        Ok(())
    }

    /// Whether `ip`, in canonical form, is in a trusted network.
    #[inline]
    pub(super) fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|network| network.contains(&ip))
    }

    /// The client of a request from the trusted proxy `peer` that reports `hops`, the
    /// forwarded list left to right: walked right to left, while the address at hand
    /// is trusted, the next one to the left is the one that proxy saw. A hop that is
    /// not an address ends the walk at the last address known.
    pub(super) fn walk(&self, peer: IpAddr, hops: Vec<Option<IpAddr>>) -> IpAddr {
        let mut client = peer;
        for hop in hops.into_iter().rev() {
            match hop {
                Some(ip) => client = ip.to_canonical(),
                None => break,
            }
            if !self.contains(client) {
                break;
            }
        }
        client
    }
}

/// An address (a network of one) or a CIDR network, with its host bits cleared.
fn parse_network(network: &str) -> Result<IpNet, InvalidNetwork> {
    let invalid = |reason| InvalidNetwork {
        input: network.to_owned(),
        reason,
    };
    let trimmed = network.trim();
    let parsed = match trimmed.split_once('/') {
        None => trimmed
            .parse::<IpAddr>()
            .map(IpNet::from)
            .map_err(|_| invalid("not an IP address")),
        // ipnet's error does not say which half is wrong: the address tells.
        Some((address, _)) => {
            trimmed
                .parse::<IpNet>()
                .map_err(|_| match address.parse::<IpAddr>() {
                    Ok(IpAddr::V4(_)) => invalid("the prefix length is not a number from 0 to 32"),
                    Ok(IpAddr::V6(_)) => invalid("the prefix length is not a number from 0 to 128"),
                    Err(_) => invalid("not an IP address"),
                })
        }
    }?;
    Ok(canonical(parsed).trunc())
}

/// An IPv4-mapped network (`::ffff:10.0.0.0/104`) as the IPv4 network it maps
/// (`10.0.0.0/8`): peers are compared in canonical form, so the IPv6 form would never
/// match one.
fn canonical(network: IpNet) -> IpNet {
    if let IpNet::V6(v6) = network {
        let mapped = v6.addr().to_ipv4_mapped();
        let prefix = v6.prefix_len().checked_sub(96);
        if let (Some(v4), Some(prefix)) = (mapped, prefix) {
            if let Ok(v4) = Ipv4Net::new(v4, prefix) {
                return IpNet::V4(v4);
            }
        }
    }
    network
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn networks_parse_with_typed_errors() {
        assert_eq!(parse_network("10.1.2.3/8"), Ok(net("10.0.0.0/8")));
        assert_eq!(parse_network("10.1.2.3"), Ok(net("10.1.2.3/32")));
        assert_eq!(parse_network(" 10.1.2.3 "), Ok(net("10.1.2.3/32")));
        assert_eq!(parse_network("0.0.0.0/0"), Ok(net("0.0.0.0/0")));
        assert_eq!(parse_network("fd00::1/8"), Ok(net("fd00::/8")));
        assert_eq!(parse_network("::1"), Ok(net("::1/128")));
        for (bad, reason) in [
            ("", "not an IP address"),
            ("x/8", "not an IP address"),
            ("10.0.0/8", "not an IP address"),
            (
                "10.0.0.0/",
                "the prefix length is not a number from 0 to 32",
            ),
            (
                "10.0.0.0/33",
                "the prefix length is not a number from 0 to 32",
            ),
            (
                "10.0.0.0/-1",
                "the prefix length is not a number from 0 to 32",
            ),
            (
                "10.0.0.0/8/8",
                "the prefix length is not a number from 0 to 32",
            ),
            ("::/129", "the prefix length is not a number from 0 to 128"),
        ] {
            let error = parse_network(bad).unwrap_err();
            assert_eq!(error.input(), bad);
            assert_eq!(error.reason, reason, "{bad}");
        }
    }

    /// Newly right with ipnet: an IPv4-mapped network with a prefix was read as an
    /// IPv4 address with the same prefix (`::ffff:10.0.0.0/104` was refused, 104 being
    /// more than 32 bits), and a mapped network under /96 lost its IPv6 form.
    #[test]
    fn ipv4_mapped_networks_are_their_ipv4_networks() {
        assert_eq!(parse_network("::ffff:10.1.2.3/104"), Ok(net("10.0.0.0/8")));
        assert_eq!(parse_network("::ffff:10.1.2.3"), Ok(net("10.1.2.3/32")));
        assert_eq!(parse_network("::ffff:10.1.2.3/96"), Ok(net("0.0.0.0/0")));
        assert_eq!(parse_network("::ffff:10.1.2.3/8"), Ok(net("::/8")));
    }

    /// A behaviour change with ipnet: brackets, accepted before, are not CIDR notation.
    #[test]
    fn bracketed_addresses_are_refused() {
        for bad in ["[::1]", "[2001:db8::]/32"] {
            assert!(parse_network(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn network_membership() {
        let mut proxies = TrustedProxies::default();
        proxies.add("10.0.0.0/8").unwrap();
        proxies.add("2001:db8::/32").unwrap();
        assert!(proxies.contains("10.255.0.1".parse().unwrap()));
        assert!(!proxies.contains("11.0.0.1".parse().unwrap()));
        assert!(proxies.contains("2001:db8:1::1".parse().unwrap()));
        assert!(!proxies.contains("2001:db9::1".parse().unwrap()));
        let mut everyone = TrustedProxies::default();
        everyone.add("0.0.0.0/0").unwrap();
        assert!(everyone.contains("8.8.8.8".parse().unwrap()));
        assert!(!everyone.contains("::8".parse().unwrap()));
    }
}
