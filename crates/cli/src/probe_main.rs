//! `gosling probe`'s entry: the probe, or in test builds the conformance runner's client.

#[cfg(feature = "test-hooks")]
use crate::conformance;
use crate::open::Opener;
use crate::probe;

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
