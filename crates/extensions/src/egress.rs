//! The egress proxy: the one network path of a confined stdio extension. The child runs in a
//! network namespace of its own; the only way out is an HTTP proxy on a socket gosling was
//! handed (`serve`), which reaches the hosts the person approved for that extension and nothing
//! else, and writes every connection, allowed or refused, to the audit log.
//!
//! What it serves: `CONNECT host:port` (then a byte pipe both ways: TLS passes through, gosling
//! never sees inside it) and one plain `http://host[:port]/…` absolute-form request per
//! connection (forwarded in origin form with `Connection: close`; hop-by-hop headers dropped).
//! Nothing else: no origin-form requests, no `https://` absolute form, no chunked request
//! bodies, no keep-alive.
//!
//! The rules (`EgressPolicy`, `admit`):
//! - Approved hosts are `HOST:PORT` (`HostPort::parse`, a positive grammar: a host name, a
//!   dotted-quad IPv4 or a bracketed IPv6, a port 1–65535; written `HOST` alone it means port
//!   443). A name matches exactly, case-insensitively; `*.example.com` matches the names below
//!   `example.com` (not `example.com` itself). Ports match exactly.
//! - gosling resolves the name itself, within `RESOLVE_TIMEOUT`, and connects to what it
//!   resolved. An approved name reaches public addresses only: loopback, private (10/8,
//!   172.16/12, 192.168/16, 100.64/10, fc00::/7), link-local (169.254/16 with the cloud
//!   metadata address, fe80::/10), unspecified, multicast, reserved, and the IPv4-mapped,
//!   -compatible, NAT64 and 6to4 forms of them are refused — so a name that resolves (or is
//!   rebound) to this machine or the local network is refused. Two exceptions, each the person
//!   approving the place itself: an approved IP literal reaches that address, and `localhost`
//!   approved by name reaches loopback.
//! - Bounded: a request head at most `MAX_HEAD` bytes read within `HEAD_TIMEOUT`, at most
//!   `MAX_CONNECTIONS` at once per proxy (one proxy per extension), `CONNECT_TIMEOUT` to reach
//!   the host, a pipe ended after `IDLE_TIMEOUT` without a byte either way, at most
//!   `MAX_RESOLVING` name lookups outstanding.
//!
//! Threads: `egress-accept` (the accept loop) and one `egress-conn` per connection, which reads
//! the head, decides, connects and then pipes both directions itself (a `poll` loop over the two
//! sockets). Dropping the `Handle` closes a socket pair every thread polls, so the accept loop
//! ends (the listener is closed) and every pipe ends.
//!
//! Whether a child gets a proxy, and the socket it listens on, is the launcher's business; this
//! module only serves the socket it is given.

use crate::error::Error;
use gosling_store::audit::{AuditLog, Connection};
use gosling_sys::{poll_fds, Ready};
use gosling_util::printable;
use serde_json::{json, Value};
use std::fmt;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Longest request head (request line and headers) read from the extension.
pub const MAX_HEAD: usize = 16 * 1024;
/// Connections open at once through one extension's proxy; more are answered 503.
pub const MAX_CONNECTIONS: usize = 64;
/// Time the extension has to send its whole request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// Time to resolve an approved name.
pub const RESOLVE_TIMEOUT: Duration = Duration::from_secs(10);
/// Time to connect to the resolved address.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A pipe with no byte either way for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// Name lookups outstanding at once per proxy (a lookup that outlives its deadline keeps its
/// thread until the resolver returns).
pub const MAX_RESOLVING: usize = 8;
/// The port of an approved host written without one.
pub const DEFAULT_PORT: u16 = 443;
/// Bytes buffered per direction of a pipe.
const PIPE_BUFFER: usize = 64 * 1024;

/// The bounds of one proxy; `Limits::default()` is the named constants above.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_connections: usize,
    pub head: Duration,
    pub resolve: Duration,
    pub connect: Duration,
    pub idle: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: MAX_CONNECTIONS,
            head: HEAD_TIMEOUT,
            resolve: RESOLVE_TIMEOUT,
            connect: CONNECT_TIMEOUT,
            idle: IDLE_TIMEOUT,
        }
    }
}

/// The host part of an approved `HOST:PORT` (or of a request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    /// A DNS name, lower-case, without a trailing dot.
    Name(String),
    /// `*.SUFFIX`: any name ending in `.SUFFIX` (SUFFIX lower-case, at least two labels).
    Wildcard(String),
    /// An address; an IPv4-mapped IPv6 address is kept as the IPv4 address it maps.
    Ip(IpAddr),
}

/// One approved `HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    pub host: Host,
    pub port: u16,
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            Host::Name(n) => write!(f, "{n}:{}", self.port),
            Host::Wildcard(s) => write!(f, "*.{s}:{}", self.port),
            Host::Ip(IpAddr::V4(a)) => write!(f, "{a}:{}", self.port),
            Host::Ip(IpAddr::V6(a)) => write!(f, "[{a}]:{}", self.port),
        }
    }
}

/// What `HostPort::parse` accepts, for error messages.
const GRAMMAR: &str = "HOST or HOST:PORT, where HOST is a host name (letters, digits and `-` in dot-separated \
    labels, or `*.example.com` for the names below example.com), a dotted-quad IPv4 address or an IPv6 address \
    in brackets, and PORT is 1 to 65535 (443 when left out)";

impl HostPort {
    /// Parses an approved host: `HOST[:PORT]` (see `GRAMMAR`); the port defaults to 443. The
    /// error is the rule the value breaks, for the caller to wrap with the field it came from.
    pub fn parse(s: &str) -> Result<HostPort, String> {
        let hp = parse_host_port(s, Some(DEFAULT_PORT))?;
        if let Host::Ip(ip) = hp.host {
            if let Some(why) = never_a_destination(ip) {
                return Err(format!("{ip} is {why}, not an address a connection can go to"));
            }
        }
        Ok(hp)
    }

    /// Whether this approved entry lets a request for `req` through (host and port).
    fn approves(&self, req: &HostPort) -> bool {
        self.port == req.port
            && match (&self.host, &req.host) {
                (Host::Name(a), Host::Name(b)) => a == b,
                (Host::Wildcard(suffix), Host::Name(b)) => {
                    b.len() > suffix.len() + 1
                        && b.ends_with(suffix.as_str())
                        && b[..b.len() - suffix.len()].ends_with('.')
                }
                (Host::Ip(a), Host::Ip(b)) => a == b,
                _ => false,
            }
    }

    fn same_host(&self, req: &HostPort) -> bool {
        HostPort { host: self.host.clone(), port: req.port }.approves(req)
    }
}

/// `HOST[:PORT]` by the grammar, `default` the port when none is written (None: a port is required).
fn parse_host_port(s: &str, default: Option<u16>) -> Result<HostPort, String> {
    let shown = printable(s);
    if s.is_empty() || s.len() > 270 || !s.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!("{shown:?} must be {GRAMMAR}, without spaces"));
    }
    if s.contains("://") || s.contains(['/', '@']) {
        return Err(format!("{shown:?} must be {GRAMMAR}; write the host and port alone (no scheme, path or user)"));
    }
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let Some((inner, after)) = rest.split_once(']') else {
            return Err(format!("{shown:?}: an IPv6 address is written in brackets, [::1]:PORT"));
        };
        let ip = inner
            .parse::<Ipv6Addr>()
            .map_err(|_| format!("{shown:?}: `{}` is not an IPv6 address (no zone ids)", printable(inner)))?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(|| format!("{shown:?}: after `]` comes `:PORT` or nothing"))?),
        };
        (Host::Ip(canonical(IpAddr::V6(ip))), port)
    } else {
        let (h, p) = match s.split_once(':') {
            Some((_, p)) if p.contains(':') => {
                return Err(format!("{shown:?}: an IPv6 address is written in brackets, [::1]:PORT"))
            }
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        };
        (parse_host(h).map_err(|rule| format!("{shown:?}: {rule}"))?, p)
    };
    let port = match port {
        Some(p) => parse_port(p).ok_or_else(|| format!("{shown:?}: the port must be a number from 1 to 65535"))?,
        None => default.ok_or_else(|| format!("{shown:?}: give the port, HOST:PORT"))?,
    };
    Ok(HostPort { host, port })
}

fn parse_port(p: &str) -> Option<u16> {
    let ok = !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit()) && !p.starts_with('0');
    ok.then(|| p.parse::<u16>().ok()).flatten()
}

/// A host name, `*.name` or a dotted quad (lower-cased; one trailing dot dropped).
fn parse_host(h: &str) -> Result<Host, String> {
    let h = h.strip_suffix('.').unwrap_or(h).to_ascii_lowercase();
    if h.is_empty() {
        return Err("the host is missing".into());
    }
    if h.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return dotted_quad(&h).map(|a| Host::Ip(IpAddr::V4(a))).ok_or_else(|| {
            "a numeric host is written as a dotted quad like 192.0.2.1 (four numbers 0-255, no leading zeros; \
             no shortened, octal, hex or single-number forms)"
                .to_string()
        });
    }
    let (wild, name) = match h.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, h.as_str()),
    };
    let labels: Vec<&str> = name.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.len() > 253 || !labels.iter().all(label_ok) {
        return Err(format!("{GRAMMAR}; `{}` is not one", printable(&h)));
    }
    let last = labels[labels.len() - 1];
    let numeric = last.bytes().all(|b| b.is_ascii_digit())
        || last.strip_prefix("0x").is_some_and(|x| x.bytes().all(|b| b.is_ascii_hexdigit()));
    if numeric {
        return Err(format!(
            "`{}` ends in a number, which the system's resolver reads as an address; write the address as a dotted \
             quad like 192.0.2.1",
            printable(&h)
        ));
    }
    if wild {
        if labels.len() < 2 {
            return Err(format!(
                "`*.{name}` would approve a whole top-level domain; a wildcard needs at least two labels (*.example.com)"
            ));
        }
        return Ok(Host::Wildcard(name.to_string()));
    }
    Ok(Host::Name(name.to_string()))
}

/// `a.b.c.d`, each 0–255 in decimal without leading zeros.
fn dotted_quad(s: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.len() != 4 {
        return None;
    }
    let mut octets = [0u8; 4];
    for (o, p) in octets.iter_mut().zip(&parts) {
        if p.is_empty() || p.len() > 3 || (p.len() > 1 && p.starts_with('0')) {
            return None;
        }
        *o = p.parse().ok()?;
    }
    Some(Ipv4Addr::from(octets))
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Where an address is, as far as the proxy's rule goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Public,
    Loopback,
    /// Private, shared (100.64/10) or unique-local ranges: your local network.
    Private,
    /// 169.254/16 (with the cloud metadata address) and fe80::/10.
    LinkLocal,
    Unspecified,
    Multicast,
    /// Broadcast, documentation, benchmarking, reserved and deprecated ranges.
    Reserved,
}

impl Class {
    fn words(self) -> &'static str {
        match self {
            Class::Public => "a public address",
            Class::Loopback => "loopback, this machine",
            Class::Private => "a private address, your local network",
            Class::LinkLocal => "link-local (where cloud metadata services answer)",
            Class::Unspecified => "the unspecified address",
            Class::Multicast => "a multicast address",
            Class::Reserved => "a reserved address",
        }
    }
}

/// The class of an address; IPv6 forms that embed an IPv4 address (mapped, compatible, NAT64
/// `64:ff9b::/96`, 6to4 `2002::/16`) take the class of the address they embed.
pub fn class_of(ip: IpAddr) -> Class {
    match ip {
        IpAddr::V4(a) => {
            let [a0, a1, a2, _] = a.octets();
            match (a0, a1, a2) {
                (0, _, _) => Class::Unspecified,
                (127, _, _) => Class::Loopback,
                (10, _, _) | (192, 168, _) | (192, 0, 0) => Class::Private,
                (172, b, _) if b & 0xf0 == 16 => Class::Private,
                (100, b, _) if b & 0xc0 == 64 => Class::Private,
                (169, 254, _) => Class::LinkLocal,
                (224..=239, _, _) => Class::Multicast,
                (240..=255, _, _) => Class::Reserved,
                (192, 0, 2) | (198, 51, 100) | (203, 0, 113) => Class::Reserved,
                (198, b, _) if b & 0xfe == 18 => Class::Reserved,
                _ => Class::Public,
            }
        }
        IpAddr::V6(a) => {
            let s = a.segments();
            let embedded =
                |hi: u16, lo: u16| class_of(IpAddr::V4(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))));
            if a.is_unspecified() {
                Class::Unspecified
            } else if a.is_loopback() {
                Class::Loopback
            } else if let Some(v4) = a.to_ipv4_mapped() {
                class_of(IpAddr::V4(v4))
            } else if s[..6] == [0; 6] {
                // ::a.b.c.d, the deprecated IPv4-compatible form: never a place to go.
                match embedded(s[6], s[7]) {
                    Class::Public => Class::Reserved,
                    c => c,
                }
            } else if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                embedded(s[6], s[7])
            } else if s[0] == 0x2002 {
                embedded(s[1], s[2])
            } else if s[0] & 0xfe00 == 0xfc00 || s[0] & 0xffc0 == 0xfec0 {
                Class::Private
            } else if s[0] & 0xffc0 == 0xfe80 {
                Class::LinkLocal
            } else if s[0] & 0xff00 == 0xff00 {
                Class::Multicast
            } else if (s[0], s[1]) == (0x2001, 0x0db8) || (s[0], s[1]) == (0x2001, 0) || s[..4] == [0x100, 0, 0, 0] {
                Class::Reserved
            } else {
                Class::Public
            }
        }
    }
}

/// Why `ip` can never be approved as a destination, if it cannot.
fn never_a_destination(ip: IpAddr) -> Option<&'static str> {
    match class_of(ip) {
        Class::Unspecified => Some("the unspecified address (it reaches this machine; approve 127.0.0.1 instead)"),
        Class::Multicast => Some("a multicast address"),
        Class::Reserved if ip == IpAddr::V4(Ipv4Addr::BROADCAST) => Some("the broadcast address"),
        _ => None,
    }
}

/// The hosts approved for one extension, and the networks besides the public ones their names
/// may resolve to (`nets`: the operator's `GOSLING_EGRESS_NETS`, none by default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    pub hosts: Vec<HostPort>,
    pub nets: Vec<Net>,
}

/// A network in CIDR form (`203.0.113.0/24`, `fd00:1::/64`; an address alone is itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Net {
    /// Whether `ip` (canonical: an IPv4-mapped address is its IPv4) lies in this network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let bits = |a: IpAddr| match canonical(a) {
            IpAddr::V4(v) => (u128::from(u32::from(v)), 32u8),
            IpAddr::V6(v) => (u128::from(v), 128u8),
        };
        let ((net, len), (x, xlen)) = (bits(self.addr), bits(ip));
        if len != xlen {
            return false;
        }
        let shift = u32::from(len - self.prefix);
        shift >= 128 || (net >> shift) == (x >> shift)
    }
}

impl fmt::Display for Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// The operator's `GOSLING_EGRESS_NETS`: networks that approved host *names* may resolve to
/// besides public addresses — split-horizon DNS, a transparent egress proxy or a registry
/// mirror that answers for the public names on a private or reserved address. Comma- or
/// space-separated CIDRs; none may hold loopback, the unspecified address or a multicast one,
/// or be wider than /8 (IPv4) or /16 (IPv6). Only from gosling's own environment: a link, an
/// import or a config cannot widen it. A bad entry is refused with the fix.
pub fn operator_nets(value: Option<&str>) -> Result<Vec<Net>, Error> {
    let bad = |m: String| Error::Config { field: "GOSLING_EGRESS_NETS".into(), message: m };
    let mut out = Vec::new();
    for word in value.unwrap_or("").split(|c: char| c == ',' || c.is_whitespace()).filter(|w| !w.is_empty()) {
        let (a, p) = word.split_once('/').map_or((word, None), |(a, p)| (a, Some(p)));
        let addr: IpAddr = a.parse().map_err(|_| {
            bad(format!("{word:?} is not a network; write CIDRs such as 203.0.113.0/24 or fd00:1::/64"))
        })?;
        let addr = canonical(addr);
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|n| *n <= max && p.bytes().all(|b| b.is_ascii_digit()))
                .ok_or_else(|| bad(format!("{word:?} has no prefix length in 0..={max}")))?,
        };
        let net = Net { addr, prefix };
        let min = if addr.is_ipv4() { 8 } else { 16 };
        if prefix < min {
            return Err(bad(format!("{word} is wider than /{min}; name the networks the registry or proxy is on")));
        }
        let never =
            [IpAddr::V4(Ipv4Addr::LOCALHOST), IpAddr::V6(Ipv6Addr::LOCALHOST), IpAddr::V4(Ipv4Addr::UNSPECIFIED)];
        if never.iter().any(|ip| net.contains(*ip)) || matches!(class_of(addr), Class::Multicast | Class::Unspecified) {
            return Err(bad(format!(
                "{word} holds loopback, the unspecified or a multicast address, which a name may never reach; \
                 approve localhost:PORT or an address itself for an extension instead"
            )));
        }
        out.push(net);
    }
    Ok(out)
}

impl EgressPolicy {
    /// From a config's `"sandbox": {"hosts": [...]}` list; a bad entry is an `Error::Config`
    /// naming `sandbox.hosts` and the rule.
    pub fn from_strings(hosts: &[String]) -> Result<EgressPolicy, Error> {
        let hosts = hosts
            .iter()
            .map(|h| HostPort::parse(h).map_err(|rule| Error::Config { field: "sandbox.hosts".into(), message: rule }))
            .collect::<Result<_, _>>()?;
        Ok(EgressPolicy { hosts, nets: Vec::new() })
    }

    /// The entry that approves `req`, or the refusal naming what to approve.
    fn decide(&self, req: &HostPort, extension: &str) -> Result<&HostPort, String> {
        if let Some(e) = self.hosts.iter().find(|e| e.approves(req)) {
            return Ok(e);
        }
        let ports: Vec<String> = self.hosts.iter().filter(|e| e.same_host(req)).map(|e| e.port.to_string()).collect();
        let which = if ports.is_empty() {
            String::new()
        } else {
            format!(" (its host is approved on port {} only)", ports.join(", "))
        };
        Err(format!(
            "{req} is not an approved host of extension {}{which}; to let it connect, approve it: \
             allow_host={req} in its link, or \"sandbox\": {{\"hosts\": [\"{req}\"]}} in its config",
            printable(extension)
        ))
    }
}

/// The addresses of `resolved` that `entry` (the approved entry that matched the request
/// `req`) may reach, or why none: a name reaches public addresses only (and those in the
/// operator's `nets`), except `localhost` approved by name (loopback); an approved address
/// reaches itself.
pub fn admit(
    entry: &HostPort,
    req: &HostPort,
    resolved: &[SocketAddr],
    nets: &[Net],
) -> Result<Vec<SocketAddr>, String> {
    let localhost = matches!(&entry.host, Host::Name(n) if n == "localhost");
    let mut ok = Vec::new();
    let mut refused = None;
    for a in resolved {
        let ip = canonical(a.ip());
        let class = class_of(ip);
        let fine = match &entry.host {
            Host::Ip(approved) => *approved == ip,
            _ if localhost => class == Class::Loopback,
            _ => class == Class::Public || nets.iter().any(|n| n.contains(ip)),
        };
        if fine {
            ok.push(SocketAddr::new(ip, a.port()));
        } else if refused.is_none() {
            refused = Some((ip, class));
        }
    }
    if !ok.is_empty() {
        return Ok(ok);
    }
    let Some((ip, class)) = refused else { return Err(format!("{req} resolves to no address")) };
    let ip_port = SocketAddr::new(ip, req.port);
    Err(format!(
        "{req} resolves to {ip}, {}, which an approved host name may not reach; to let the extension reach a \
         server on this machine or your network, approve its address itself (allow_host={ip_port}, or \
         \"sandbox\": {{\"hosts\": [\"{ip_port}\"]}}{}) and point the extension at that address{}",
        class.words(),
        if class == Class::Loopback { "; or localhost:PORT" } else { "" },
        if matches!(class, Class::Private | Class::Reserved) {
            format!(
                "; or, if this network's DNS answers public names with it (a transparent proxy, a mirror), the \
                 operator lets approved names resolve there: GOSLING_EGRESS_NETS={ip}"
            )
        } else {
            String::new()
        },
    ))
}

/// The policy of an extension's config: its approved hosts, each read by the grammar (a bad one
/// is an `Error::Config` naming `sandbox.hosts`).
pub fn policy_of(config: &crate::config::ExtensionConfig) -> Result<EgressPolicy, Error> {
    EgressPolicy::from_strings(&hosts_of(config))
}

/// The approved hosts a config carries (`"sandbox": {"hosts": [...]}`), as written.
pub fn hosts_of(config: &crate::config::ExtensionConfig) -> Vec<String> {
    config
        .extra
        .get("sandbox")
        .and_then(|s| s.get("hosts"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// The config's `sandbox` value for these approved hosts.
pub fn sandbox_value(hosts: &[HostPort]) -> Value {
    json!({"hosts": hosts.iter().map(ToString::to_string).collect::<Vec<_>>()})
}

/// Where each connection is written: the audit log, under the extension's name.
#[derive(Clone)]
pub struct Audit {
    pub log: AuditLog,
    pub extension: String,
}

/// A running proxy. Dropping it stops accepting (the listener is closed) and ends every pipe.
pub struct Handle {
    /// Closed on drop: every thread of this proxy polls the other end.
    _stop: UnixStream,
    live: Arc<AtomicUsize>,
}

impl Handle {
    /// Connections open now.
    pub fn connections(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }
}

/// Serves the proxy on `listener` (already listening) with the default `Limits`.
pub fn serve(listener: TcpListener, policy: EgressPolicy, audit: Audit) -> io::Result<Handle> {
    serve_with(listener, policy, audit, Limits::default())
}

/// `serve` with other bounds.
pub fn serve_with(listener: TcpListener, policy: EgressPolicy, audit: Audit, limits: Limits) -> io::Result<Handle> {
    listener.set_nonblocking(true)?;
    let (stop, stop_rx) = UnixStream::pair()?;
    let live = Arc::new(AtomicUsize::new(0));
    let shared =
        Arc::new(Shared { policy, audit, limits, stop: stop_rx, live: live.clone(), resolving: Default::default() });
    std::thread::Builder::new().name("egress-accept".into()).spawn(move || accept_loop(listener, shared))?;
    Ok(Handle { _stop: stop, live })
}

struct Shared {
    policy: EgressPolicy,
    audit: Audit,
    limits: Limits,
    /// Readable (at its end) once the `Handle` is dropped.
    stop: UnixStream,
    live: Arc<AtomicUsize>,
    resolving: Arc<AtomicUsize>,
}

impl Shared {
    fn stopped(&self) -> bool {
        poll_fds([(self.stop.as_raw_fd(), Ready::Read)], Some(Duration::ZERO))[0]
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        // wait: until a connection arrives or the Handle is dropped (the stop socket's end)
        let [incoming, stopped] =
            poll_fds([(listener.as_raw_fd(), Ready::Read), (shared.stop.as_raw_fd(), Ready::Read)], None);
        if stopped || shared.stopped() {
            return; // the listener closes here
        }
        if !incoming {
            continue; // a signal
        }
        // wait: a non-blocking listener, after poll said a connection is there
        let accepted = listener.accept();
        let (stream, _) = match accepted {
            Ok(s) => s,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => continue,
            Err(e) => {
                log::warn!("egress: accepting for extension {} failed: {e}", shared.audit.extension);
                std::thread::sleep(Duration::from_millis(50)); // e.g. out of descriptors: no busy loop
                continue;
            }
        };
        let started = Instant::now();
        if shared.live.fetch_add(1, Ordering::SeqCst) >= shared.limits.max_connections {
            shared.live.fetch_sub(1, Ordering::SeqCst);
            let reason = format!(
                "extension {} has {} connections open through gosling already; close some first",
                printable(&shared.audit.extension),
                shared.limits.max_connections
            );
            answer(&stream, &shared, 503, "Service Unavailable", &reason);
            record(&shared, &Outcome::refused(reason), started);
            continue;
        }
        let s = shared.clone();
        let spawned = std::thread::Builder::new().name("egress-conn".into()).spawn({
            let stream = stream.try_clone();
            move || {
                if let Ok(stream) = stream {
                    let outcome = connection(stream, &s);
                    record(&s, &outcome, started);
                }
                s.live.fetch_sub(1, Ordering::SeqCst);
            }
        });
        if let Err(e) = spawned {
            shared.live.fetch_sub(1, Ordering::SeqCst);
            let reason = format!("gosling could not start a thread for the connection ({e})");
            answer(&stream, &shared, 503, "Service Unavailable", &reason);
            record(&shared, &Outcome::refused(reason), started);
        }
    }
}

/// What became of one connection, for the audit line.
struct Outcome {
    host: String,
    port: u16,
    address: Option<SocketAddr>,
    allowed: bool,
    reason: String,
    bytes_out: u64,
    bytes_in: u64,
}

impl Outcome {
    fn refused(reason: String) -> Outcome {
        Outcome { host: String::new(), port: 0, address: None, allowed: false, reason, bytes_out: 0, bytes_in: 0 }
    }
}

fn record(shared: &Shared, o: &Outcome, started: Instant) {
    let ext = &shared.audit.extension;
    if o.allowed {
        log::debug!("egress: {ext} → {}:{} ({:?}): {}", o.host, o.port, o.address, o.reason);
    } else {
        log::warn!("egress: refused a connection of extension {ext}: {}", o.reason);
    }
    shared.audit.log.record_connection(&Connection {
        extension: ext,
        host: &o.host,
        port: o.port,
        address: o.address,
        verdict: if o.allowed { "allowed" } else { "refused" },
        reason: &o.reason,
        bytes_out: o.bytes_out,
        bytes_in: o.bytes_in,
        duration: started.elapsed(),
    });
}

/// Writes a refusal, `HTTP/1.1 CODE` with the one-line reason as the status text (what a
/// CONNECT client shows) and as the body; best effort, bounded by a short deadline.
fn answer(stream: &TcpStream, shared: &Shared, code: u16, status: &str, reason: &str) {
    let line: String = reason.chars().map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' }).collect();
    let text = format!(
        "HTTP/1.1 {code} {status}: {line}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{line}\n",
        line.len() + 1
    );
    let _ = send_all(stream, text.as_bytes(), &shared.stop, Instant::now() + Duration::from_secs(5));
    let _ = stream.shutdown(Shutdown::Write);
}

fn send_all(stream: &TcpStream, mut bytes: &[u8], stop: &UnixStream, deadline: Instant) -> io::Result<()> {
    stream.set_nonblocking(true)?;
    while !bytes.is_empty() {
        match (&*stream).write(bytes) {
            Ok(0) => return Err(ErrorKind::WriteZero.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let left = deadline.saturating_duration_since(Instant::now());
                let [ready, stopped] =
                    poll_fds([(stream.as_raw_fd(), Ready::Write), (stop.as_raw_fd(), Ready::Read)], Some(left));
                if stopped || (!ready && left.is_zero()) {
                    return Err(ErrorKind::TimedOut.into());
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// What the extension asked for.
enum Request {
    Connect { target: HostPort, early: Vec<u8> },
    Http { target: HostPort, head: Vec<u8>, early: Vec<u8>, body: u64 },
}

/// A refusal before connecting: status, status text, reason.
struct Refusal(u16, &'static str, String);

fn bad_request(detail: impl fmt::Display) -> Refusal {
    Refusal(
        400,
        "Bad Request",
        format!("gosling's proxy takes `CONNECT host:port` or one absolute `http://host/path` request: {detail}"),
    )
}

/// One connection, from its head to its end.
fn connection(client: TcpStream, shared: &Shared) -> Outcome {
    let mut o = Outcome::refused(String::new());
    let refuse = |o: &mut Outcome, Refusal(code, status, reason): Refusal| {
        answer(&client, shared, code, status, &reason);
        o.reason = reason;
    };
    let head = match read_head(&client, shared) {
        Ok(h) => h,
        Err(r) => {
            refuse(&mut o, r);
            return o;
        }
    };
    let req = match parse_request(&head.0, head.1) {
        Ok(r) => r,
        Err(r) => {
            // What it asked for, as written (bounded, escaped), for the audit line.
            let line = head.0.split(|b| *b == b'\r').next().unwrap_or_default();
            o.host = String::from_utf8_lossy(line).split(' ').nth(1).map(shorten).unwrap_or_default();
            refuse(&mut o, r);
            return o;
        }
    };
    let (Request::Connect { target, .. } | Request::Http { target, .. }) = &req;
    o.host = match &target.host {
        Host::Ip(IpAddr::V6(a)) => format!("[{a}]"),
        Host::Ip(a) => a.to_string(),
        Host::Name(n) => n.clone(),
        Host::Wildcard(n) => format!("*.{n}"),
    };
    o.port = target.port;
    let entry = match shared.policy.decide(target, &shared.audit.extension) {
        Ok(e) => e,
        Err(reason) => {
            refuse(&mut o, Refusal(403, "Forbidden", reason));
            return o;
        }
    };
    let resolved = match &target.host {
        Host::Ip(ip) => Ok(vec![SocketAddr::new(*ip, target.port)]),
        Host::Name(n) => resolve(n, target.port, shared),
        Host::Wildcard(_) => Err(Refusal(400, "Bad Request", "a request names one host, not a wildcard".into())),
    };
    let resolved = match resolved {
        Ok(r) => r,
        Err(r) => {
            refuse(&mut o, r);
            return o;
        }
    };
    let addrs = match admit(entry, target, &resolved, &shared.policy.nets) {
        Ok(a) => a,
        Err(reason) => {
            o.address = resolved.first().map(|a| SocketAddr::new(canonical(a.ip()), a.port()));
            refuse(&mut o, Refusal(403, "Forbidden", reason));
            return o;
        }
    };
    let mut upstream = None;
    let mut last_err = None;
    for a in addrs.iter().take(4) {
        o.address = Some(*a);
        match TcpStream::connect_timeout(a, shared.limits.connect) {
            Ok(s) => {
                upstream = Some(s);
                break;
            }
            Err(e) => last_err = Some(e),
        }
    }
    let Some(upstream) = upstream else {
        let e = last_err.map_or_else(|| "no address".to_string(), |e| e.to_string());
        let reason =
            format!("cannot connect to {target} ({}): {e}", o.address.map_or(String::new(), |a| a.to_string()));
        refuse(&mut o, Refusal(502, "Bad Gateway", reason));
        return o;
    };
    o.allowed = true;
    let _ = upstream.set_nodelay(true);
    let (to_upstream, to_client, limit) = match req {
        Request::Connect { early, .. } => (early, b"HTTP/1.1 200 Connection established\r\n\r\n".to_vec(), None),
        Request::Http { mut head, early, body, .. } => {
            let n = early.len().min(usize::try_from(body).unwrap_or(usize::MAX));
            head.extend_from_slice(&early[..n]);
            (head, Vec::new(), Some(body - n as u64))
        }
    };
    let p = pipe(&client, &upstream, shared, to_upstream, to_client, limit);
    o.bytes_out = p.out;
    o.bytes_in = p.into;
    o.reason = p.end;
    o
}

/// Reads the request head (through the blank line) and whatever followed it in the same reads.
fn read_head(client: &TcpStream, shared: &Shared) -> Result<(Vec<u8>, Vec<u8>), Refusal> {
    let deadline = Instant::now() + shared.limits.head;
    client.set_nonblocking(true).map_err(bad_request)?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let from = buf.len().saturating_sub(chunk.len() + 3);
        if let Some(i) = find(&buf[from..], b"\r\n\r\n") {
            let end = from + i + 4;
            let rest = buf.split_off(end);
            return Ok((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Err(Refusal(
                431,
                "Request Header Fields Too Large",
                format!("the request head is longer than {MAX_HEAD} bytes"),
            ));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let [ready, stopped] =
            poll_fds([(client.as_raw_fd(), Ready::Read), (shared.stop.as_raw_fd(), Ready::Read)], Some(left));
        if stopped {
            return Err(Refusal(503, "Service Unavailable", "gosling stopped the extension's proxy".into()));
        }
        if !ready {
            if Instant::now() >= deadline {
                return Err(Refusal(
                    408,
                    "Request Timeout",
                    format!("the request head did not arrive within {} s", shared.limits.head.as_secs_f32()),
                ));
            }
            continue;
        }
        let room = (MAX_HEAD + 1 - buf.len().min(MAX_HEAD)).min(chunk.len());
        match (&*client).read(&mut chunk[..room]) {
            Ok(0) => return Err(bad_request("the connection closed before the request head ended")),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
            Err(e) => return Err(bad_request(e)),
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Headers a proxy does not pass on (RFC 9110 §7.6.1), besides those `Connection` names.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "upgrade",
    "host",
];

/// The request line and headers, checked by a positive grammar.
fn parse_request(head: &[u8], early: Vec<u8>) -> Result<Request, Refusal> {
    let text = &head[..head.len() - 4];
    let mut lines = Vec::new();
    let mut rest = text;
    loop {
        match find(rest, b"\r\n") {
            Some(i) => {
                lines.push(&rest[..i]);
                rest = &rest[i + 2..];
            }
            None => {
                lines.push(rest);
                break;
            }
        }
    }
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    let request_line =
        std::str::from_utf8(lines[0]).ok().filter(|l| l.bytes().all(|b| b.is_ascii_graphic() || b == b' '));
    let Some(request_line) = request_line else {
        return Err(bad_request("the request line holds bytes other than printable ASCII"));
    };
    let parts: Vec<&str> = request_line.split(' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(bad_request(format!("`{}` is not METHOD TARGET HTTP/1.1", shorten(request_line))));
    };
    if method.is_empty() || !method.bytes().all(tchar) || !matches!(version, "HTTP/1.1" | "HTTP/1.0") {
        return Err(bad_request(format!("`{}` is not METHOD TARGET HTTP/1.1", shorten(request_line))));
    }
    let mut headers: Vec<(String, &[u8])> = Vec::new();
    for l in &lines[1..] {
        if l.first().is_some_and(|b| *b == b' ' || *b == b'\t') {
            return Err(bad_request("a header line is folded (starts with a space), which HTTP/1.1 no longer allows"));
        }
        let Some(colon) = l.iter().position(|b| *b == b':') else {
            return Err(bad_request("a header line has no `:`"));
        };
        let name = &l[..colon];
        let value = &l[colon + 1..];
        if name.is_empty() || !name.iter().all(|b| tchar(*b)) {
            return Err(bad_request("a header name is not a token (or a header line is folded)"));
        }
        if value.iter().any(|b| (*b < 0x20 && *b != b'\t') || *b == 0x7f) {
            return Err(bad_request("a header value holds control characters"));
        }
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        let value = value.trim_ascii();
        headers.push((name, value));
    }
    if method == "CONNECT" {
        let target_hp = parse_host_port(target, None)
            .map_err(|rule| Refusal(403, "Forbidden", format!("CONNECT {}: {rule}", shorten(target))))?;
        return Ok(Request::Connect { target: target_hp, early });
    }
    let lower = target.to_ascii_lowercase();
    let Some(after) = lower.strip_prefix("http://").map(|_| &target[7..]) else {
        let why = if lower.starts_with("https://") {
            "an https:// URL goes through CONNECT (set HTTPS_PROXY, not an absolute https:// request)".to_string()
        } else {
            format!("`{}` is not an absolute http:// URL", shorten(target))
        };
        return Err(bad_request(why));
    };
    let split = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (authority, path) = after.split_at(split);
    if authority.contains('@') {
        return Err(bad_request("the URL carries credentials (user@host), which the proxy does not pass on"));
    }
    let target_hp = parse_host_port(authority, Some(80))
        .map_err(|rule| Refusal(403, "Forbidden", format!("{}: {rule}", shorten(target))))?;
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('/') => p.split('#').next().unwrap_or("/").to_string(),
        p => format!("/{}", p.split('#').next().unwrap_or("")),
    };
    let mut body = 0u64;
    let mut lengths = 0;
    let mut named: Vec<String> = Vec::new();
    for (n, v) in &headers {
        match n.as_str() {
            "transfer-encoding" => {
                return Err(Refusal(
                    411,
                    "Length Required",
                    "a request body through gosling's proxy needs a Content-Length (chunked is not passed on); \
                     https:// requests go through CONNECT and are not limited so"
                        .into(),
                ))
            }
            "content-length" => {
                lengths += 1;
                let v = std::str::from_utf8(v).ok().filter(|v| !v.is_empty() && v.len() <= 18);
                body = v
                    .filter(|v| v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| bad_request("Content-Length is not a number"))?;
            }
            "connection" => named.extend(
                String::from_utf8_lossy(v).split(',').map(|t| t.trim().to_ascii_lowercase()).filter(|t| !t.is_empty()),
            ),
            _ => {}
        }
    }
    if lengths > 1 {
        return Err(bad_request("Content-Length is given more than once"));
    }
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\n").into_bytes();
    for (n, v) in &headers {
        if HOP_BY_HOP.contains(&n.as_str()) || named.contains(n) {
            continue;
        }
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Request::Http { target: target_hp, head: out, early, body })
}

fn shorten(s: &str) -> String {
    let p = printable(s);
    if p.chars().count() > 120 {
        format!("{}…", p.chars().take(120).collect::<String>())
    } else {
        p
    }
}

/// Resolves `host` on a thread of its own, within the resolve deadline. At most
/// `MAX_RESOLVING` lookups run at once: a connection beyond them waits for one to end (a
/// launcher's first fetch opens dozens at once), within the same deadline.
fn resolve(host: &str, port: u16, shared: &Shared) -> Result<Vec<SocketAddr>, Refusal> {
    let unavailable = |reason: String| Refusal(502, "Bad Gateway", reason);
    let deadline = Instant::now() + shared.limits.resolve;
    while shared.resolving.fetch_add(1, Ordering::SeqCst) >= MAX_RESOLVING {
        shared.resolving.fetch_sub(1, Ordering::SeqCst);
        if Instant::now() >= deadline || shared.stopped() {
            return Err(Refusal(
                503,
                "Service Unavailable",
                format!("{MAX_RESOLVING} name lookups of this extension are still running; try again later"),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    let (name, counter) = (host.to_string(), shared.resolving.clone());
    let spawned = std::thread::Builder::new().name("egress-resolve".into()).spawn(move || {
        let r = (name.as_str(), port).to_socket_addrs().map(Iterator::collect::<Vec<_>>);
        counter.fetch_sub(1, Ordering::SeqCst);
        let _ = tx.send(r);
    });
    if let Err(e) = spawned {
        shared.resolving.fetch_sub(1, Ordering::SeqCst);
        return Err(unavailable(format!("gosling could not start a thread to resolve {host} ({e})")));
    }
    match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(Ok(addrs)) => Ok(addrs),
        Ok(Err(e)) => Err(unavailable(format!("cannot resolve {host}: {e}"))),
        Err(_) => {
            Err(unavailable(format!("resolving {host} took longer than {} s", shared.limits.resolve.as_secs_f32())))
        }
    }
}

/// One direction of a pipe: bytes read from one socket, not yet written to the other.
struct Flow {
    /// Allocated once; `buf[start..end]` is what waits to be written.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The reading side ended (or, for a plain request, its body was read whole).
    eof: bool,
    /// The writing side was shut down after `eof` (a half-close passed on).
    shut: bool,
    bytes: u64,
    /// Bytes still to read (a plain request's body); None: until the end.
    limit: Option<u64>,
}

impl Flow {
    fn new(first: Vec<u8>, limit: Option<u64>) -> Flow {
        let end = first.len();
        let mut buf = first;
        buf.resize(end.max(PIPE_BUFFER), 0);
        Flow { buf, start: 0, end, eof: limit == Some(0), shut: false, bytes: 0, limit }
    }
    fn pending(&self) -> bool {
        self.start < self.end
    }
    fn wants_read(&self) -> bool {
        !self.eof && !self.pending()
    }
    fn done(&self) -> bool {
        self.eof && !self.pending()
    }
    /// Reads what `from` has (non-blocking) into the empty buffer. Err: the connection failed.
    fn fill(&mut self, mut from: &TcpStream) -> io::Result<()> {
        let room = self.buf.len();
        let want = self.limit.map_or(room, |l| usize::try_from(l).unwrap_or(room).min(room));
        (self.start, self.end) = (0, 0);
        let n = match from.read(&mut self.buf[..want]) {
            Ok(0) => {
                self.eof = true;
                0
            }
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => 0,
            Err(e) => return Err(e),
        };
        self.end = n;
        if let Some(l) = self.limit.as_mut() {
            *l -= n as u64;
            if *l == 0 {
                self.eof = true;
            }
        }
        Ok(())
    }
    /// Writes what is buffered to `to` (non-blocking); counts it.
    fn drain(&mut self, mut to: &TcpStream) -> io::Result<()> {
        match to.write(&self.buf[self.start..self.end]) {
            Ok(n) => {
                self.start += n;
                self.bytes += n as u64;
                Ok(())
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

struct Piped {
    out: u64,
    into: u64,
    end: String,
}

/// Copies both ways until both ends are done (a plain request: until the answer ends), an
/// error, `idle` without a byte, or the proxy's stop. `first_up`/`first_down` are sent before
/// anything read (the forwarded head; the CONNECT's 200).
fn pipe(
    client: &TcpStream,
    upstream: &TcpStream,
    shared: &Shared,
    first_up: Vec<u8>,
    first_down: Vec<u8>,
    limit: Option<u64>,
) -> Piped {
    let plain = limit.is_some();
    let mut up = Flow::new(first_up, limit);
    let mut down = Flow::new(first_down, None);
    let header = down.end as u64;
    let (c, u) = (client.as_raw_fd(), upstream.as_raw_fd());
    let set = |s: &TcpStream| s.set_nonblocking(true);
    let end = 'pipe: {
        if let Err(e) = set(client).and_then(|()| set(upstream)) {
            break 'pipe format!("error: {e}");
        }
        loop {
            if up.done() && !up.shut && !plain {
                let _ = upstream.shutdown(Shutdown::Write);
                up.shut = true;
            }
            if down.done() && !down.shut {
                let _ = client.shutdown(Shutdown::Write);
                down.shut = true;
            }
            if down.done() && (up.done() || plain) {
                break "closed".to_string();
            }
            let on = |yes: bool, fd: RawFd| if yes { fd } else { -1 };
            let ready = poll_fds(
                [
                    (on(up.wants_read(), c), Ready::Read),
                    (on(down.pending(), c), Ready::Write),
                    (on(down.wants_read(), u), Ready::Read),
                    (on(up.pending(), u), Ready::Write),
                    (shared.stop.as_raw_fd(), Ready::Read),
                ],
                Some(shared.limits.idle),
            );
            if ready[4] {
                break "gosling stopped the extension's proxy".to_string();
            }
            if !ready.iter().any(|r| *r) {
                break format!("idle for {:?}", shared.limits.idle);
            }
            let step = (|| {
                if ready[0] {
                    up.fill(client)?;
                }
                if ready[2] {
                    down.fill(upstream)?;
                }
                if up.pending() {
                    up.drain(upstream)?;
                }
                if down.pending() {
                    down.drain(client)?;
                }
                Ok::<(), io::Error>(())
            })();
            if let Err(e) = step {
                break format!("error: {e}");
            }
        }
    };
    let _ = client.shutdown(Shutdown::Both);
    let _ = upstream.shutdown(Shutdown::Both);
    Piped { out: up.bytes, into: down.bytes.saturating_sub(header), end }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gosling_store::audit::AuditLimits;
    use std::path::{Path, PathBuf};
    use std::process::{Child, Command, Stdio};

    // ---- The grammar, the address classes and the decisions (pure).

    fn hp(s: &str) -> HostPort {
        HostPort::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn the_grammar_takes_names_quads_and_bracketed_ipv6_with_443_by_default() {
        for (given, shown) in [
            ("example.com", "example.com:443"),
            ("Example.COM:8080", "example.com:8080"),
            ("example.com.:80", "example.com:80"),
            ("*.Example.com", "*.example.com:443"),
            ("localhost:3000", "localhost:3000"),
            ("a-b.c9.example", "a-b.c9.example:443"),
            ("127.0.0.1:8080", "127.0.0.1:8080"),
            ("10.1.2.3", "10.1.2.3:443"),
            ("[::1]:8080", "[::1]:8080"),
            ("[2001:4860::8888]", "[2001:4860::8888]:443"),
            ("[::ffff:127.0.0.1]:9", "127.0.0.1:9"),
            ("x:65535", "x:65535"),
        ] {
            assert_eq!(hp(given).to_string(), shown, "{given}");
        }
    }

    #[test]
    fn the_grammar_refuses_everything_else_saying_what_to_write() {
        for (bad, says) in [
            ("", "must be HOST or HOST:PORT"),
            ("example.com:0", "1 to 65535"),
            ("example.com:65536", "1 to 65535"),
            ("example.com:08", "1 to 65535"),
            ("example.com:", "1 to 65535"),
            (":443", "the host is missing"),
            ("2130706433", "dotted quad"),
            ("2130706433:80", "dotted quad"),
            ("127.1", "dotted quad"),
            ("0177.0.0.1", "dotted quad"),
            ("127.000.0.1", "dotted quad"),
            ("0x7f.0.0.1", "ends in a number"),
            ("a.0x7f", "ends in a number"),
            ("host.123", "ends in a number"),
            ("::1", "in brackets"),
            ("[::1", "in brackets"),
            ("[::1]8080", "after `]`"),
            ("[fe80::1%eth0]:80", "not an IPv6 address"),
            ("[127.0.0.1]:80", "not an IPv6 address"),
            ("*.com", "top-level domain"),
            ("*", "is not one"),
            ("*.*.example.com", "is not one"),
            ("a..b", "is not one"),
            ("-a.com", "is not one"),
            ("a-.com", "is not one"),
            ("a_b.com", "is not one"),
            ("exa mple.com", "without spaces"),
            ("é.example", "without spaces"),
            ("http://example.com", "no scheme, path or user"),
            ("user@example.com", "no scheme, path or user"),
            ("0.0.0.0:80", "unspecified"),
            ("[::]:80", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("[ff02::1]", "multicast"),
            ("255.255.255.255", "broadcast"),
        ] {
            let e = HostPort::parse(bad).expect_err(bad);
            assert!(e.contains(says), "{bad:?}: {e}");
        }
        let long = format!("{}.com", "a".repeat(64));
        assert!(HostPort::parse(&long).unwrap_err().contains("is not one"));
    }

    #[test]
    fn address_classes_see_through_every_ipv6_form_of_an_ipv4_address() {
        let class = |s: &str| class_of(s.parse().unwrap());
        for (a, c) in [
            ("8.8.8.8", Class::Public),
            ("127.0.0.1", Class::Loopback),
            ("127.255.0.9", Class::Loopback),
            ("0.0.0.0", Class::Unspecified),
            ("0.1.2.3", Class::Unspecified),
            ("10.0.0.1", Class::Private),
            ("172.16.0.1", Class::Private),
            ("172.31.255.255", Class::Private),
            ("172.32.0.1", Class::Public),
            ("192.168.1.1", Class::Private),
            ("100.64.0.1", Class::Private),
            ("100.127.255.255", Class::Private),
            ("100.128.0.1", Class::Public),
            ("169.254.169.254", Class::LinkLocal),
            ("224.0.0.1", Class::Multicast),
            ("255.255.255.255", Class::Reserved),
            ("198.18.0.1", Class::Reserved),
            ("::1", Class::Loopback),
            ("::", Class::Unspecified),
            ("::ffff:127.0.0.1", Class::Loopback),
            ("::ffff:169.254.169.254", Class::LinkLocal),
            ("::ffff:10.0.0.1", Class::Private),
            ("::ffff:8.8.8.8", Class::Public),
            ("::127.0.0.1", Class::Loopback),
            ("::8.8.8.8", Class::Reserved),
            ("64:ff9b::7f00:1", Class::Loopback),
            ("64:ff9b::808:808", Class::Public),
            ("2002:7f00:1::", Class::Loopback),
            ("2002:a9fe:a9fe::1", Class::LinkLocal),
            ("fc00::1", Class::Private),
            ("fd12:3456::1", Class::Private),
            ("fe80::1", Class::LinkLocal),
            ("fec0::1", Class::Private),
            ("ff02::1", Class::Multicast),
            ("2001:db8::1", Class::Reserved),
            ("2606:4700::1111", Class::Public),
        ] {
            assert_eq!(class(a), c, "{a}");
        }
    }

    fn addrs(list: &[&str]) -> Vec<SocketAddr> {
        list.iter().map(|a| a.parse().unwrap()).collect()
    }

    #[test]
    fn an_approved_name_reaches_public_addresses_only_unless_approved_as_such() {
        let req = hp("evil.example:443");
        // A name (or a wildcard) resolving to this machine, the local network or the metadata
        // service: refused, naming the address to approve instead.
        for (entry, to, class) in [
            ("evil.example:443", "127.0.0.1:443", "loopback"),
            ("evil.example:443", "[::1]:443", "loopback"),
            ("evil.example:443", "[::ffff:127.0.0.1]:443", "loopback"),
            ("evil.example:443", "10.0.0.8:443", "private"),
            ("evil.example:443", "169.254.169.254:443", "link-local"),
            ("evil.example:443", "[::ffff:169.254.169.254]:443", "link-local"),
            ("*.test.example:443", "192.168.0.1:443", "private"),
            ("evil.example:443", "0.0.0.0:443", "unspecified"),
        ] {
            let e = admit(&hp(entry), &req, &addrs(&[to]), &[]).expect_err(to);
            assert!(e.contains(class) && e.contains("allow_host="), "{to}: {e}");
        }
        let e = admit(&hp("evil.example:443"), &req, &addrs(&["127.0.0.1:443"]), &[]).unwrap_err();
        assert!(e.contains("allow_host=127.0.0.1:443") && e.contains("localhost:PORT"), "{e}");
        // A rebinding answer mixing both: only the public address is used.
        let mixed = addrs(&["127.0.0.1:443", "93.184.215.14:443"]);
        assert_eq!(admit(&hp("evil.example:443"), &req, &mixed, &[]).unwrap(), addrs(&["93.184.215.14:443"]));
        // Approved as such: localhost by name reaches loopback (only), a literal itself.
        let lh = hp("localhost:443");
        assert_eq!(
            admit(&lh, &hp("localhost:443"), &addrs(&["127.0.0.1:443"]), &[]).unwrap(),
            addrs(&["127.0.0.1:443"])
        );
        assert!(admit(&lh, &hp("localhost:443"), &addrs(&["10.0.0.1:443"]), &[]).is_err());
        let lit = hp("10.0.0.5:8443");
        assert_eq!(admit(&lit, &lit, &addrs(&["10.0.0.5:8443"]), &[]).unwrap(), addrs(&["10.0.0.5:8443"]));
        let meta = hp("169.254.169.254:80");
        assert!(admit(&meta, &meta, &addrs(&["169.254.169.254:80"]), &[]).is_ok());
    }

    #[test]
    fn the_operators_nets_let_approved_names_resolve_there_and_nothing_else() {
        let nets = operator_nets(Some("203.0.113.80/32, 10.20.0.0/16 fd00:1::/64")).unwrap();
        assert_eq!(
            nets.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["203.0.113.80/32", "10.20.0.0/16", "fd00:1::/64"]
        );
        let req = hp("registry.npmjs.org:443");
        let entry = hp("registry.npmjs.org:443");
        // A transparent proxy's reserved address, a mirror on the local network: reached by name.
        assert!(admit(&entry, &req, &addrs(&["203.0.113.80:443"]), &nets).is_ok());
        assert!(admit(&entry, &req, &addrs(&["[::ffff:10.20.3.4]:443"]), &nets).is_ok());
        assert!(admit(&entry, &req, &addrs(&["[fd00:1::9]:443"]), &nets).is_ok());
        // Nothing beside them, and the refusal names the setting for such an address.
        for to in ["203.0.113.81:443", "10.21.0.1:443", "127.0.0.1:443", "169.254.169.254:443"] {
            assert!(admit(&entry, &req, &addrs(&[to]), &nets).is_err(), "{to}");
        }
        let e = admit(&entry, &req, &addrs(&["203.0.113.81:443"]), &[]).unwrap_err();
        assert!(e.contains("GOSLING_EGRESS_NETS=203.0.113.81"), "{e}");
        assert!(!admit(&entry, &req, &addrs(&["127.0.0.1:443"]), &[]).unwrap_err().contains("GOSLING_EGRESS_NETS"));
        assert_eq!(operator_nets(None).unwrap(), vec![]);
        assert_eq!(operator_nets(Some(" ")).unwrap(), vec![]);
        for (bad, says) in [
            ("127.0.0.0/8", "loopback"),
            ("0.0.0.0/8", "loopback"),
            ("::1", "loopback"),
            ("::/0", "wider than /16"),
            ("10.0.0.0/7", "wider than /8"),
            ("224.0.0.1", "multicast"),
            ("registry.npmjs.org", "not a network"),
            ("10.0.0.0/33", "prefix length"),
            ("10.0.0.0/+8", "prefix length"),
        ] {
            let e = operator_nets(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("GOSLING_EGRESS_NETS") && e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn names_match_exactly_wildcards_match_below_and_ports_match() {
        let p = EgressPolicy::from_strings(&["api.example.com".into(), "*.cdn.example:8443".into()]).unwrap();
        let ok = |r: &str| p.decide(&hp(r), "x").is_ok();
        assert!(ok("api.example.com:443") && ok("API.Example.com.:443"));
        assert!(!ok("example.com:443") && !ok("x.api.example.com:443") && !ok("api.example.com.evil:443"));
        assert!(ok("a.cdn.example:8443") && ok("a.b.cdn.example:8443"));
        assert!(!ok("cdn.example:8443") && !ok("acdn.example:8443") && !ok("a.cdn.example:443"));
        let e = p.decide(&hp("api.example.com:80"), "fetch").unwrap_err();
        assert!(e.contains("approved on port 443 only") && e.contains("allow_host=api.example.com:80"), "{e}");
        assert!(e.contains(r#""sandbox": {"hosts": ["api.example.com:80"]}"#), "{e}");
        let e = EgressPolicy::from_strings(&["2130706433".into()]).unwrap_err().to_string();
        assert!(e.contains("sandbox.hosts") && e.contains("dotted quad"), "{e}");
    }

    // ---- The proxy on a real socket, with real clients.

    struct Dir(PathBuf);
    impl Dir {
        fn new(tag: &str) -> Dir {
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "gosling-egress-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    struct Proxy {
        handle: Option<Handle>,
        port: u16,
        state: Dir,
    }

    impl Proxy {
        fn url(&self) -> String {
            format!("http://127.0.0.1:{}", self.port)
        }
        /// The audit log's lines, once there are `n` (each is written as its connection closes).
        fn audit(&self, n: usize) -> Vec<Value> {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let text = std::fs::read_to_string(self.state.0.join("audit.jsonl")).unwrap_or_default();
                let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
                if lines.len() >= n || Instant::now() > deadline {
                    assert_eq!(lines.len(), n, "audit lines: {text}");
                    return lines;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    fn proxy_with(hosts: &[String], limits: Limits) -> Proxy {
        let state = Dir::new("state");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let log = AuditLog::new(&state.0, AuditLimits { max_bytes: 1 << 20, keep: 1 });
        let policy = EgressPolicy::from_strings(hosts).unwrap();
        let handle = serve_with(listener, policy, Audit { log, extension: "fetch".into() }, limits).unwrap();
        Proxy { handle: Some(handle), port, state }
    }

    fn proxy(hosts: &[String]) -> Proxy {
        proxy_with(hosts, Limits::default())
    }

    /// A plain HTTP origin on loopback: answers each request with what it saw, then closes.
    fn origin() -> u16 {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                std::thread::spawn(move || answer_one(s));
            }
        });
        port
    }

    fn answer_one(mut s: TcpStream) {
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while find(&buf, b"\r\n\r\n").is_none() {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        let end = find(&buf, b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&buf[..end]).to_string();
        let header = |name: &str| {
            head.lines()
                .find_map(|l| l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case(name)))
                .map(|(_, v)| v.trim().to_string())
        };
        let len: usize = header("content-length").map_or(0, |v| v.parse().unwrap());
        let mut body = buf[end..].to_vec();
        while body.len() < len {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => body.extend_from_slice(&chunk[..n]),
            }
        }
        let line = head.lines().next().unwrap_or("").to_string();
        let answer = format!(
            "{line} host={} connection={} proxy-authorization={} body={}",
            header("host").unwrap_or_default(),
            header("connection").unwrap_or_default(),
            header("proxy-authorization").is_some(),
            String::from_utf8_lossy(&body)
        );
        let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}", answer.len());
    }

    /// Sends `bytes` to the proxy and reads until it closes (or 10 s).
    fn raw(p: &Proxy, bytes: &[u8]) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(bytes).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).to_string()
    }

    /// peers.env's value of `key` (scripts/peers installs it), else the program on PATH.
    fn program(key: &str, fallback: &str) -> String {
        let env = std::env::var("GOSLING_PEERS_ENV")
            .map(PathBuf::from)
            .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/peers/peers.env"));
        let from_peers = std::fs::read_to_string(env).ok().and_then(|t| {
            t.lines().find_map(|l| l.strip_prefix(&format!("export {key}=")).map(|v| v.trim_matches('"').to_string()))
        });
        from_peers.filter(|p| Path::new(p).exists()).unwrap_or_else(|| on_path(fallback))
    }

    fn on_path(name: &str) -> String {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file()).map_or_else(
            || {
                panic!(
                    "`{name}` is not installed: the egress tests drive real clients (apt-get install curl openssl; \
                     python3 and node come with scripts/peers/install)"
                )
            },
            |p| p.display().to_string(),
        )
    }

    /// A client process with the proxy variables it is given and no others inherited.
    fn client(cmd: &str) -> Command {
        let mut c = Command::new(cmd);
        for k in ["http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy", "no_proxy"] {
            c.env_remove(k);
        }
        c.env("NO_PROXY", "").stdin(Stdio::null());
        c
    }

    fn run(c: &mut Command) -> (bool, String, String) {
        let out = c.output().unwrap();
        (out.status.success(), String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
    }

    /// A TLS origin (Python's http.server behind ssl) with a fresh self-signed certificate for
    /// 127.0.0.1 and localhost; killed on drop.
    struct TlsOrigin {
        child: Child,
        port: u16,
        cert: PathBuf,
        _dir: Dir,
    }

    impl Drop for TlsOrigin {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait(); // wait: killed just above
        }
    }

    const TLS_SERVER: &str = r#"
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = ("tls %s host=%s" % (self.path, self.headers.get("Host"))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

    fn tls_origin() -> TlsOrigin {
        let dir = Dir::new("tls");
        let (cert, key) = (dir.0.join("cert.pem"), dir.0.join("key.pem"));
        let mut openssl = Command::new(on_path("openssl"));
        openssl.args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2"]);
        openssl.args(["-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]);
        let (ok, _, err) = run(openssl.arg("-keyout").arg(&key).arg("-out").arg(&cert));
        assert!(ok, "openssl req: {err}");
        let mut child = Command::new(program("MCP_PEER_PYTHON", "python3"))
            .args(["-c", TLS_SERVER])
            .arg(&cert)
            .arg(&key)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        std::io::BufRead::read_line(&mut out, &mut line).unwrap(); // wait: the server prints its port first
        let port = line.trim().parse().unwrap_or_else(|_| panic!("the TLS origin printed {line:?}"));
        TlsOrigin { child, port, cert, _dir: dir }
    }

    #[test]
    fn curl_python_httpx_and_node_reach_an_approved_host_over_connect_and_plain_http() {
        let tls = tls_origin();
        let plain = origin();
        let p = proxy(&[format!("127.0.0.1:{}", tls.port), format!("localhost:{plain}")]);
        let curl = on_path("curl");
        let https = format!("https://127.0.0.1:{}/curl", tls.port);
        let (ok, out, err) =
            run(client(&curl).args(["-sS", "--max-time", "20", "-x", &p.url(), "--cacert"]).arg(&tls.cert).arg(&https));
        assert!(ok && out == format!("tls /curl host=127.0.0.1:{}", tls.port), "curl: {out} {err}");
        // Plain http, to a name approved as such (localhost): forwarded in origin form, with
        // Connection: close and without the proxy's own headers.
        let http = format!("http://localhost:{plain}/plain?q=1");
        let auth = "Proxy-Authorization: Basic eDp5";
        let (ok, out, err) =
            run(client(&curl).args(["-sS", "--max-time", "20", "-x", &p.url(), "-H", auth, "-d", "hello", &http]));
        let want = format!(
            "POST /plain?q=1 HTTP/1.1 host=localhost:{plain} connection=close proxy-authorization=false body=hello"
        );
        assert!(ok && out == want, "curl: {out} {err}");
        let py = r#"
import ssl, sys, urllib.request
ctx = ssl.create_default_context(cafile=sys.argv[1])
print(urllib.request.urlopen(sys.argv[2], context=ctx, timeout=20).read().decode())
print(urllib.request.urlopen(sys.argv[3], timeout=20).read().decode())
"#;
        let (ok, out, err) = run(client(&program("MCP_PEER_PYTHON", "python3"))
            .env("HTTPS_PROXY", p.url())
            .env("HTTP_PROXY", p.url())
            .args(["-c", py])
            .arg(&tls.cert)
            .arg(format!("https://127.0.0.1:{}/python", tls.port))
            .arg(format!("http://localhost:{plain}/python")));
        assert!(ok, "python: {out} {err}");
        assert!(out.contains(&format!("tls /python host=127.0.0.1:{}", tls.port)), "{out}");
        assert!(out.contains(&format!("GET /python HTTP/1.1 host=localhost:{plain} connection=close")), "{out}");
        // One audit line per connection, each allowed, with the address and bytes both ways.
        let audited = |n: usize| {
            let lines = p.audit(n);
            for l in &lines {
                let got = (l["kind"].as_str(), l["extension"].as_str(), l["verdict"].as_str());
                assert_eq!(got, (Some("egress"), Some("fetch"), Some("allowed")), "{l}");
                assert!(l["bytes_out"].as_u64().unwrap() > 0 && l["bytes_in"].as_u64().unwrap() > 0, "{l}");
                assert!(l["address"].as_str().unwrap().starts_with("127.0.0.1:"), "{l}");
            }
            assert!(lines.iter().any(|l| l["host"] == "localhost" && l["port"] == plain), "{lines:?}");
        };
        audited(4);
        if std::env::var("GOSLING_SKIP_PEERS").is_ok_and(|v| v == "1") {
            let test = std::thread::current().name().unwrap_or("?").to_string();
            eprintln!("SKIP {test}: httpx and Node's fetch need the pinned peers (GOSLING_SKIP_PEERS=1)");
            return;
        }
        // httpx, which the MCP Python SDK and its servers (mcp-server-fetch) use, from the pinned venv.
        let httpx = r#"
import ssl, sys, httpx
ctx = ssl.create_default_context(cafile=sys.argv[1])
print(httpx.get(sys.argv[2], verify=ctx, timeout=20).text)
print(httpx.get(sys.argv[3], timeout=20).text)
"#;
        let (ok, out, err) = run(client(&program("MCP_PEER_PYTHON", "python3"))
            .env("HTTPS_PROXY", p.url())
            .env("HTTP_PROXY", p.url())
            .args(["-c", httpx])
            .arg(&tls.cert)
            .arg(format!("https://127.0.0.1:{}/httpx", tls.port))
            .arg(format!("http://localhost:{plain}/httpx")));
        assert!(ok, "httpx (the pinned venv's, scripts/peers/install): {out} {err}");
        assert!(out.contains(&format!("tls /httpx host=127.0.0.1:{}", tls.port)), "{out}");
        assert!(out.contains(&format!("GET /httpx HTTP/1.1 host=localhost:{plain} connection=close")), "{out}");
        audited(6);
        // Node's fetch through the proxy variables (NODE_USE_ENV_PROXY, Node 22.21 and later).
        let node = program("MCP_PEER_NODE", "node");
        let (_, version, _) = run(Command::new(&node).args(["-p", "process.versions.node"]));
        let version = version.trim();
        let v: Vec<u32> = version.split('.').map(|n| n.parse().unwrap_or(0)).collect();
        assert!(
            v >= vec![22, 21],
            "{node} is Node {version}: the test needs 22.21 or later (NODE_USE_ENV_PROXY); the pinned one comes with \
             scripts/peers/install target/peers (GOSLING_PEERS_ENV=target/peers/peers.env)"
        );
        let js = "(async()=>{for(const u of process.argv.slice(1)){const r=await fetch(u);console.log(r.status,await r.text())}})()\
                  .catch(e=>{console.log('failed',e.message,e.cause&&e.cause.message);process.exit(1)})";
        let (ok, out, err) = run(client(&node)
            .env("NODE_USE_ENV_PROXY", "1")
            .env("HTTPS_PROXY", p.url())
            .env("HTTP_PROXY", p.url())
            .env("NODE_EXTRA_CA_CERTS", &tls.cert)
            .args(["-e", js])
            .arg(format!("https://127.0.0.1:{}/node", tls.port))
            .arg(format!("http://localhost:{plain}/node")));
        assert!(ok, "node: {out} {err}");
        assert!(out.contains(&format!("200 tls /node host=127.0.0.1:{}", tls.port)), "{out}");
        assert!(out.contains(&format!("200 GET /node HTTP/1.1 host=localhost:{plain}")), "{out}");
        audited(8);
    }

    #[test]
    fn refusals_are_answered_with_what_to_approve_and_audited() {
        let plain = origin();
        let p = proxy(&[format!("127.0.0.1:{plain}")]);
        let curl = on_path("curl");
        // An unapproved host, over CONNECT (curl shows the status line) and plain http (the body).
        let (ok, _, err) =
            run(client(&curl).args(["-sS", "--max-time", "20", "-x", &p.url(), "https://unapproved.example/"]));
        assert!(!ok && err.contains("403"), "{err}");
        let (ok, out, _) =
            run(client(&curl).args(["-sS", "--max-time", "20", "-x", &p.url(), "http://unapproved.example:8080/"]));
        assert!(ok && out.contains("allow_host=unapproved.example:8080"), "{out}");
        let lines = p.audit(2);
        let first = (lines[0]["verdict"].as_str(), lines[0]["host"].as_str(), lines[0]["port"].as_u64());
        assert_eq!(first, (Some("refused"), Some("unapproved.example"), Some(443)));
        let reason = lines[0]["reason"].as_str().unwrap();
        assert!(reason.contains(r#""sandbox": {"hosts": ["unapproved.example:443"]}"#), "{reason}");
        assert_eq!(lines[0]["address"], Value::Null);
        let mut seen = 2;
        let mut refused = |req: String, status: &str, says: &str| {
            let answer = raw(&p, req.as_bytes());
            let first = answer.lines().next().unwrap_or_default().to_string();
            assert!(first.starts_with(&format!("HTTP/1.1 {status}")) && answer.contains(says), "{req:?} → {answer}");
            seen += 1;
            let l = p.audit(seen).pop().unwrap();
            assert_eq!(l["verdict"], "refused", "{l}");
            assert!(l["reason"].as_str().unwrap().contains(says), "{l}");
            if let Some(target) = req.strip_prefix("CONNECT ").and_then(|r| r.split(' ').next()) {
                let host = l["host"].as_str().unwrap();
                assert!(!host.is_empty() && target.contains(host), "the audit names what was asked: {l}");
            }
        };
        let connect = |target: &str| format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
        refused(connect(&format!("127.0.0.1:{}", plain + 1)), "403", "is not an approved host");
        refused(connect(&format!("127.0.0.1:{}", plain + 1)), "403", &format!("approved on port {plain} only"));
        refused(connect(&format!("2130706433:{plain}")), "403", "dotted quad");
        refused(connect(&format!("0x7f.0.0.1:{plain}")), "403", "ends in a number");
        refused(connect(&format!("[::1]:{plain}")), "403", "is not an approved host");
        refused(connect(&format!("0.0.0.0:{plain}")), "403", "is not an approved host");
        refused(connect(&format!("localhost:{plain}")), "403", "is not an approved host");
        refused(connect("10.0.0.1:443"), "403", "allow_host=10.0.0.1:443");
        refused(connect("169.254.169.254:80"), "403", "allow_host=169.254.169.254:80");
        refused(connect("127.0.0.1"), "403", "give the port");
        refused("HELLO\r\n\r\n".into(), "400", "is not METHOD TARGET");
        refused("GET /local HTTP/1.1\r\nHost: x\r\n\r\n".into(), "400", "is not an absolute http:// URL");
        refused("GET https://x.example/ HTTP/1.1\r\n\r\n".into(), "400", "goes through CONNECT");
        refused(format!("GET http://u:p@127.0.0.1:{plain}/ HTTP/1.1\r\n\r\n"), "400", "credentials");
        refused(format!("GET http://127.0.0.1:{plain}/ HTTP/1.1\r\n folded\r\n\r\n"), "400", "folded");
        refused(format!("GET http://127.0.0.1:{plain}/ HTTP/1.1\r\nX: a\x01b\r\n\r\n"), "400", "control characters");
        let chunked = format!("POST http://127.0.0.1:{plain}/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
        refused(chunked, "411", "Content-Length");
        let twice =
            format!("POST http://127.0.0.1:{plain}/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
        refused(twice, "400", "more than once");
        let big = format!("GET http://127.0.0.1:{plain}/ HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD));
        refused(big, "431", "longer than 16384 bytes");
        // What is approved still works afterwards.
        let answer = raw(&p, format!("GET http://127.0.0.1:{plain}/after HTTP/1.1\r\n\r\n").as_bytes());
        assert!(answer.contains("GET /after HTTP/1.1"), "{answer}");
        // One request per connection: bytes past the body's Content-Length are not passed on.
        let two = format!(
            "POST http://127.0.0.1:{plain}/one HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET http://127.0.0.1:{plain}/two HTTP/1.1\r\n\r\n"
        );
        let answer = raw(&p, two.as_bytes());
        assert!(answer.contains("POST /one HTTP/1.1") && answer.ends_with("body=abc"), "{answer}");
        assert_eq!(answer.matches("HTTP/1.1 200").count(), 1, "{answer}");
    }

    #[test]
    fn a_name_resolving_to_this_machine_is_refused_unless_approved_as_such() {
        let plain = origin();
        // This machine's own name resolves (/etc/hosts) to a loopback or local address.
        let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_ascii_lowercase();
        let resolved: Vec<SocketAddr> =
            (name.as_str(), plain).to_socket_addrs().map(Iterator::collect).unwrap_or_default();
        assert!(
            !resolved.is_empty() && resolved.iter().all(|a| class_of(a.ip()) != Class::Public),
            "this test needs the machine's name ({name}) to resolve to a local address (/etc/hosts); it gave {resolved:?}"
        );
        let p = proxy(&[format!("{name}:{plain}"), format!("localhost:{plain}")]);
        let answer = raw(&p, format!("CONNECT {name}:{plain} HTTP/1.1\r\n\r\n").as_bytes());
        assert!(
            answer.starts_with("HTTP/1.1 403") && answer.contains("which an approved host name may not reach"),
            "{answer}"
        );
        let l = p.audit(1).pop().unwrap();
        assert_eq!(l["verdict"], "refused");
        assert!(l["address"].as_str().is_some_and(|a| a.ends_with(&format!(":{plain}"))), "{l}");
        // localhost, approved by name, is approved as such.
        let answer = raw(&p, format!("GET http://localhost:{plain}/lh HTTP/1.1\r\n\r\n").as_bytes());
        assert!(answer.contains("GET /lh HTTP/1.1"), "{answer}");
    }

    #[test]
    fn an_approved_name_that_does_not_resolve_is_a_502_within_the_deadline() {
        // `.invalid` never resolves (RFC 6761); a resolver without a network may instead take
        // longer than the deadline, which answers the same way.
        let limits = Limits { resolve: Duration::from_secs(3), ..Limits::default() };
        let p = proxy_with(&["gosling-test.invalid".into()], limits);
        let answer = raw(&p, b"CONNECT gosling-test.invalid:443 HTTP/1.1\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 502"), "{answer}");
        assert!(
            answer.contains("cannot resolve gosling-test.invalid") || answer.contains("took longer than 3 s"),
            "{answer}"
        );
        let l = p.audit(1).pop().unwrap();
        assert_eq!((l["verdict"].as_str(), l["host"].as_str()), (Some("refused"), Some("gosling-test.invalid")), "{l}");
    }

    #[test]
    fn the_head_has_a_deadline_and_connections_a_cap() {
        let limits = Limits { max_connections: 2, head: Duration::from_millis(1500), ..Limits::default() };
        let p = proxy_with(&["example.com".into()], limits);
        let hang = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
        let hang2 = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
        // The third, while both wait for their heads, is turned away at once.
        let third = raw(&p, b"");
        assert!(third.starts_with("HTTP/1.1 503") && third.contains("2 connections open"), "{third}");
        for mut s in [hang, hang2] {
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut out = String::new();
            let _ = s.read_to_string(&mut out);
            assert!(out.starts_with("HTTP/1.1 408") && out.contains("did not arrive within 1.5 s"), "{out}");
        }
        let lines = p.audit(3);
        assert_eq!(lines.iter().filter(|l| l["verdict"] == "refused").count(), 3);
        let deadline = Instant::now() + Duration::from_secs(10);
        while p.handle.as_ref().unwrap().connections() > 0 {
            assert!(Instant::now() < deadline, "connections still counted");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn an_idle_pipe_ends_and_dropping_the_handle_ends_pipes_and_stops_accepting() {
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let quiet = silent.local_addr().unwrap().port();
        let hosts = [format!("127.0.0.1:{quiet}")];
        let p = proxy_with(&hosts, Limits { idle: Duration::from_millis(300), ..Limits::default() });
        let mut tunnel = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
        tunnel.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(tunnel, "CONNECT 127.0.0.1:{quiet} HTTP/1.1\r\n\r\n").unwrap();
        let mut out = String::new();
        let _ = tunnel.read_to_string(&mut out);
        assert_eq!(out, "HTTP/1.1 200 Connection established\r\n\r\n");
        let l = p.audit(1).pop().unwrap();
        assert_eq!((l["verdict"].as_str(), l["reason"].as_str()), (Some("allowed"), Some("idle for 300ms")), "{l}");

        let mut p = proxy(&hosts);
        let mut tunnel = TcpStream::connect(("127.0.0.1", p.port)).unwrap();
        tunnel.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(tunnel, "CONNECT 127.0.0.1:{quiet} HTTP/1.1\r\n\r\n").unwrap();
        let mut ok = [0u8; 39];
        tunnel.read_exact(&mut ok).unwrap();
        let handle = p.handle.take().unwrap();
        assert_eq!(handle.connections(), 1);
        drop(handle);
        let mut rest = Vec::new();
        assert_eq!(tunnel.read_to_end(&mut rest).map_err(|e| e.kind()), Ok(0), "the pipe ends");
        let l = p.audit(1).pop().unwrap();
        assert_eq!(l["reason"], "gosling stopped the extension's proxy", "{l}");
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", p.port)).is_ok() {
            assert!(Instant::now() < deadline, "the listener is still open after the handle's drop");
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(silent);
    }
}
