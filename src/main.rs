//! `gosling`: parse the command line, set up logging, run a subcommand, map errors to exit codes.

use std::process::ExitCode;

const USAGE: &str = "\
gosling — goose's MCP-scope agent server in one small binary

Usage:
  gosling agent [--port N] [--host ADDR]   serve the goose server API (port from GOOSE_PORT)
  gosling mcp NAME                         serve a builtin extension (developer, memory) as an
                                           MCP server on stdin/stdout
  gosling --help | --version
";

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).target(env_logger::Target::Stderr).init();
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
        Some("mcp") => match args.get(1).map(String::as_str) {
            Some("-h") | Some("--help") => {
                println!("usage: gosling mcp NAME\nserves a builtin extension as an MCP server on stdin/stdout; known builtins: {}", gosling::builtins::KNOWN.join(", "));
                ExitCode::SUCCESS
            }
            None => {
                eprintln!("gosling: usage: gosling mcp NAME; known builtins: {}", gosling::builtins::KNOWN.join(", "));
                ExitCode::from(2)
            }
            Some(name) => match gosling::builtins::serve(name) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("gosling: {e}");
                    ExitCode::from(2)
                }
            },
        },
        Some(other) => {
            eprintln!("gosling: unknown command {other:?}\n\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
