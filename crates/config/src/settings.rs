//! The settings other layers use besides the process `Config`: each variable read here, once
//! per use, through the `Env` seam, and handed out typed. No other crate (the root's logging
//! aside) reads the environment (`layers::only_config_reads_the_environment`).
//!
//! User settings that the config store can also hold (goose's `GOOSE_*` keys, a provider's
//! host): the environment wins over the store, a rule written once here (`user_setting`).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use crate::env::Env;

/// A user setting: the environment's value when set and not empty, else `stored()` (the
/// config store's, plain then secret), as goose reads its config.
pub fn user_setting(env: &dyn Env, key: &str, stored: impl FnOnce() -> Option<String>) -> Option<String> {
    env.get(key).or_else(stored)
}

/// True when `key` is set (not empty) in the environment, so it overrides the store.
pub fn in_environment(env: &dyn Env, key: &str) -> bool {
    env.get(key).is_some()
}

/// The value of the variable a person named on a command line (`gosling probe
/// --client-secret-env VAR`): that person's choice, not a server setting.
pub fn named_variable(env: &dyn Env, key: &str) -> Option<String> {
    env.get(key)
}

/// How long an elicitation waits for its answer (`GOSLING_ELICITATION_TIMEOUT_SECS`), else
/// `default`. A value that is not a number is ignored.
pub fn elicitation_timeout(env: &dyn Env, default: Duration) -> Duration {
    env.get("GOSLING_ELICITATION_TIMEOUT_SECS").and_then(|v| v.trim().parse().ok()).map_or(default, Duration::from_secs)
}

/// A duration in milliseconds from `key` (the stdio ladder's `GOSLING_LADDER_WAIT_MS`,
/// `GOSLING_STDIN_STALL_MS`), else `default`.
pub fn millis(env: &dyn Env, key: &str, default: Duration) -> Duration {
    env.get(key).and_then(|v| v.trim().parse().ok()).map_or(default, Duration::from_millis)
}

/// The trust policy's own settings, as the process started with them (a running server's
/// environment does not change; the allowlist file it names may, and is read again).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustPolicySettings {
    /// `GOSLING_ALLOWED_COMMANDS`: the site's own command names, comma-separated.
    pub allowed_commands: Option<String>,
    /// `GOSLING_ALLOWLIST_FILE`: a local allowlist named by the operator (so it must exist).
    pub allowlist_file: Option<PathBuf>,
    /// `GOOSE_ALLOWLIST`: goose's allowlist URL (it may carry a token: never shown whole).
    pub allowlist_url: Option<String>,
    /// `GOOSE_ALLOWLIST_WARNING` = `true` or `1`: allowlist refusals only warn, as in goose.
    pub warn_only: bool,
}

/// The trust policy's settings from the environment.
pub fn trust_policy(env: &dyn Env) -> TrustPolicySettings {
    TrustPolicySettings {
        allowed_commands: env.get("GOSLING_ALLOWED_COMMANDS"),
        allowlist_file: env.get("GOSLING_ALLOWLIST_FILE").map(PathBuf::from),
        allowlist_url: env.get("GOOSE_ALLOWLIST"),
        warn_only: env
            .get("GOOSE_ALLOWLIST_WARNING")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true") || v.trim() == "1"),
    }
}

/// Container mode (`GOSLING_CONTAINER`): the running container stdio extensions run in.
pub fn container(env: &dyn Env) -> Option<String> {
    env.get("GOSLING_CONTAINER")
}

/// The container engine (`GOSLING_CONTAINER_TOOL`), else `docker`.
pub fn container_tool(env: &dyn Env) -> String {
    env.get("GOSLING_CONTAINER_TOOL").unwrap_or_else(|| "docker".into())
}

/// The Python for inline_python extensions without uvx (`GOSLING_PYTHON`), else `python3`.
pub fn python(env: &dyn Env) -> String {
    env.get("GOSLING_PYTHON").unwrap_or_else(|| "python3".into())
}

/// The home directory (`HOME`).
pub fn home(env: &dyn Env) -> Option<PathBuf> {
    env.get("HOME").map(PathBuf::from)
}

/// `program` in one of `PATH`'s directories, as a file.
/// Where `program` is on this process's `PATH`, looked up in its absolute entries only (a
/// relative or empty entry names whatever directory a child happens to run in).
pub fn find_in_path(env: &dyn Env, program: &str) -> Option<PathBuf> {
    let path = env.get("PATH")?;
    std::env::split_paths(&path).filter(|d| d.is_absolute()).map(|d| d.join(program)).find(|p| p.is_file())
}

/// This process's `PATH`, as a child's lookup starts from it.
pub fn path(env: &dyn Env) -> Option<String> {
    env.get("PATH")
}

/// An extra CA bundle (`SSL_CERT_FILE`) to trust besides the system's.
pub fn ssl_cert_file(env: &dyn Env) -> Option<PathBuf> {
    env.get("SSL_CERT_FILE").map(PathBuf::from)
}

/// True when there is a desktop to open a browser on (`DISPLAY` or `WAYLAND_DISPLAY`).
pub fn has_display(env: &dyn Env) -> bool {
    env.get("DISPLAY").is_some() || env.get("WAYLAND_DISPLAY").is_some()
}

/// The builtins' working directory (`GOOSE_WORKING_DIR`, set by the runtime for a session's
/// cwd), when set.
pub fn goose_working_dir(env: &dyn Env) -> Option<PathBuf> {
    env.get("GOOSE_WORKING_DIR").map(PathBuf::from)
}

/// Whether `GOSLING_DEVELOPER_UNRESTRICTED` (1 or true, any case) lifts the developer
/// builtin's path confinement.
pub fn developer_unrestricted(env: &dyn Env) -> bool {
    env.get("GOSLING_DEVELOPER_UNRESTRICTED").is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// Whether `GOSLING_UNCONFINED` (1 or true, any case) opts every stdio extension out of the
/// kernel confinement (`extensions::sandbox`): the operator's explicit choice, shown in each
/// consent summary.
pub fn unconfined(env: &dyn Env) -> bool {
    env.get("GOSLING_UNCONFINED").is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// `GOSLING_EGRESS_NETS`: networks that confined extensions' approved host names may resolve
/// to besides public addresses (checked by `extensions::egress::operator_nets`).
pub fn egress_nets(env: &dyn Env) -> Option<String> {
    env.get("GOSLING_EGRESS_NETS")
}

/// The builtins a first run enables (`GOSLING_FIRST_RUN_EXTENSIONS`, comma-separated; `none`
/// for none), else the developer builtin.
pub fn first_run_extensions(env: &dyn Env) -> String {
    env.get("GOSLING_FIRST_RUN_EXTENSIONS").unwrap_or_else(|| "developer".into())
}

/// Whether the web page's sign-in link is printed even without a terminal
/// (`GOSLING_PRINT_LOGIN_LINK`).
pub fn print_login_link(env: &dyn Env) -> bool {
    env.get("GOSLING_PRINT_LOGIN_LINK").is_some()
}

/// Test builds: act as if the kernel lacked Landlock and user namespaces
/// (`GOSLING_TEST_KERNEL_LACKS_CONFINEMENT`), to test the refusal on such kernels.
pub fn test_kernel_lacks_confinement(env: &dyn Env) -> bool {
    env.get("GOSLING_TEST_KERNEL_LACKS_CONFINEMENT").is_some()
}

/// Test builds: act as if no pids cgroup could be made (`GOSLING_TEST_NO_PIDS_CGROUP`), to
/// test what a root gosling says when its extensions' process limit cannot hold.
pub fn test_no_pids_cgroup(env: &dyn Env) -> bool {
    env.get("GOSLING_TEST_NO_PIDS_CGROUP").is_some()
}

/// Test builds: whether the fault routes answer (`GOSLING_TEST_FAULTS`).
pub fn test_faults(env: &dyn Env) -> bool {
    env.get("GOSLING_TEST_FAULTS").is_some()
}

/// The MCP conformance runner's scenario, context and protocol revision
/// (`MCP_CONFORMANCE_SCENARIO`, `_CONTEXT`, `_PROTOCOL_VERSION`), for the probe in test builds.
pub fn conformance(env: &dyn Env, what: Conformance) -> Option<String> {
    env.get(match what {
        Conformance::Scenario => "MCP_CONFORMANCE_SCENARIO",
        Conformance::Context => "MCP_CONFORMANCE_CONTEXT",
        Conformance::ProtocolVersion => "MCP_CONFORMANCE_PROTOCOL_VERSION",
    })
}

/// Which of the conformance runner's variables `conformance` reads.
#[derive(Debug, Clone, Copy)]
pub enum Conformance {
    Scenario,
    Context,
    ProtocolVersion,
}

/// The variables of this process that `keep` accepts (by name), values as the OS has them:
/// what a child may inherit. A child's environment is built from these and its own settings
/// only, never from the rest.
pub fn inherited(keep: impl Fn(&str) -> bool) -> Vec<(OsString, OsString)> {
    std::env::vars_os().filter(|(k, _)| keep(&k.to_string_lossy())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::MapEnv;
    use std::collections::HashMap;

    #[test]
    fn the_environment_wins_over_the_store() {
        let env = MapEnv(HashMap::from([("GOOSE_MODEL", "from-env"), ("GOOSE_MODE", "")]));
        assert_eq!(user_setting(&env, "GOOSE_MODEL", || Some("stored".into())).as_deref(), Some("from-env"));
        assert_eq!(user_setting(&env, "GOOSE_PROVIDER", || Some("stored".into())).as_deref(), Some("stored"));
        assert!(in_environment(&env, "GOOSE_MODEL"));
        assert!(!in_environment(&env, "GOOSE_PROVIDER"));
    }

    #[test]
    fn typed_values_and_their_defaults() {
        let none = MapEnv(HashMap::new());
        let d = Duration::from_secs(300);
        assert_eq!(elicitation_timeout(&none, d), d);
        let env = MapEnv(HashMap::from([("GOSLING_ELICITATION_TIMEOUT_SECS", "7"), ("GOSLING_LADDER_WAIT_MS", "x")]));
        assert_eq!(elicitation_timeout(&env, d), Duration::from_secs(7));
        assert_eq!(millis(&env, "GOSLING_LADDER_WAIT_MS", d), d, "not a number: the default");
        assert_eq!((container_tool(&none), python(&none)), ("docker".to_string(), "python3".to_string()));
        assert_eq!(first_run_extensions(&none), "developer");
        for (v, on) in [("1", true), ("TRUE", true), ("yes", false)] {
            let env = MapEnv(HashMap::from([("GOSLING_DEVELOPER_UNRESTRICTED", v)]));
            assert_eq!(developer_unrestricted(&env), on, "{v}");
        }
        assert!(!developer_unrestricted(&none));
    }
}
