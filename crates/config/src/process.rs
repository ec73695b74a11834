//! The process configuration: where to listen, the shared secret, where files live, limits.
//! Read once at start by `Config::from_env`.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::env::{config_dir, state_dir, Env};
use crate::error::Error;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// `GOOSE_SERVER__SECRET_KEY` was set.
    Env,
    /// Generated at start and written to this 0600 file.
    Generated(PathBuf),
}

/// HTTPS (`--tls` / `GOOSE_TLS`), and the PEM files to serve it with. The paths are kept as
/// given; `tls::ServerTls::from_config` checks them (both or neither) when TLS is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    pub enabled: bool,
    /// `GOOSE_TLS_CERT_PATH`: PEM certificate chain, leaf first.
    pub cert_path: Option<PathBuf>,
    /// `GOOSE_TLS_KEY_PATH`: PEM private key.
    pub key_path: Option<PathBuf>,
}

#[derive(Clone)]
pub struct Config {
    pub host: IpAddr,
    /// 0 = any free port.
    pub port: u16,
    pub secret: String,
    pub secret_source: SecretSource,
    /// config.json and secrets.json (`GOSLING_CONFIG_DIR`, else `$XDG_CONFIG_HOME/gosling`).
    pub config_dir: PathBuf,
    /// Sessions, the audit log, memory notes, the generated secret (`GOSLING_STATE_DIR`,
    /// else `$XDG_STATE_HOME/gosling`).
    pub state_dir: PathBuf,
    /// Requests handled at once; beyond it new requests get 503 with Retry-After.
    pub max_requests: usize,
    /// Largest request body accepted; beyond it 413.
    pub max_body: usize,
    /// Connections open at once (`GOSLING_MAX_CONNECTIONS`); `None`: derived from the file
    /// descriptor limit at start. Beyond it a new connection is closed at once.
    pub max_connections: Option<usize>,
    /// How long a connection may sit without sending a byte (slow or idle clients).
    pub io_timeout: Duration,
    /// Serve HTTPS (the default, as goosed 1.34) instead of plain HTTP (`GOOSE_TLS=false`).
    pub tls: TlsConfig,
    /// `Host` names answered besides the loopback ones and `host` (`GOSLING_ALLOWED_HOSTS`,
    /// comma-separated, lower-case, without ports).
    pub allowed_hosts: Vec<String>,
    /// Browser origins given CORS headers (`GOSLING_CORS_ORIGINS`, comma-separated, exact).
    pub cors_origins: Vec<String>,
    /// Builtin extensions every new session gets besides the enabled ones (`gosling serve
    /// --with-builtin a,b`, as goose serve; empty for the other modes).
    pub with_builtins: Vec<String>,
    /// `audit.jsonl` is rotated before a line would take it past this size
    /// (`GOSLING_AUDIT_MAX_BYTES`, default 10 MiB, at least 4096) ...
    pub audit_max_bytes: u64,
    /// ... keeping this many older files (`GOSLING_AUDIT_KEEP`, default 5; 0 keeps none).
    pub audit_keep: u32,
    /// A session's extensions are stopped after this long unused, and started again at its
    /// next use (`GOSLING_IDLE_STOP_SECS`, default 1800; 0 never stops them).
    pub idle_stop: Option<Duration>,
    /// How long an extension's elicitation waits for the person (`GOSLING_ELICITATION_TIMEOUT_SECS`,
    /// default 300 s as goose; a value that is not a number is ignored).
    pub elicitation_timeout: Duration,
}

/// goose waits 300 s for an elicitation's answer.
const ELICITATION_TIMEOUT: Duration = Duration::from_secs(300);

impl std::fmt::Debug for SecretRedacted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} bytes>", self.0.len())
    }
}
struct SecretRedacted<'a>(&'a str);

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("secret", &SecretRedacted(&self.secret))
            .field("secret_source", &self.secret_source)
            .field("config_dir", &self.config_dir)
            .field("state_dir", &self.state_dir)
            .field("max_requests", &self.max_requests)
            .field("max_body", &self.max_body)
            .field("max_connections", &self.max_connections)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("cors_origins", &self.cors_origins)
            .field("with_builtins", &self.with_builtins)
            .field("audit_max_bytes", &self.audit_max_bytes)
            .field("audit_keep", &self.audit_keep)
            .field("idle_stop", &self.idle_stop)
            .field("elicitation_timeout", &self.elicitation_timeout)
            .field("io_timeout", &self.io_timeout)
            .field("tls", &self.tls)
            .finish()
    }
}

/// `GOOSE_TLS`: true/1/yes or false/0/no (any case); unset is on, as in goosed 1.34, whose
/// clients (Goose Desktop) speak only HTTPS to the backend they start.
fn parse_tls_flag(env: &dyn Env) -> Result<bool, Error> {
    match env.get("GOOSE_TLS") {
        None => Ok(true),
        Some(v) => match v.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            _ => Err(Error::BadValue { key: "GOOSE_TLS", value: v, expected: "true or false" }),
        },
    }
}

fn parse_num<T: std::str::FromStr>(env: &dyn Env, key: &'static str, default: T) -> Result<T, Error> {
    match env.get(key) {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|_| Error::BadValue { key, value: v, expected: "a valid number" }),
    }
}

/// The non-empty, trimmed items of a comma-separated variable.
fn list(env: &dyn Env, key: &str) -> impl Iterator<Item = String> {
    let value = env.get(key).unwrap_or_default();
    value.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect::<Vec<_>>().into_iter()
}

impl Config {
    /// Reads the environment. `port_flag`/`host_flag` come from the command line and win.
    /// The secret is not resolved here (see `resolve_secret`), so this stays pure.
    pub fn from_env(env: &dyn Env, port_flag: Option<u16>, host_flag: Option<IpAddr>) -> Result<Config, Error> {
        let port = match port_flag {
            Some(p) => p,
            None => match env
                .get("GOOSE_PORT")
                .map(|p| ("GOOSE_PORT", p))
                .or_else(|| env.get("GOOSE_SERVER__PORT").map(|p| ("GOOSE_SERVER__PORT", p)))
            {
                Some((key, p)) => p.trim().parse().map_err(|_| Error::BadValue {
                    key,
                    value: p,
                    expected: "a port number (0-65535)",
                })?,
                None => 3000,
            },
        };
        let host = match host_flag {
            Some(h) => h,
            None => match env.get("GOOSE_HOST") {
                Some(h) => h.trim().parse().map_err(|_| Error::BadValue {
                    key: "GOOSE_HOST",
                    value: h,
                    expected: "an IP address",
                })?,
                None => IpAddr::from([127, 0, 0, 1]),
            },
        };
        let secret = env.get("GOOSE_SERVER__SECRET_KEY").unwrap_or_default();
        let max_requests = parse_num(env, "GOSLING_MAX_REQUESTS", 64usize)?;
        if max_requests == 0 {
            return Err(Error::TooSmall { key: "GOSLING_MAX_REQUESTS", min: 1 });
        }
        Ok(Config {
            host,
            port,
            secret_source: SecretSource::Env,
            secret,
            config_dir: config_dir(env),
            state_dir: state_dir(env),
            max_requests,
            max_body: parse_num(env, "GOSLING_MAX_BODY_BYTES", 50usize << 20)?,
            // Unset or 0: derived from the descriptor limit at start.
            max_connections: Some(parse_num(env, "GOSLING_MAX_CONNECTIONS", 0usize)?).filter(|n| *n > 0),
            io_timeout: Duration::from_secs(parse_num(env, "GOSLING_IO_TIMEOUT_SECS", 30u64)?),
            tls: TlsConfig {
                enabled: parse_tls_flag(env)?,
                cert_path: env.get("GOOSE_TLS_CERT_PATH").map(PathBuf::from),
                key_path: env.get("GOOSE_TLS_KEY_PATH").map(PathBuf::from),
            },
            allowed_hosts: list(env, "GOSLING_ALLOWED_HOSTS").map(|h| h.to_ascii_lowercase()).collect(),
            cors_origins: list(env, "GOSLING_CORS_ORIGINS").collect(),
            with_builtins: Vec::new(),
            audit_max_bytes: audit_max_bytes(env)?,
            audit_keep: parse_num(env, "GOSLING_AUDIT_KEEP", 5)?,
            idle_stop: Some(parse_num(env, "GOSLING_IDLE_STOP_SECS", 1800u64)?)
                .filter(|s| *s > 0)
                .map(Duration::from_secs),
            elicitation_timeout: crate::settings::elicitation_timeout(env, ELICITATION_TIMEOUT),
        })
    }
}

fn audit_max_bytes(env: &dyn Env) -> Result<u64, Error> {
    let max_bytes = parse_num(env, "GOSLING_AUDIT_MAX_BYTES", 10u64 << 20)?;
    // A line is about 200 bytes: a smaller file would rotate at every few calls.
    if max_bytes < 4096 {
        return Err(Error::TooSmall { key: "GOSLING_AUDIT_MAX_BYTES", min: 4096 });
    }
    Ok(max_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::MapEnv;
    use std::collections::HashMap;

    #[test]
    fn goose_variables() {
        let env = MapEnv(HashMap::from([("GOOSE_PORT", "4321"), ("GOOSE_SERVER__SECRET_KEY", "s3"), ("HOME", "/h")]));
        let c = Config::from_env(&env, None, None).unwrap();
        assert_eq!(c.port, 4321);
        assert_eq!(c.secret, "s3");
        assert_eq!(c.host.to_string(), "127.0.0.1");
        assert_eq!(c.config_dir, PathBuf::from("/h/.config/gosling"));
        assert_eq!(c.state_dir, PathBuf::from("/h/.local/state/gosling"));
        assert!(!format!("{c:?}").contains("s3"), "Debug must not print the secret");
    }

    #[test]
    fn flags_win_and_bad_values_are_named() {
        let env = MapEnv(HashMap::from([("GOOSE_PORT", "x")]));
        assert!(Config::from_env(&env, None, None).unwrap_err().to_string().contains("GOOSE_PORT"));
        assert_eq!(Config::from_env(&env, Some(0), None).unwrap().port, 0);
        let env = MapEnv(HashMap::from([("GOSLING_MAX_REQUESTS", "0")]));
        assert!(Config::from_env(&env, Some(0), None).is_err());
        let conns = |v: &'static str| {
            Config::from_env(&MapEnv(HashMap::from([("GOSLING_MAX_CONNECTIONS", v)])), Some(0), None)
                .map(|c| c.max_connections)
        };
        assert_eq!(conns("100"), Ok(Some(100)));
        assert_eq!(conns("0"), Ok(None), "0 means: derive it from the descriptor limit");
        assert!(conns("many").unwrap_err().to_string().contains("GOSLING_MAX_CONNECTIONS"));
        assert_eq!(Config::from_env(&MapEnv(HashMap::new()), Some(0), None).unwrap().max_connections, None);
    }

    #[test]
    fn tls_switch_and_files() {
        let tls = |pairs: &[(&'static str, &'static str)]| {
            Config::from_env(&MapEnv(pairs.iter().copied().collect()), None, None).map(|c| c.tls)
        };
        assert!(tls(&[]).unwrap().enabled, "HTTPS is the default, as in goosed 1.34");
        for on in ["true", "1", "yes", "TRUE"] {
            assert!(tls(&[("GOOSE_TLS", on)]).unwrap().enabled, "{on}");
        }
        for off in ["false", "0", "no"] {
            assert!(!tls(&[("GOOSE_TLS", off)]).unwrap().enabled, "{off}");
        }
        assert!(tls(&[("GOOSE_TLS", "maybe")]).unwrap_err().to_string().contains("GOOSE_TLS"));
        let t =
            tls(&[("GOOSE_TLS", "1"), ("GOOSE_TLS_CERT_PATH", "/c.pem"), ("GOOSE_TLS_KEY_PATH", "/k.pem")]).unwrap();
        assert_eq!((t.cert_path.unwrap(), t.key_path.unwrap()), (PathBuf::from("/c.pem"), PathBuf::from("/k.pem")));
    }
}
