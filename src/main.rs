//! `gosling`: parse the command line, set up logging, run a subcommand, map errors to exit codes.

use std::process::ExitCode;

const USAGE: &str = "\
gosling — goose's MCP-scope agent server in one small binary

Usage:
  gosling agent [--port N] [--host ADDR]   serve the goose server API (port from GOOSE_PORT)
  gosling mcp NAME                         serve a builtin extension over stdio
  gosling probe URL                        connect to a Streamable HTTP MCP server, list its tools
  gosling --help | --version
";

fn main() -> ExitCode {
    // ureq_proto logs raw request bytes (header values: extension tokens) at trace: never let it.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .filter_module("ureq_proto", log::LevelFilter::Debug)
        .target(env_logger::Target::Stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        None | Some("-h") | Some("--help") | Some("help") => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some("-V") | Some("--version") => {
            println!("gosling {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Some("probe") if args.len() == 2 && (args[1].starts_with("http://") || args[1].starts_with("https://")) => {
            let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").ok();
            match gosling::cli::probe_http::run(&args[1], scenario.as_deref()) {
                Ok(out) => {
                    print!("{out}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("gosling: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Some(other) => {
            eprintln!("gosling: unknown command {other:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
