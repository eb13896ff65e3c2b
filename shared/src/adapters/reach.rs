//! Which addresses an outbound fetch the server makes on a request's behalf may reach (an
//! OpenID Connect issuer's keys): a public address only, unless the operator allows private
//! ones, checked after resolution (a resolver that answers only public addresses), so a name
//! that resolves to the metadata service or a host on the private network is never reached,
//! whatever it was when a policy was written. An address written as an IP literal never goes
//! through a resolver: [`check_url_host`] checks it before the request.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// Whether `ip` is an address no fetch reaches without the operator's leave: loopback,
/// private (RFC 1918), shared (RFC 6598), link-local (the cloud metadata services),
/// unique-local, unspecified, multicast or broadcast, also inside an IPv6 address that
/// carries an IPv4 one (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64
/// `64:ff9b::a.b.c.d`, which a NAT gateway translates, and 6to4 `2002:AABB:CCDD::`).
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => private_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => private_v4(v4) || private_v6(v6),
            None => private_v6(v6),
        },
    }
}

/// The IPv4 address an IPv6 one carries, in the forms that reach it.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = ip.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        // ::a.b.c.d (but :: and ::1, which are the IPv6 addresses they are).
        [0, 0, 0, 0, 0, 0, _, _] if !ip.is_loopback() && !ip.is_unspecified() => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        [0x2002, high, next, ..] => Some(Ipv4Addr::new(
            (high >> 8) as u8,
            high as u8,
            (next >> 8) as u8,
            next as u8,
        )),
        _ => None,
    }
}

fn private_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_multicast()
        || ip.is_broadcast()
        || a == 0
        // 100.64.0.0/10, carrier-grade NAT: private in all but name.
        || (a == 100 && (64..128).contains(&b))
}

fn private_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // fc00::/7, unique-local; fe80::/10, link-local.
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80
}

/// Refuses a URL whose host is an IP literal of a private address (`allow_private`
/// false): such a host is not resolved, so the resolver never sees it.
///
/// # Errors
/// In words, naming the address.
pub fn check_url_host(url: &str, allow_private: bool) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url} is not a URL: {e}"))?;
    let host = parsed
        .host_str()
        .ok_or_else(|| format!("{url} has no host"))?;
    // An IPv6 literal is written in brackets; a name does not parse as an address.
    let Ok(ip) = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    else {
        return Ok(());
    };
    if !allow_private && is_private(ip) {
        return Err(refusal(ip));
    }
    Ok(())
}

fn refusal(ip: IpAddr) -> String {
    format!("{ip} is a loopback, private, link-local or unique-local address, which is not reached unless HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS=true")
}

/// A resolver that answers a name's public addresses only: a name with none is an error.
pub struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| !is_private(a.ip()))
                .collect();
            match (public.is_empty(), found.first()) {
                (false, _) => Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs),
                (true, Some(first)) => {
                    Err(
                        format!("{host} resolves to {}: {}", first.ip(), refusal(first.ip()))
                            .into(),
                    )
                }
                (true, None) => Err(format!("{host} resolves to no address").into()),
            }
        })
    }
}

/// The resolver a client of outbound fetches uses: [`PublicOnly`], or the system's when
/// private addresses are allowed.
pub fn resolver(allow_private: bool) -> Option<Arc<PublicOnly>> {
    (!allow_private).then(|| Arc::new(PublicOnly))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_loopback_link_local_and_unique_local_addresses_are_told_apart() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::10.0.0.1",
            "2002:7f00:1::",
            "2002:c0a8:101::1",
        ] {
            assert!(is_private(private.parse().unwrap()), "{private}");
        }
        for public in [
            "8.8.8.8",
            "140.82.112.3",
            "100.128.0.1",
            "2606:4700::1111",
            "64:ff9b::8c52:7003",
            "2002:8c52:7003::1",
        ] {
            assert!(!is_private(public.parse().unwrap()), "{public}");
        }
    }

    #[test]
    fn an_ip_literal_host_is_checked_before_any_request() {
        assert!(check_url_host("https://127.0.0.1:8443/jwks", false).is_err());
        assert!(check_url_host("https://[::1]/jwks", false).is_err());
        assert!(check_url_host("https://169.254.169.254/latest", false).is_err());
        assert!(check_url_host("https://127.0.0.1:8443/jwks", true).is_ok());
        assert!(check_url_host("https://140.82.112.3/jwks", false).is_ok());
        assert!(check_url_host("https://gitlab.example.com/jwks", false).is_ok());
    }

    #[tokio::test]
    async fn the_resolver_refuses_a_name_of_loopback_addresses() {
        use reqwest::dns::Resolve;
        let name: reqwest::dns::Name = "localhost".parse().unwrap();
        let refused = match PublicOnly.resolve(name).await {
            Err(e) => e.to_string(),
            Ok(_) => panic!("localhost resolved to a public address"),
        };
        assert!(
            refused.contains("HEGEMONY_OIDC_ALLOW_PRIVATE_ISSUERS"),
            "{refused}"
        );
    }
}
