//! The name resolver the HTTP clients (the model's, Streamable HTTP's) give their ureq agents:
//! a host written as an address (`127.0.0.1`, `[::1]`) is its own resolution, without the
//! thread ureq starts for every lookup that has a deadline; a name is still resolved by ureq,
//! within that deadline (a hung DNS server fails the request rather than hanging it).

use std::net::{IpAddr, SocketAddr};
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

#[derive(Debug)]
pub struct LiteralFirst;

impl Resolver for LiteralFirst {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        if let Some(addr) = ip_literal(uri) {
            let mut addrs = self.empty();
            addrs.push(addr);
            return Ok(addrs);
        }
        DefaultResolver::default().resolve(uri, config, timeout)
    }
}

/// The address of an http(s) URI whose host is an IP address; None for a name (or another
/// scheme without a port).
fn ip_literal(uri: &ureq::http::Uri) -> Option<SocketAddr> {
    let authority = uri.authority()?;
    let ip: IpAddr = authority.host().trim_start_matches('[').trim_end_matches(']').parse().ok()?;
    let default_port = match uri.scheme_str()? {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    Some(SocketAddr::new(ip, authority.port_u16().unwrap_or(default_port)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An address is its own resolution (no thread, no lookup); a name, or a scheme whose port
    /// is not known here, goes to ureq's resolver.
    #[test]
    fn an_address_is_taken_as_it_is_and_a_name_is_resolved() {
        let at = |u: &str| ip_literal(&u.parse::<ureq::http::Uri>().unwrap());
        assert_eq!(at("http://127.0.0.1:8080/v1/chat"), Some("127.0.0.1:8080".parse().unwrap()));
        assert_eq!(at("http://10.0.0.2"), Some("10.0.0.2:80".parse().unwrap()));
        assert_eq!(at("https://[::1]/v1"), Some("[::1]:443".parse().unwrap()));
        assert_eq!(at("https://[fe80::1]:8443"), Some("[fe80::1]:8443".parse().unwrap()));
        assert_eq!(at("http://localhost:11434"), None);
        assert_eq!(at("https://api.openai.com/v1"), None);
        assert_eq!(at("socks5://127.0.0.1"), None);
    }
}
