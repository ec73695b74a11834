//! `gosling probe`'s entry: the probe, or in test builds the conformance runner's client.

#[cfg(feature = "test-hooks")]
use crate::conformance;
use crate::open::Opener;
use crate::probe;

/// `gosling probe`: the probe, or — in test builds run by the MCP conformance runner
/// (`MCP_CONFORMANCE_SCENARIO` set) — the runner's client.
pub fn probe_main(open: &Opener, args: &[String]) -> std::process::ExitCode {
    #[cfg(feature = "test-hooks")]
    if let Some(scenario) = gosling_config::settings::conformance(
        &gosling_config::ProcessEnv,
        gosling_config::settings::Conformance::Scenario,
    ) {
        if !probe::asks_for_help(args) {
            return conformance::main(open, args, &scenario);
        }
    }
    probe::main(open, args)
}
