//! `gosling install LINK` and `gosling import FILE`: the terminal side of adding extensions.
//!
//! Both show what will run (command and arguments or URL, environment names, where it came
//! from) before writing anything, ask on a terminal unless `--yes`, and refuse to guess when
//! there is no terminal to ask. Both apply `extensions::policy` exactly as the server does and
//! persist through `store::config_store`. An extension whose secrets are missing is saved
//! disabled, with the list of what is missing and how to provide it. Secret values are read
//! with echo off and never printed.
//!
//! Exit codes: 0 done (or `--check`/`--dry-run` passed), 1 refused or failed, 2 usage error.

use crate::Opener;
use gosling_config::Env;
use gosling_extensions::config::ExtensionStore;
use gosling_extensions::config::{unresolved, ExtensionConfig, ExtensionEntry, Kind, Unresolved};
use gosling_extensions::consent;
use gosling_extensions::deeplink::{check_not_replacing, plan_install, InstallPlan};
use gosling_extensions::import::{parse_mcp_servers, MAX_IMPORT_BYTES};
use gosling_extensions::policy::InstallSource;
use gosling_store::config_store::ConfigStore;
use gosling_util::printable;
use serde_json::Value;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

pub const INSTALL_USAGE: &str = "\
Usage: gosling install [--check] [--yes | --approve=DIGEST] [--secrets-from-env] [--wait] 'goose://extension?…'
  --check             validate the link against the policy and print what it would install and its digest; write nothing
  --yes               do not ask for confirmation (required when stdin is not a terminal)
  --approve=DIGEST    install without asking only if the link's launch has this digest (from --check)
  --secrets-from-env  take missing secrets from environment variables of the same name
  --wait              on a terminal, wait for Enter before exiting (for the goose:// handler's window)
";

pub const IMPORT_USAGE: &str = "\
Usage: gosling import [--dry-run] [--yes] FILE
  FILE is an mcpServers file: Claude Desktop's claude_desktop_config.json, Cursor's mcp.json or .mcp.json
  --dry-run  print what would be imported and whether the policy allows it; write nothing
  --yes      do not ask for confirmation (required when stdin is not a terminal)
";

#[derive(Default)]
struct Flags {
    positional: Vec<String>,
    check: bool,
    yes: bool,
    dry_run: bool,
    secrets_from_env: bool,
    wait: bool,
    /// `--approve=DIGEST`: the digest of the launch the person reviewed.
    approve: Option<String>,
}

/// A command line `install`/`import` cannot use.
#[derive(Debug, PartialEq, Eq)]
enum FlagError {
    UnknownOption(String),
    /// Not exactly one link or file; how many there were.
    Positional(usize),
}

impl std::fmt::Display for FlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlagError::UnknownOption(o) => write!(f, "unknown option {o:?}"),
            FlagError::Positional(n) => write!(f, "expected exactly one argument, got {n}"),
        }
    }
}

fn parse_flags(args: &[String], allowed: &[&str]) -> Result<Flags, FlagError> {
    let mut f = Flags::default();
    for a in args {
        let known = allowed.contains(&a.as_str());
        match a.as_str() {
            "--check" if known => f.check = true,
            "--yes" | "-y" if allowed.contains(&"--yes") => f.yes = true,
            "--dry-run" if known => f.dry_run = true,
            "--secrets-from-env" if known => f.secrets_from_env = true,
            "--wait" if known => f.wait = true,
            s if s.starts_with("--approve=") && allowed.contains(&"--approve") => {
                f.approve = Some(s["--approve=".len()..].to_string())
            }
            s if s.starts_with('-') && s.len() > 1 => return Err(FlagError::UnknownOption(s.to_string())),
            _ => f.positional.push(a.clone()),
        }
    }
    if f.positional.len() != 1 {
        return Err(FlagError::Positional(f.positional.len()));
    }
    Ok(f)
}

fn fail(cmd: &str, msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("gosling {cmd}: {msg}");
    ExitCode::from(1)
}

/// The command line of `gosling cmd`, or how it exits at once: 0 after printing `usage` for
/// `-h`/`--help`, 2 on a usage error.
fn flags_of(cmd: &str, usage: &str, args: &[String], allowed: &[&str]) -> Result<Flags, ExitCode> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        print!("{usage}");
        return Err(ExitCode::SUCCESS);
    }
    parse_flags(args, allowed).map_err(|e| {
        eprintln!("gosling {cmd}: {e}\n\n{usage}");
        ExitCode::from(2)
    })
}

/// `gosling install …` (arguments after `install`).
pub fn install_main(open: &Opener, args: &[String]) -> ExitCode {
    let allowed = ["--check", "--yes", "--approve", "--secrets-from-env", "--wait"];
    let flags = match flags_of("install", INSTALL_USAGE, args, &allowed) {
        Ok(f) => f,
        Err(code) => return code,
    };
    let code = install(open, &flags).unwrap_or_else(|e| fail("install", e));
    if flags.wait && std::io::stdin().is_terminal() {
        confirm("Press Enter to close. ");
    }
    code
}

/// What `install` or `import` failed on; printed by `fail`.
type Failure = Box<dyn std::error::Error>;

fn install(open: &Opener, flags: &Flags) -> Result<ExitCode, Failure> {
    let policy = open.policy()?;
    let link = &flags.positional[0];

    if flags.check {
        // Look at stored secrets only if a config exists: --check never creates files.
        let store = open.existing_store("secrets.json").and_then(Result::ok);
        let present = |k: &str| store.as_ref().is_some_and(|s| s.get_secret(k).ok().flatten().is_some());
        let plan = plan_install(link, &policy, &present)?;
        print_plan(&plan);
        println!("ok: the link is valid and the policy allows it");
        if !plan.refused_secrets.is_empty() {
            println!(
                "it would be saved disabled: it reads gosling's own secret(s) {}",
                plan.refused_secrets.join(", ")
            );
        }
        return Ok(ExitCode::SUCCESS);
    }

    let store = open.store()?;
    let present = |k: &str| store.get_secret(k).ok().flatten().is_some();
    let mut plan = plan_install(link, &policy, &present)?;
    print_plan(&plan);
    let key = plan.config.key();
    check_not_replacing(store.extension(&key)?.as_ref(), &plan.config)?;
    let terminal = std::io::stdin().is_terminal();
    if let Some(digest) = &flags.approve {
        // Scripted: the digest the person reviewed (`--check`) must be this link's launch.
        consent::check_approval(&plan.config, Some(digest), &policy)?;
    } else if !flags.yes {
        ask("Install this extension? [y/N] ", "not installed", "install")?;
    }
    fill_secrets(&store, &mut plan.missing_secrets, &plan.summary, terminal, flags.secrets_from_env, open.env())?;
    let mut entry = plan.entry();
    // The person approved what was printed (on the terminal, or with --yes).
    consent::stamp(&mut entry.config, consent::Origin::Link);
    let existed = store.upsert_extension(&entry)?;
    log::debug!("install: {} extension {key} from a goose:// link", if existed { "updated" } else { "added" });
    report_saved(&entry, existed, &plan.missing_secrets, &plan.refused_secrets);
    Ok(ExitCode::SUCCESS)
}

/// Asks `question` on the terminal; refused (`"{outcome}: …"`) when there is no terminal to
/// ask on (`--yes` to `verb` without asking) or the answer is not yes.
fn ask(question: &str, outcome: &str, verb: &str) -> Result<(), Failure> {
    if !std::io::stdin().is_terminal() {
        let why =
            format!("{outcome}: stdin is not a terminal to confirm on; re-run with --yes to {verb} without asking");
        return Err(why.into());
    }
    if !confirm(question) {
        return Err(format!("{outcome}: cancelled").into());
    }
    Ok(())
}

/// `gosling import …` (arguments after `import`).
pub fn import_main(open: &Opener, args: &[String]) -> ExitCode {
    match flags_of("import", IMPORT_USAGE, args, &["--dry-run", "--yes"]) {
        Ok(flags) => import(open, &flags).unwrap_or_else(|e| fail("import", e)),
        Err(code) => code,
    }
}

fn import(open: &Opener, flags: &Flags) -> Result<ExitCode, Failure> {
    let path = std::path::Path::new(&flags.positional[0]);
    let cannot_read = |e: std::io::Error| format!("cannot read {}: {e}", path.display());
    if std::fs::metadata(path).map_err(cannot_read)?.len() > MAX_IMPORT_BYTES as u64 {
        return Err(format!("{}: larger than {MAX_IMPORT_BYTES} bytes", path.display()).into());
    }
    let items = parse_mcp_servers(&std::fs::read_to_string(path).map_err(cannot_read)?)?;
    let policy = open.policy()?;
    let store = match flags.dry_run {
        true => open.existing_store("config.json").transpose()?,
        false => Some(open.store()?),
    };

    println!("{} server(s) in {}", items.len(), path.display());
    let mut accepted: Vec<(ExtensionEntry, Unresolved)> = Vec::new();
    let mut refused = 0;
    let present = |k: &str| store.as_ref().is_some_and(|s| s.get_secret(k).ok().flatten().is_some());
    for item in items {
        print_config(&item.config, &present);
        for w in &item.warnings {
            println!("    warning: {}", printable(w));
        }
        match policy.check(&item.config, InstallSource::Import) {
            Ok(ws) => {
                for w in ws.iter().filter(|w| !item.warnings.iter().any(|iw| iw.starts_with(w.as_str()))) {
                    println!("    warning: {}", printable(w));
                }
                let u = unresolved(&item.config, &present);
                if !u.missing.is_empty() {
                    println!("    secrets needed: {} (saved disabled until they are set)", u.missing.join(", "));
                }
                if !u.refused.is_empty() {
                    let only = Unresolved { missing: Vec::new(), refused: u.refused.clone() };
                    println!("    refused secrets: {} (saved disabled)", only.explain());
                }
                let existing = store.as_ref().and_then(|s| s.extension(&item.config.key()).ok().flatten());
                if let Err(e) = check_not_replacing(existing.as_ref(), &item.config) {
                    refused += 1;
                    println!("    refused: {e}");
                    continue;
                }
                println!("    ok");
                accepted.push((ExtensionEntry { enabled: item.enabled && u.is_empty(), config: item.config }, u));
            }
            Err(e) => {
                refused += 1;
                println!("    refused: {e}");
            }
        }
    }
    let status = if refused > 0 { ExitCode::from(1) } else { ExitCode::SUCCESS };
    if flags.dry_run {
        println!("dry run: nothing was written ({} would be imported, {refused} refused)", accepted.len());
        return Ok(status);
    }
    if accepted.is_empty() {
        println!("nothing to import ({refused} refused)");
        return Ok(status);
    }
    if !flags.yes {
        ask(&format!("Import {} extension(s)? [y/N] ", accepted.len()), "nothing imported", "import")?;
    }
    let store = store.expect("opened unless dry run");
    let total = accepted.len();
    for (mut entry, u) in accepted {
        consent::stamp(&mut entry.config, consent::Origin::Import);
        let existed = store.upsert_extension(&entry)?;
        log::debug!("import: {} extension {}", if existed { "updated" } else { "added" }, entry.config.key());
        report_saved(&entry, existed, &u.missing, &u.refused);
    }
    println!("imported {total}, refused {refused}");
    Ok(status)
}

fn shell_words(cmd: &str, args: &[String]) -> String {
    std::iter::once(cmd.to_string())
        .chain(args.iter().map(|a| {
            if a.is_empty() || a.contains(char::is_whitespace) || a.contains(['"', '\'']) {
                format!("{a:?}")
            } else {
                printable(a)
            }
        }))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One config, as the import listing shows it, from the one summary (`consent::summary`): what
/// runs, every environment variable and header with its value (masked only where the name
/// marks it as a secret), so nothing the file sets reaches an extension unseen; the risks and
/// the digest the answer approves.
fn print_config(c: &ExtensionConfig, present: &dyn Fn(&str) -> bool) {
    let s = consent::summary(c, present);
    let text = |v: &Value| v.as_str().map(printable).unwrap_or_default();
    let shown = |e: &Value| if e["masked"] == true { text(&e["value"]) } else { format!("{:?}", text(&e["value"])) };
    println!("  {} ({}, key {})", printable(c.name()), c.type_name(), c.key());
    if let Kind::Stdio { cmd, args, .. } = &c.kind {
        println!("    runs:    {}", shell_words(cmd, args));
    }
    match (c.type_name(), s.get("url")) {
        ("sse", Some(url)) => println!("    server:  {} (legacy SSE, will not run)", text(url)),
        (_, Some(url)) => println!("    server:  {}", text(url)),
        _ => {}
    }
    for h in s.get("header_values").and_then(Value::as_array).into_iter().flatten() {
        println!("    header:  {}: {}", text(&h["name"]), shown(h));
    }
    for e in s.get("env").and_then(Value::as_array).into_iter().flatten() {
        let name = text(&e["name"]);
        if e["secret"] != true {
            println!("    env:     {name}={}", shown(e));
        } else if gosling_extensions::config::is_reserved_secret(&name) {
            println!("    env:     {name} (one of gosling's own secrets: never read)");
        } else {
            println!("    env:     {name} (read from the secrets store)");
        }
    }
    for r in s.get("risks").and_then(Value::as_array).into_iter().flatten() {
        println!("    risk:    {}", text(r));
    }
    println!("    digest:  {}", text(&s["digest"]));
}

/// What a link will install, from the plan's summary.
fn print_plan(plan: &InstallPlan) {
    let s = &plan.summary;
    let text = |k: &str| s.get(k).and_then(Value::as_str).map(printable).unwrap_or_default();
    println!("Extension {:?} (key {}) from a goose:// link", text("name"), text("key"));
    println!("  type:        {}", text("type"));
    if let Kind::Stdio { cmd, args, .. } = &plan.config.kind {
        println!("  runs:        {}", shell_words(cmd, args));
    }
    if let Some(url) = s.get("url").and_then(Value::as_str) {
        println!("  server:      {}", printable(url));
    }
    if let Some(h) = s.get("headers").and_then(Value::as_array).filter(|h| !h.is_empty()) {
        println!("  headers:     {}", h.iter().filter_map(Value::as_str).map(printable).collect::<Vec<_>>().join(", "));
    }
    for e in s.get("env").and_then(Value::as_array).into_iter().flatten() {
        let name = e["name"].as_str().unwrap_or("");
        let d = e["description"].as_str().unwrap_or("");
        let about = if d.is_empty() { String::new() } else { format!(" — {}", printable(d)) };
        println!("  env:         {name}{about}");
    }
    for r in s.get("reads").and_then(Value::as_array).into_iter().flatten() {
        println!(
            "  reads:       {} ← stored secret {} ({})",
            r["where"].as_str().map(printable).unwrap_or_default(),
            r["secret"].as_str().map(printable).unwrap_or_default(),
            if r["refused"] == true {
                "refused: one of gosling's own secrets"
            } else if r["stored"] == true {
                "stored"
            } else {
                "not stored yet"
            }
        );
    }
    println!("  timeout:     {} s", s["timeout"]);
    for (key, label) in [("description", "description:"), ("id", "id:"), ("installation_notes", "notes:")] {
        let value = text(key);
        if !value.is_empty() {
            println!("  {label:<13}{value}");
        }
    }
    let secrets: Vec<String> = s
        .get("secrets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|k| {
            if plan.refused_secrets.iter().any(|m| m == k) {
                format!("{k} (refused: one of gosling's own secrets)")
            } else if plan.missing_secrets.iter().any(|m| m == k) {
                format!("{k} (not set)")
            } else {
                format!("{k} (set)")
            }
        })
        .collect();
    if !secrets.is_empty() {
        println!("  secrets:     {}", secrets.join(", "));
    }
    for w in &plan.warnings {
        println!("  warning:     {}", printable(w));
    }
    for r in s.get("risks").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        println!("  risk:        {r}");
    }
    println!("  digest:      {}", text("digest"));
}

fn report_saved(entry: &ExtensionEntry, existed: bool, missing: &[String], refused: &[String]) {
    let verb = if existed { "updated" } else { "installed" };
    let key = entry.config.key();
    let name = printable(entry.config.name());
    if !refused.is_empty() {
        let u = Unresolved { missing: Vec::new(), refused: refused.to_vec() };
        println!("{verb} {name} (key {key}) but left it disabled: {}", u.explain());
    } else if missing.is_empty() {
        println!(
            "{verb} {name} (key {key}){}",
            if entry.enabled { ", enabled for new sessions" } else { ", disabled" }
        );
    } else {
        println!(
            "{verb} {name} (key {key}) but left it disabled: missing secret(s) {}; store each with `gosling secret set {}` \
             (the value is read from standard input), then `gosling extensions enable {key}` — or in the web page's Settings, \
             Goose Desktop's extension settings, or with POST /config/upsert {{\"key\": \"{}\", \"value\": \"…\", \"is_secret\": true}}",
            missing.join(", "),
            missing[0],
            missing[0]
        );
    }
}

fn confirm(question: &str) -> bool {
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    // wait: a person at the terminal answers
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Turns terminal echo off for as long as it lives (through `stty`, argv only; best effort).
pub(crate) struct NoEcho;

fn stty(setting: &str) {
    let _ = std::process::Command::new("stty").arg(setting).stdin(std::process::Stdio::inherit()).status();
}

impl NoEcho {
    pub(crate) fn new() -> NoEcho {
        stty("-echo");
        NoEcho
    }
}

impl Drop for NoEcho {
    fn drop(&mut self) {
        stty("echo");
        eprintln!();
    }
}

/// Fills `missing` secrets from the environment (`--secrets-from-env`) and, on a terminal, by
/// asking; what is provided is stored and removed from `missing`.
fn fill_secrets(
    store: &ConfigStore,
    missing: &mut Vec<String>,
    summary: &Value,
    terminal: bool,
    from_env: bool,
    env: &dyn Env,
) -> Result<(), gosling_store::atomic::Error> {
    let describe = |k: &str| {
        summary["env"]
            .as_array()
            .and_then(|a| a.iter().find(|e| e["name"] == k))
            .and_then(|e| e["description"].as_str())
            .map(printable)
            .unwrap_or_default()
    };
    let mut still = Vec::new();
    for k in missing.drain(..) {
        let mut value = if from_env { env.get(&k) } else { None };
        if value.is_none() && terminal {
            let d = describe(&k);
            // Echo goes off before the prompt appears, so nothing typed after it is shown.
            let guard = NoEcho::new();
            eprint!(
                "{k}{}: (input hidden, empty to skip) ",
                if d.is_empty() { String::new() } else { format!(" — {d}") }
            );
            let _ = std::io::stderr().flush();
            let mut line = String::new();
            let _ = std::io::stdin().lock().read_line(&mut line); // wait: a person at the terminal answers
            drop(guard);
            let v = line.trim_end_matches(['\n', '\r']).to_string();
            value = Some(v).filter(|v| !v.is_empty());
        }
        match value {
            Some(v) => store.set_secret(&k, &v)?,
            None => still.push(k),
        }
    }
    *missing = still;
    Ok(())
}
