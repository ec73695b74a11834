//! `gosling secret set|list|remove` and `gosling extensions list|enable|disable|remove`: the
//! terminal side of what the web page's Settings and Extensions dialogs do, on the same config
//! store (`config.json`, `secrets.json`, both 0600) the servers read.
//!
//! A secret's value comes from standard input — typed with echo off on a terminal, else piped
//! (`printf %s "$TOKEN" | gosling secret set NAME`) — and is never printed nor logged; `list`
//! shows names only. Enabling an extension applies the rules the server's `/config/extensions`
//! applies (the trust policy, and its secrets must be stored).
//!
//! Exit codes: 0 done, 1 refused or failed, 2 usage error.

use crate::Opener;
use gosling_extensions::config::{name_to_key, unresolved, ExtensionEntry, ExtensionStore, Kind};
use gosling_extensions::policy::InstallSource;
use gosling_util::printable;
use std::io::{IsTerminal, Read};
use std::process::ExitCode;

pub const SECRET_USAGE: &str = "\
usage: gosling secret set NAME       store a secret; the value is read from standard input
                                     (typed with echo off, or piped: printf %s \"$V\" | gosling secret set NAME)
       gosling secret list           the names of the stored secrets (never their values)
       gosling secret remove NAME    forget a stored secret
NAME is what an extension's env_keys or ${NAME} refer to: letters, digits and _ (at most 128).
";

pub const EXTENSIONS_USAGE: &str = "\
usage: gosling extensions list             the configured extensions: name, type, on or off, what runs
       gosling extensions enable NAME      turn an extension on for new sessions
       gosling extensions disable NAME     turn it off (its configuration is kept)
       gosling extensions remove NAME      forget its configuration
";

/// The longest secret value read from standard input.
const MAX_SECRET_BYTES: u64 = 64 * 1024;

fn usage(cmd: &str, text: &str, why: &str) -> ExitCode {
    eprintln!("gosling {cmd}: {why}\n{text}");
    ExitCode::from(2)
}

fn done(cmd: &str, r: Result<String, String>) -> ExitCode {
    match r {
        Ok(msg) => {
            println!("{msg}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gosling {cmd}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A secret's name: what `env_keys` and `${NAME}` can refer to.
fn valid_secret_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    name.len() <= 128
        && bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

pub fn secret_main(open: &Opener, args: &[String]) -> ExitCode {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        [] => usage("secret", SECRET_USAGE, "say what to do: set, list or remove"),
        ["-h" | "--help", ..] => {
            print!("{SECRET_USAGE}");
            ExitCode::SUCCESS
        }
        ["list"] => done("secret", list_secrets(open)),
        ["set", name] => done("secret", set_secret(open, name)),
        ["remove", name] => done("secret", remove_secret(open, name)),
        ["set" | "remove"] => usage("secret", SECRET_USAGE, "name the secret"),
        // Not repeated back: it may be the value itself.
        ["set", _, _, ..] => usage(
            "secret",
            SECRET_USAGE,
            "set takes only the NAME: the value is read from standard input, never from the command line (where `ps` and the shell's history would keep it)",
        ),
        [other, ..] => usage("secret", SECRET_USAGE, &format!("unknown subcommand {:?}", printable(other))),
    }
}

fn check_name(name: &str) -> Result<(), String> {
    if valid_secret_name(name) {
        Ok(())
    } else {
        Err(format!(
            "{:?} is not a secret name: use letters, digits and _ (not starting with a digit, at most 128), as in OPENAI_API_KEY",
            printable(name)
        ))
    }
}

fn set_secret(open: &Opener, name: &str) -> Result<String, String> {
    check_name(name)?;
    let value = read_value(name)?;
    let store = open.store().map_err(|e| e.to_string())?;
    store.set_secret(name, &value).map_err(|e| e.to_string())?;
    Ok(format!("secret {name} stored (extensions that name it in env_keys or ${{{name}}} get it)"))
}

/// The value from standard input: one line typed with echo off on a terminal, else everything
/// piped in (bounded), less one final newline.
fn read_value(name: &str) -> Result<String, String> {
    let mut bytes = Vec::new();
    if std::io::stdin().is_terminal() {
        let guard = crate::install::NoEcho::new();
        eprint!("value of {name} (input hidden): ");
        let mut line = String::new();
        let read = std::io::stdin().read_line(&mut line); // wait: a person at the terminal answers
        drop(guard);
        read.map_err(|e| format!("cannot read the value from the terminal: {e}"))?;
        bytes = line.into_bytes();
    } else {
        // wait: standard input is the caller's pipe or file; it ends when they close it
        std::io::stdin()
            .lock()
            .take(MAX_SECRET_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read the value from standard input: {e}"))?;
        if bytes.len() as u64 > MAX_SECRET_BYTES {
            return Err(format!(
                "the value on standard input is longer than {} KiB; a secret is a key or a token",
                MAX_SECRET_BYTES / 1024
            ));
        }
    }
    if bytes.ends_with(b"\n") {
        bytes.pop();
        if bytes.ends_with(b"\r") {
            bytes.pop();
        }
    }
    let value = String::from_utf8(bytes).map_err(|_| "the value on standard input is not UTF-8 text".to_string())?;
    if value.is_empty() {
        return Err(format!(
            "no value on standard input: type it when asked, or pipe it in (printf %s \"$VALUE\" | gosling secret set {name})"
        ));
    }
    Ok(value)
}

fn list_secrets(open: &Opener) -> Result<String, String> {
    let Some(store) = open.existing_store("secrets.json") else {
        return Ok("no secrets stored (gosling secret set NAME stores one)".into());
    };
    let names = store.and_then(|s| s.secret_names()).map_err(|e| e.to_string())?;
    let sign_ins = names.iter().filter(|n| n.starts_with("oauth:")).count();
    let mut plain: Vec<&String> = names.iter().filter(|n| !n.starts_with("oauth:")).collect();
    plain.sort();
    let mut out: Vec<String> = plain.iter().map(|n| printable(n)).collect();
    if out.is_empty() {
        out.push("no secrets stored (gosling secret set NAME stores one)".into());
    }
    if sign_ins > 0 {
        out.push(format!("(and {sign_ins} stored sign-in record(s) of remote extensions: gosling auth NAME --forget)"));
    }
    Ok(out.join("\n"))
}

fn remove_secret(open: &Opener, name: &str) -> Result<String, String> {
    check_name(name)?;
    let missing = || format!("no secret named {name} is stored (gosling secret list shows them)");
    let Some(store) = open.existing_store("secrets.json") else { return Err(missing()) };
    if store.and_then(|s| s.remove_secret(name)).map_err(|e| e.to_string())? {
        Ok(format!("secret {name} removed"))
    } else {
        Err(missing())
    }
}

pub fn extensions_main(open: &Opener, args: &[String]) -> ExitCode {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        [] => usage("extensions", EXTENSIONS_USAGE, "say what to do: list, enable, disable or remove"),
        ["-h" | "--help", ..] => {
            print!("{EXTENSIONS_USAGE}");
            ExitCode::SUCCESS
        }
        ["list"] => done("extensions", list_extensions(open)),
        ["enable", name] => done("extensions", set_enabled(open, name, true)),
        ["disable", name] => done("extensions", set_enabled(open, name, false)),
        ["remove", name] => done("extensions", remove_extension(open, name)),
        ["enable" | "disable" | "remove"] => usage("extensions", EXTENSIONS_USAGE, "name the extension"),
        [cmd @ ("enable" | "disable" | "remove"), _, extra, ..] => usage(
            "extensions",
            EXTENSIONS_USAGE,
            &format!("{cmd} takes one name; unexpected {:?} (quote a name with spaces)", printable(extra)),
        ),
        [other, ..] => usage("extensions", EXTENSIONS_USAGE, &format!("unknown subcommand {:?}", printable(other))),
    }
}

/// What an entry runs, in one line.
fn runs(e: &ExtensionEntry) -> String {
    match &e.config.kind {
        Kind::Stdio { cmd, args, .. } => {
            std::iter::once(cmd).chain(args.iter()).map(|a| printable(a)).collect::<Vec<_>>().join(" ")
        }
        Kind::StreamableHttp { uri, .. } => printable(uri),
        Kind::Builtin { .. } => format!("builtin (gosling mcp {})", e.config.key()),
        _ => String::new(),
    }
}

fn list_extensions(open: &Opener) -> Result<String, String> {
    let Some(store) = open.existing_store("config.json") else {
        return Ok("no extensions configured (gosling install LINK or gosling import FILE adds some)".into());
    };
    let store = store.map_err(|e| e.to_string())?;
    let ex = store.extensions().map_err(|e| e.to_string())?;
    let mut out: Vec<String> = ex
        .entries
        .iter()
        .map(|e| {
            let state = if e.enabled { "on" } else { "off" };
            format!("{}\t{}\t{state}\t{}", printable(e.config.name()), e.config.type_name(), runs(e))
        })
        .collect();
    if out.is_empty() {
        out.push("no extensions configured (gosling install LINK or gosling import FILE adds some)".into());
    }
    out.extend(ex.warnings.iter().map(|w| format!("warning: {}", printable(w))));
    Ok(out.join("\n"))
}

/// The stored entry named `name` (by its key, as the server finds it).
fn find(open: &Opener, name: &str) -> Result<(gosling_store::config_store::ConfigStore, ExtensionEntry), String> {
    let key = name_to_key(name);
    let missing =
        || format!("no extension named {:?} is configured (gosling extensions list shows them)", printable(name));
    let Some(store) = open.existing_store("config.json") else { return Err(missing()) };
    let store = store.map_err(|e| e.to_string())?;
    let entry = store.extension(&key).map_err(|e| e.to_string())?.ok_or_else(missing)?;
    Ok((store, entry))
}

fn set_enabled(open: &Opener, name: &str, on: bool) -> Result<String, String> {
    let (store, mut entry) = find(open, name)?;
    let shown = printable(entry.config.name());
    if entry.enabled == on {
        return Ok(format!("extension {shown} is already {}", if on { "enabled" } else { "disabled" }));
    }
    if on {
        let policy = open.policy().map_err(|e| e.to_string())?;
        policy
            .check(&entry.config, InstallSource::Cli)
            .map_err(|e| format!("extension {shown} stays disabled: {e}"))?;
        let present = |k: &str| store.get_secret(k).ok().flatten().is_some();
        let missing = unresolved(&entry.config, &present);
        if !missing.is_empty() {
            return Err(format!("extension {shown} stays disabled: {}", missing.explain()));
        }
    }
    entry.enabled = on;
    store.upsert_extension(&entry).map_err(|e| e.to_string())?;
    Ok(if on {
        format!(
            "extension {shown} enabled: new sessions start it (in an open session, add it from the page's Extensions)"
        )
    } else {
        format!("extension {shown} disabled: new sessions do not start it (its configuration is kept)")
    })
}

fn remove_extension(open: &Opener, name: &str) -> Result<String, String> {
    let (store, entry) = find(open, name)?;
    store.remove_extension(&entry.config.key()).map_err(|e| e.to_string())?;
    Ok(format!("extension {} removed", printable(entry.config.name())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_what_env_keys_can_name() {
        for ok in ["OPENAI_API_KEY", "_x", "a1"] {
            assert!(valid_secret_name(ok), "{ok}");
        }
        for bad in ["", "1A", "oauth:x", "A-B", "A B", "../x", &"A".repeat(129)] {
            assert!(!valid_secret_name(bad), "{bad}");
        }
    }
}
