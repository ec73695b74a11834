//! Command-line subcommands other than the server itself.
#![deny(unsafe_code)]
pub mod auth;
/// The conformance runner's client: test builds only.
#[cfg(feature = "test-hooks")]
pub mod conformance;
pub mod install;
pub mod manage;
pub mod open;
pub mod probe;

pub use open::Opener;

/// `gosling probe`: the probe, or — in test builds run by the MCP conformance runner
/// (`MCP_CONFORMANCE_SCENARIO` set) — the runner's client.
pub fn probe_main(open: &Opener, args: &[String]) -> std::process::ExitCode {
    #[cfg(feature = "test-hooks")]
    if let Ok(scenario) = std::env::var("MCP_CONFORMANCE_SCENARIO") {
        if !probe::asks_for_help(args) {
            return conformance::main(open, args, &scenario);
        }
    }
    probe::main(open, args)
}
