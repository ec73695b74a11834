//! `gosling`: parse the command line, set up logging, run a subcommand, map errors to exit codes.

use gosling::agent_cmd::{Mode, Serve};
use gosling::Error as AgentError;
use std::process::ExitCode;

const USAGE: &str = "\
gosling — goose's MCP-scope agent server in one small binary

Usage:
  gosling agent [--port N] [--host ADDR] [--no-tls]
                                           serve the goose server API (port from GOOSE_PORT)
                                           over HTTPS with a self-signed certificate, as goosed;
                                           --no-tls or GOOSE_TLS=false: plain HTTP
  gosling serve [--tls] [--host ADDR] [--port N] [--allowed-origin O]…
                [--tls-cert-path F --tls-key-path F] [--with-builtin a,b]
                [--platform P] [--enable-scheduler] [--dangerously-unauthenticated]
                                           goose serve's command line, for Goose Desktop 1.41+
                                           (needs GOOSE_SERVER__SECRET_KEY; see serve --help)
  gosling acp                              serve the Agent Client Protocol on stdin/stdout (for
                                           editors: Zed, JetBrains, Neovim, Emacs, acpx)
  gosling install [--check] [--yes | --approve=DIGEST] LINK
                                           install an extension from a goose://extension?… link
  gosling import [--dry-run] [--yes] FILE  import mcpServers (Claude Desktop, Cursor, .mcp.json)
  gosling secret set NAME | list | remove NAME
                                           store a secret (value from standard input, never
                                           echoed), list the stored names, forget one
  gosling extensions list | enable NAME | disable NAME | remove NAME
                                           the configured extensions, switched on or off
  gosling mcp NAME                         serve a builtin extension (developer, memory) as an
                                           MCP server on stdin/stdout
  gosling probe [--call TOOL [--args JSON] [--times N] | --prompt NAME [--args JSON] | --read URI] [--env N=V]…
                [--env-file FILE] (-- CMD ARGS… | URL)
                                           connect to one MCP server and show what it offers
  gosling auth NAME                        sign in (OAuth) to a configured streamable_http
                                           extension; prints the URL to open
  gosling --help | --version
";

fn main() -> ExitCode {
    // ureq logs raw request bytes (Authorization headers included) at trace: never below info.
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The server logs its life at info; the other commands speak for themselves on stdout and
    // stderr, so only warnings and errors are logged unless RUST_LOG says otherwise.
    let default_level =
        if matches!(args.first().map(String::as_str), Some("agent" | "serve")) { "info" } else { "warn" };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_level))
        .filter_module("ureq", log::LevelFilter::Info)
        .filter_module("ureq_proto", log::LevelFilter::Info)
        .target(env_logger::Target::Stderr)
        .format(|out, record| {
            use std::io::Write;
            let time = gosling::util::now_rfc3339();
            writeln!(out, "[{time} {} {}] {}", record.level(), record.target(), record.args())
        })
        .init();
    match args.first().map(String::as_str) {
        None | Some("-h") | Some("--help") | Some("help") => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some("-V") | Some("--version") => {
            println!("gosling {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some("agent") if wants_help(&args[1..]) => {
            print!("{AGENT_USAGE}");
            ExitCode::SUCCESS
        }
        Some("serve") if wants_help(&args[1..]) => {
            print!("{SERVE_USAGE}");
            ExitCode::SUCCESS
        }
        Some("agent") => exit(agent(&args[1..]), ExitCode::FAILURE),
        Some("serve") => exit(serve(&args[1..]), ExitCode::FAILURE),
        Some("acp") if wants_help(&args[1..]) => {
            print!("{ACP_USAGE}");
            ExitCode::SUCCESS
        }
        Some("acp") => exit(acp(), ExitCode::FAILURE),
        Some("install") => gosling::cli::install::install_main(&opener(), &args[1..]),
        Some("import") => gosling::cli::install::import_main(&opener(), &args[1..]),
        Some("mcp") => match args.get(1).map(String::as_str) {
            Some("-h") | Some("--help") => {
                println!("usage: gosling mcp NAME\nserves a builtin extension as an MCP server on stdin/stdout; known builtins: {}", gosling::builtins::KNOWN.join(", "));
                ExitCode::SUCCESS
            }
            None => {
                eprintln!("gosling: usage: gosling mcp NAME; known builtins: {}", gosling::builtins::KNOWN.join(", "));
                ExitCode::from(2)
            }
            Some(name) => exit(gosling::builtins::serve(name), ExitCode::from(2)),
        },
        Some("secret") => gosling::cli::manage::secret_main(&opener(), &args[1..]),
        Some("extensions") => gosling::cli::manage::extensions_main(&opener(), &args[1..]),
        Some("probe") => gosling::cli::probe_main(&opener(), &args[1..]),
        Some("auth") => gosling::cli::auth::main(&opener(), &args[1..]),
        Some(other) => {
            eprintln!("gosling: unknown command {other:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// What the CLI commands open (the config store, the trust policy), resolved from the process
/// environment as the servers' core resolves it. The commands hold sign-in tokens and secrets
/// typed at the terminal, so they get the servers' hardening too.
fn opener() -> gosling::cli::Opener<'static> {
    gosling::core::harden();
    gosling::cli::Opener::new(&gosling::config::ProcessEnv)
}

/// Success, or the error printed and `failure`.
fn exit<E: std::fmt::Display>(r: Result<(), E>, failure: ExitCode) -> ExitCode {
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gosling: {e}");
            failure
        }
    }
}

const AGENT_USAGE: &str = "\
usage: gosling agent [--port N] [--host ADDR] [--tls | --no-tls]

Serves goosed 1.34's HTTP API (Goose Desktop 1.34 starts it as `goosed agent`) and the web page,
over HTTPS with a self-signed certificate made at start unless --no-tls or GOOSE_TLS=false.
The port comes from GOOSE_PORT (default 3000), the secret from GOOSE_SERVER__SECRET_KEY
(generated into the state dir when unset). See README's Configuration for every variable.
";

const SERVE_USAGE: &str = "\
usage: gosling serve [options]

goose serve's command line, so Goose Desktop 1.41+ can start gosling as its `bin/goose`, or
use it as an external backend. Serves the same HTTP server as `gosling agent`.

  --host ADDR                   address to bind (default 127.0.0.1, or GOOSE_HOST)
  --port N                      port (default 3000, or GOOSE_PORT); 0 picks a free one
  --tls                         HTTPS; without --tls-cert-path/--tls-key-path a self-signed
                                certificate is made once and kept (0600) in the config dir
                                as tls/server.pem and tls/server.key; its SHA-256 is printed
                                as GOOSED_CERT_FINGERPRINT=… before the server answers
  --tls-cert-path FILE          PEM certificate chain (with --tls-key-path)
  --tls-key-path FILE           PEM private key
  --allowed-origin ORIGIN       a browser origin allowed to call the server (repeatable)
  --with-builtin a,b            builtin extensions every new session gets (developer, memory)
  --platform NAME               the client's platform (desktop, cli…); logged
  --enable-scheduler            accepted; gosling has no scheduler
  --dangerously-unauthenticated start without GOOSE_SERVER__SECRET_KEY: a secret is generated
                                into the state dir and still required by every client
  -h, --help                    this text

GOOSE_SERVER__SECRET_KEY must be set (Goose Desktop sets it): clients send it as ?token= or
X-Secret-Key.
";

const ACP_USAGE: &str = "\
usage: gosling acp

Serves the Agent Client Protocol (JSON-RPC, one message a line) on stdin/stdout, for editors
(Zed, JetBrains, Neovim, Emacs, acpx): configure the editor's agent command as `gosling acp`.
Logs go to stderr. Provider, model and extensions come from the same config as the server;
see README's Configuration for every variable.
";

fn wants_help(args: &[String]) -> bool {
    args.iter().any(|a| a == "-h" || a == "--help")
}

/// `gosling acp`: the core, hardened as every server mode, then ACP on stdio.
fn acp() -> Result<(), AgentError> {
    let start = |e| AgentError::AcpStart(Box::new(e));
    let cfg = gosling::config::Config::from_env(&gosling::config::ProcessEnv, Some(0), None)
        .map_err(|e| start(AgentError::Config(e)))?;
    gosling::core::harden();
    let host = gosling::core::build(cfg).map_err(start)?;
    let r = gosling::acp::run(host).map_err(AgentError::Acp);
    gosling::agent_cmd::end_orphans();
    r
}

/// The value after `flag`, or the error naming what it needs.
fn value<'a>(
    it: &mut impl Iterator<Item = &'a String>,
    flag: &'static str,
    expected: &'static str,
) -> Result<&'a String, AgentError> {
    it.next().filter(|v| !v.starts_with("--")).ok_or(AgentError::MissingValue { flag, expected })
}

fn serve(args: &[String]) -> Result<(), AgentError> {
    let (mut port, mut host, mut tls) = (None, None, false);
    let (mut cert, mut key, mut origins, mut builtins) = (None, None, Vec::new(), vec!["developer".to_string()]);
    let mut opts = Serve::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        // goose's parser (clap) also takes `--flag=value`.
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut take = |expected: &'static str| -> Result<String, AgentError> {
            let flag = match flag {
                "--port" => "--port",
                "--host" => "--host",
                "--platform" => "--platform",
                "--allowed-origin" => "--allowed-origin",
                "--tls-cert-path" => "--tls-cert-path",
                "--tls-key-path" => "--tls-key-path",
                _ => "--with-builtin",
            };
            match &inline {
                Some(v) if !v.is_empty() => Ok(v.clone()),
                Some(_) => Err(AgentError::MissingValue { flag, expected }),
                None => value(&mut it, flag, expected).cloned(),
            }
        };
        match flag {
            "--port" => {
                let p = take("a number 0-65535")?;
                port = Some(
                    p.parse().map_err(|_| AgentError::MissingValue { flag: "--port", expected: "a number 0-65535" })?,
                )
            }
            "--host" => {
                let h = take("an IP address")?;
                // goose serve's default and Desktop's value; `localhost` is loopback too.
                let h = if h == "localhost" { "127.0.0.1".to_string() } else { h };
                host = Some(
                    h.parse().map_err(|_| AgentError::MissingValue { flag: "--host", expected: "an IP address" })?,
                )
            }
            "--platform" => opts.platform = Some(take("a platform name (desktop, cli)")?),
            "--allowed-origin" => origins.push(take("an origin such as http://localhost:5173")?),
            "--tls-cert-path" => cert = Some(take("a PEM certificate file")?),
            "--tls-key-path" => key = Some(take("a PEM key file")?),
            "--with-builtin" => {
                let list = take("builtin names separated by commas (developer, memory)")?;
                builtins = list.split(',').map(str::trim).filter(|b| !b.is_empty()).map(String::from).collect();
            }
            "--tls" if inline.is_none() => tls = true,
            "--enable-scheduler" if inline.is_none() => opts.scheduler = true,
            "--dangerously-unauthenticated" if inline.is_none() => opts.unauthenticated = true,
            _ => return Err(AgentError::UnknownArgument(a.to_string())),
        }
    }
    let env = gosling::config::ProcessEnv;
    let mut cfg = gosling::config::Config::from_env(&env, port, host).map_err(AgentError::Config)?;
    // goose serve speaks plain HTTP unless --tls (or its GOOSE_TLS setting) asks for HTTPS.
    use gosling::config::Env;
    let tls_env =
        env.get("GOOSE_TLS").is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1" | "yes"));
    cfg.tls.enabled = tls || tls_env;
    if cert.is_some() || key.is_some() {
        cfg.tls.cert_path = cert.map(Into::into);
        cfg.tls.key_path = key.map(Into::into);
    }
    cfg.cors_origins.extend(origins);
    cfg.with_builtins = builtins;
    gosling::agent_cmd::run(cfg, Mode::Serve(opts))
}

fn agent(args: &[String]) -> Result<(), AgentError> {
    let mut port = None;
    let mut host = None;
    let mut tls = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--port" => {
                let missing = AgentError::MissingValue { flag: "--port", expected: "a number 0-65535" };
                port = Some(it.next().and_then(|p| p.parse().ok()).ok_or(missing)?)
            }
            "--host" => {
                let missing = AgentError::MissingValue { flag: "--host", expected: "an IP address" };
                host = Some(it.next().and_then(|h| h.parse().ok()).ok_or(missing)?)
            }
            "--tls" => tls = Some(true),
            "--no-tls" => tls = Some(false),
            other => return Err(AgentError::UnknownArgument(other.to_string())),
        }
    }
    let mut cfg =
        gosling::config::Config::from_env(&gosling::config::ProcessEnv, port, host).map_err(AgentError::Config)?;
    if let Some(on) = tls {
        cfg.tls.enabled = on;
    }
    gosling::agent_cmd::run(cfg, Mode::Agent)
}
