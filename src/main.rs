//! `gosling`: parse the command line, set up logging, run a subcommand, map errors to exit codes.

use gosling::agent_cmd::Error as AgentError;
use std::process::ExitCode;

const USAGE: &str = "\
gosling — goose's MCP-scope agent server in one small binary

Usage:
  gosling agent [--port N] [--host ADDR] [--no-tls]
                                           serve the goose server API (port from GOOSE_PORT)
                                           over HTTPS with a self-signed certificate, as goosed;
                                           --no-tls or GOOSE_TLS=false: plain HTTP
  gosling acp                              serve the Agent Client Protocol on stdin/stdout (for
                                           editors: Zed, JetBrains, Neovim, Emacs, acpx)
  gosling install [--check] [--yes] LINK   install an extension from a goose://extension?… link
  gosling import [--dry-run] [--yes] FILE  import mcpServers (Claude Desktop, Cursor, .mcp.json)
  gosling mcp NAME                         serve a builtin extension (developer, memory) as an
                                           MCP server on stdin/stdout
  gosling probe [--call TOOL | --prompt NAME [--args JSON] | --read URI] [--env N=V]…
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
    let default_level = if args.first().map(String::as_str) == Some("agent") { "info" } else { "warn" };
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
        Some("agent") => exit(agent(&args[1..]), ExitCode::FAILURE),
        Some("acp") => exit(gosling::acp::run(), ExitCode::FAILURE),
        Some("install") => gosling::cli::install::install_main(&args[1..]),
        Some("import") => gosling::cli::install::import_main(&args[1..]),
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
        Some("probe") => gosling::cli::probe::main(&args[1..]),
        Some("auth") => gosling::cli::auth::main(&args[1..]),
        Some(other) => {
            eprintln!("gosling: unknown command {other:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
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
    gosling::agent_cmd::run(cfg)
}
