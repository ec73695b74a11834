//! What a stdio extension may read, write and reach, from its config's `"sandbox"` object
//! (`{"paths": [...], "hosts": ["HOST:PORT", ...], "unconfined": true, "memory": "1GiB",
//! "processes": 256, "open_files": N}`, kept among the entry's extra keys: goose ignores it),
//! and the kernel confinement (`sys::Confinement`) built from it with the working dir.
//!
//! Granted on top of the config: the system (read and run), the runtime and package caches
//! the launchers use, the install dir of the program itself (its venv or `node_modules`),
//! the working dir and a private temp dir (read and write). Never gosling's config and state
//! dirs (secrets, audit log, sessions): a grant that covers one of them is refused.

use crate::config::{ExtensionConfig, Kind};
use crate::error::Error;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The default limits: low enough that a fork bomb or a runaway allocation stops inside the
/// extension, high enough for node, uv and their children (docs/install.md).
pub const DEFAULT_MEMORY: u64 = 1 << 30;
pub const DEFAULT_PROCESSES: u64 = 256;
pub const DEFAULT_OPEN_FILES: u64 = 1024;

/// Where the egress proxy listens inside the extension's own network namespace.
pub const PROXY_PORT: u16 = 3128;

/// The registry hosts a launcher fetches from on its first run, approved with the launcher.
pub fn launcher_hosts(cmd: &str) -> &'static [&'static str] {
    let program = Path::new(cmd).file_name().and_then(|n| n.to_str()).unwrap_or(cmd);
    match program {
        "npx" | "npm" => &["registry.npmjs.org:443"],
        "uvx" | "uv" => &["pypi.org:443", "files.pythonhosted.org:443"],
        _ => &[],
    }
}

/// The `"sandbox"` object of a stdio (or inline_python) extension, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// Granted paths (absolute), read and write.
    pub paths: Vec<PathBuf>,
    /// Approved hosts, `host:port`, lower case; the launcher's registry included.
    pub hosts: Vec<String>,
    /// The person opted this extension out of confinement.
    pub unconfined: bool,
    pub memory: u64,
    pub processes: u64,
    pub open_files: u64,
}

fn err(field: &str, message: impl Into<String>) -> Error {
    Error::Config { field: format!("sandbox.{field}"), message: message.into() }
}

/// Bytes from `1073741824`, `"1GiB"`, `"512MiB"`, `"64KiB"` (also `G`, `M`, `K`, `GB`, `MB`).
fn parse_bytes(v: &Value) -> Option<u64> {
    if let Some(n) = v.as_u64() {
        return Some(n);
    }
    let s = v.as_str()?.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let mult: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KB" | "KiB" => 1 << 10,
        "M" | "MB" | "MiB" => 1 << 20,
        "G" | "GB" | "GiB" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(mult)
}

/// `host:port` with a DNS name or an IP literal (`[v6]:port`) and a port 1..=65535.
fn check_host(s: &str) -> Result<String, String> {
    // A config names the port (`HOST:PORT`); links may leave it out and store it written.
    let port_written = s.trim().rsplit_once(':').is_some_and(|(host, port)| {
        !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && (!host.contains(':') || host.ends_with(']'))
    });
    if !port_written {
        return Err("is not HOST:PORT (the port is required in a config, e.g. api.example.com:443)".into());
    }
    // The one grammar of an approved host, the links' and the proxy's (`egress::HostPort`).
    crate::egress::HostPort::parse(s).map(|h| h.to_string())
}

impl ExtensionConfig {
    /// The extension's `"sandbox"` object, checked, with the defaults for what it leaves out
    /// and its launcher's registry among the hosts. An error names the field and the fix.
    pub fn sandbox(&self) -> Result<Sandbox, Error> {
        let mut out = Sandbox {
            paths: Vec::new(),
            hosts: Vec::new(),
            unconfined: false,
            memory: DEFAULT_MEMORY,
            processes: DEFAULT_PROCESSES,
            open_files: DEFAULT_OPEN_FILES,
        };
        let obj = match self.extra.get("sandbox") {
            None | Some(Value::Null) => serde_json::Map::new(),
            Some(Value::Object(o)) => o.clone(),
            Some(_) => return Err(Error::Config { field: "sandbox".into(), message: "must be an object: {\"paths\": [...], \"hosts\": [\"HOST:PORT\"], \"unconfined\": false, \"memory\": \"1GiB\", \"processes\": 256, \"open_files\": 1024}".into() }),
        };
        for (k, v) in &obj {
            match k.as_str() {
                "paths" => {
                    let list = v.as_array().ok_or_else(|| err("paths", "must be a list of absolute paths"))?;
                    for (i, p) in list.iter().enumerate() {
                        let s = p.as_str().ok_or_else(|| err(&format!("paths[{i}]"), "must be a string"))?;
                        let path = Path::new(s);
                        if !path.is_absolute()
                            || path.components().any(|c| matches!(c, std::path::Component::ParentDir))
                        {
                            return Err(err(
                                &format!("paths[{i}]"),
                                format!("{s:?} is not an absolute path without `..`; write the full path"),
                            ));
                        }
                        if path == Path::new("/") {
                            return Err(err(
                                &format!("paths[{i}]"),
                                "granting `/` grants everything; name the directories the extension needs",
                            ));
                        }
                        out.paths.push(path.to_path_buf());
                    }
                }
                "hosts" => {
                    let list = v.as_array().ok_or_else(|| err("hosts", "must be a list of \"HOST:PORT\" strings"))?;
                    for (i, h) in list.iter().enumerate() {
                        let s =
                            h.as_str().ok_or_else(|| err(&format!("hosts[{i}]"), "must be a \"HOST:PORT\" string"))?;
                        let host = check_host(s).map_err(|m| err(&format!("hosts[{i}]"), format!("{s:?} {m}")))?;
                        if !out.hosts.contains(&host) {
                            out.hosts.push(host);
                        }
                    }
                }
                "unconfined" => {
                    out.unconfined = v.as_bool().ok_or_else(|| err("unconfined", "must be true or false"))?;
                }
                "memory" => {
                    let n = parse_bytes(v).ok_or_else(|| {
                        err("memory", format!("{v} is not a size; write bytes or e.g. \"512MiB\", \"1GiB\""))
                    })?;
                    if n < 64 << 20 {
                        return Err(err("memory", format!("{v} is below 64MiB, too little for a runtime to start")));
                    }
                    out.memory = n;
                }
                "processes" => {
                    out.processes = v
                        .as_u64()
                        .filter(|n| (8..=65536).contains(n))
                        .ok_or_else(|| err("processes", format!("{v} is not a number of processes in 8..65536")))?;
                }
                "open_files" => {
                    out.open_files = v.as_u64().filter(|n| (64..=1 << 20).contains(n)).ok_or_else(|| {
                        err("open_files", format!("{v} is not a number of open files in 64..1048576"))
                    })?;
                }
                other => {
                    return Err(err(
                        other,
                        "is not a sandbox setting; use paths, hosts, unconfined, memory, processes or open_files",
                    ))
                }
            }
        }
        if let Kind::Stdio { cmd, .. } = &self.kind {
            for h in launcher_hosts(cmd) {
                if !out.hosts.iter().any(|x| x == h) {
                    out.hosts.push((*h).to_string());
                }
            }
        }
        if let Kind::InlinePython { .. } = &self.kind {
            // Started with uvx, which may fetch `mcp` and the dependencies.
            for h in launcher_hosts("uvx") {
                if !out.hosts.iter().any(|x| x == h) {
                    out.hosts.push((*h).to_string());
                }
            }
        }
        Ok(out)
    }
}

impl Sandbox {
    /// The lines of the consent summary: what the extension may read, write and reach.
    pub fn summary(&self, everyone_unconfined: bool) -> Vec<String> {
        if self.unconfined || everyone_unconfined {
            let why = if self.unconfined { "\"sandbox\": {\"unconfined\": true}" } else { "GOSLING_UNCONFINED=1" };
            return vec![format!("UNCONFINED ({why}): runs with every right of this user (files, network, processes)")];
        }
        let mut out = vec![
            "Confined: reads the system and its own runtime; reads and writes the working dir and a private temp dir"
                .to_string(),
        ];
        if !self.paths.is_empty() {
            out.push(format!(
                "Also reads and writes: {}",
                self.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            ));
        }
        // The one place the approved hosts are named (the launcher's registry among them).
        out.push(if self.hosts.is_empty() {
            "Network: none".to_string()
        } else {
            format!(
                "Network: only {}, through gosling's proxy (what it sends there and gets back is up to those hosts)",
                self.hosts.join(", ")
            )
        });
        out.push(format!(
            "Limits: memory {} MiB, {} processes, {} open files",
            self.memory >> 20,
            self.processes,
            self.open_files
        ));
        out
    }
}

/// gosling's own dirs an extension must never see: the config dir (config, secrets, keys)
/// and the state dir (audit log, sessions, server key).
pub fn own_dirs(state_dir: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![state_dir.to_path_buf(), gosling_config::config_dir(&gosling_config::ProcessEnv)];
    for d in dirs.clone() {
        if let Ok(c) = std::fs::canonicalize(&d) {
            if !dirs.contains(&c) {
                dirs.push(c);
            }
        }
    }
    dirs
}

/// The install dir of a program: the venv (an ancestor with `pyvenv.cfg`) or the package
/// tree (the dir holding `node_modules`, `package.json` or `pyproject.toml`) it lives in.
/// Else, for the program itself, its own dir (or the prefix above a `bin` or `shims` dir);
/// for a script named in the args, the file alone.
fn install_dirs(file: &Path, program: bool) -> Vec<PathBuf> {
    let mut candidates = vec![file.to_path_buf()];
    if let Ok(real) = std::fs::canonicalize(file) {
        if real != file {
            candidates.push(real);
        }
    }
    // Each of the path as named and the file it resolves to (a venv's `python` is a link to
    // an interpreter installed elsewhere: both are needed).
    candidates.iter().filter_map(|p| install_dir(p, program)).collect()
}

/// The interpreter a script names on its `#!` line (through `env NAME`: NAME on PATH).
fn interpreter(file: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).and_then(|mut f| f.read(&mut head)).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = std::str::from_utf8(line.split(|b| *b == b'\n').next()?).ok()?;
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    if first.file_name().is_some_and(|n| n == "env") {
        let name = words.find(|w| !w.starts_with('-'))?;
        return gosling_config::settings::find_in_path(&gosling_config::ProcessEnv, name);
    }
    Some(first)
}

fn install_dir(file: &Path, program: bool) -> Option<PathBuf> {
    for a in file.ancestors().skip(1) {
        if a.join("pyvenv.cfg").is_file() {
            return Some(a.to_path_buf());
        }
        if a.file_name().is_some_and(|n| n == "node_modules") {
            return a.parent().map(Path::to_path_buf);
        }
        if !program && (a.join("package.json").is_file() || a.join("pyproject.toml").is_file()) {
            return Some(a.to_path_buf());
        }
    }
    if !program {
        return Some(file.to_path_buf());
    }
    // A prefix install (`PREFIX/bin/prog`: its libraries are under PREFIX) or a version
    // manager's shims (`~/.pyenv/shims/python3` runs `~/.pyenv/libexec/pyenv`).
    let dir = file.parent()?;
    match dir.file_name().and_then(|n| n.to_str()) {
        Some("bin" | "shims") => dir.parent().map(Path::to_path_buf),
        _ => Some(dir.to_path_buf()),
    }
}

/// The system read set: programs, libraries, configuration, `/proc` (a child sees its own
/// processes' sensitive entries only: the user namespace), and a few devices.
const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/bin",
    "/sbin",
    "/opt",
    "/proc",
    "/sys",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
];
const SYSTEM_WRITE: &[&str] = &["/dev/null", "/dev/tty"];
/// The launcher and runtime caches a confined child may write (a launcher's first fetch goes
/// there), where the child looks for them: it has gosling's `HOME` and `XDG_*` (mcp::stdio's
/// base variables) and may set no `npm_config_*`, `UV_*` or `PIP_*` of its own (config's
/// environment families). So npm's `~/.npm` (npx installs a package into its `_npx`), uv's
/// `$XDG_CACHE_HOME/uv` (else `~/.cache/uv`: uvx's environments) and `$XDG_DATA_HOME/uv` (else
/// `~/.local/share/uv`: tools, managed Pythons), pip's `$XDG_CACHE_HOME/pip`. These, never the
/// home dir itself.
pub fn caches(env: &dyn gosling_config::Env) -> Vec<PathBuf> {
    let Some(home) = gosling_config::settings::home(env).filter(|h| h.is_absolute()) else { return Vec::new() };
    let xdg = |kind: &str, fallback: &str| {
        env.get(&format!("XDG_{kind}_HOME")).filter(|d| d.starts_with('/')).map_or(home.join(fallback), PathBuf::from)
    };
    let (cache, data) = (xdg("CACHE", ".cache"), xdg("DATA", ".local/share"));
    vec![home.join(".npm"), cache.join("uv"), data.join("uv"), cache.join("pip")]
}

/// The caches `cmd`'s launcher fills on its first fetch (npx, npm: npm's; uvx, uv: uv's cache
/// and data dirs, where `uvx` keeps its tools dir), of `caches`. The runtime makes them before
/// the start: the kernel grants only a path that exists.
pub fn launcher_caches(cmd: &str, caches: &[PathBuf]) -> Vec<PathBuf> {
    let program = Path::new(cmd).file_name().and_then(|n| n.to_str()).unwrap_or(cmd);
    let name = match program {
        "npx" | "npm" => ".npm",
        "uvx" | "uv" => "uv",
        _ => return Vec::new(),
    };
    caches.iter().filter(|c| c.file_name().is_some_and(|n| n == name)).cloned().collect()
}

/// Runtimes under the home dir (read and run only: writing a dir on the user's `PATH` would
/// plant programs outside the extension).
const HOME_RUNTIMES: &[&str] = &[".local/bin", ".nvm", ".pyenv", ".cargo/bin", ".rustup", ".volta", ".bun"];

/// The confinement of a stdio child: `program` and the absolute paths among `args` (a script
/// such as `node /abs/server.js`) with their install dirs read; `work` and `tmp`, the granted
/// paths and the launcher `caches` read and written; refused when a grant covers one of
/// gosling's own dirs.
#[allow(clippy::too_many_arguments)]
pub fn confinement(
    sb: &Sandbox,
    program: &Path,
    args: &[String],
    work: Option<&Path>,
    tmp: &Path,
    home: Option<&Path>,
    caches: &[PathBuf],
    own: &[PathBuf],
) -> Result<gosling_sys::Confinement, Error> {
    let mut read: Vec<PathBuf> = SYSTEM_READ.iter().map(PathBuf::from).collect();
    let mut write: Vec<PathBuf> = SYSTEM_WRITE.iter().map(PathBuf::from).collect();
    let scripts = args.iter().map(Path::new).filter(|p| p.is_absolute() && p.is_file());
    // A program that is a script (a venv's console script) runs its `#!` interpreter.
    let interp = interpreter(program);
    let programs = std::iter::once(program).chain(interp.as_deref());
    for (p, is_program) in programs.map(|p| (p, true)).chain(scripts.map(|p| (p, false))) {
        // Never a whole home dir or `/` through a program's or script's location.
        for d in install_dirs(p, is_program) {
            // Never a whole home dir, `/` or a dir holding gosling's own: the file alone then.
            let holds_own = own.iter().any(|o| o.starts_with(&d));
            if d.parent().is_some() && home.is_none_or(|h| d != h) && !holds_own {
                read.push(d);
            } else {
                read.push(p.to_path_buf());
            }
        }
    }
    write.extend(caches.iter().cloned());
    if let Some(h) = home {
        for r in HOME_RUNTIMES {
            read.push(h.join(r));
        }
    }
    // Landlock only allows: a grant above gosling's dirs would open them. A granted path that
    // holds or lies in one is refused with the fix; a derived path (an install dir, a cache)
    // that holds one is dropped; the working dir is granted around them (`around`).
    let real = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let holds = |p: &Path| own.iter().find(|d| d.starts_with(p) || d.starts_with(real(p))).cloned();
    for (i, p) in sb.paths.iter().enumerate() {
        let inside = own.iter().find(|d| p.starts_with(d) || real(p).starts_with(d)).cloned();
        if let Some(d) = holds(p).or(inside) {
            return Err(err(
                &format!("paths[{i}]"),
                format!("{} holds or lies in gosling's own dir {}; grant a path outside it", p.display(), d.display()),
            ));
        }
    }
    read.retain(|p| holds(p).is_none());
    write.retain(|p| holds(p).is_none());
    write.push(tmp.to_path_buf());
    write.extend(sb.paths.iter().cloned());
    if let Some(w) = work {
        if own.iter().any(|d| w.starts_with(d) || real(w).starts_with(d)) {
            return Err(Error::Config {
                field: "working_dir".into(),
                message: format!(
                    "{} lies in gosling's own dirs: a confined extension may not work there; choose a working dir outside them",
                    w.display()
                ),
            });
        }
        if holds(w).is_some() {
            let mut budget = 4096;
            around(w, own, &mut write, &mut budget);
        } else {
            write.push(w.to_path_buf());
        }
    }
    let network =
        if sb.hosts.is_empty() { gosling_sys::Network::None } else { gosling_sys::Network::Proxy { port: PROXY_PORT } };
    Ok(gosling_sys::Confinement {
        read,
        write,
        limits: gosling_sys::Limits { memory_bytes: sb.memory, processes: sb.processes, open_files: sb.open_files },
        network,
        pids_cgroup: None,
    })
}

/// Grants `dir`'s entries except those on the way to gosling's own dirs (entered in turn),
/// links (their targets are checked on their own) and the own dirs themselves: a working dir
/// that holds gosling's dirs (the home dir) without them. New entries directly in such a dir
/// cannot be made. At most `budget` entries.
fn around(dir: &Path, own: &[PathBuf], out: &mut Vec<PathBuf>, budget: &mut usize) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        if *budget == 0 {
            log::warn!("sandbox: {} has too many entries; the rest are not granted", dir.display());
            return;
        }
        *budget -= 1;
        let p = e.path();
        if e.file_type().is_ok_and(|t| t.is_symlink()) || own.contains(&p) {
            continue;
        }
        if own.iter().any(|d| d.starts_with(&p)) {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                around(&p, own, out, budget);
            }
        } else {
            out.push(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stdio(cmd: &str, sandbox: Value) -> ExtensionConfig {
        let mut c: ExtensionConfig = serde_json::from_value(
            json!({"type":"stdio","name":"x","description":"","cmd":cmd,"args":[],"envs":{},"env_keys":[]}),
        )
        .unwrap();
        c.extra.insert("sandbox".into(), sandbox);
        c
    }

    #[test]
    fn bad_values_are_refused_naming_the_field() {
        for (sb, field) in [
            (json!({"paths": ["rel/dir"]}), "sandbox.paths[0]"),
            (json!({"paths": ["/"]}), "sandbox.paths[0]"),
            (json!({"paths": ["/a/../etc"]}), "sandbox.paths[0]"),
            (json!({"hosts": ["example.com"]}), "sandbox.hosts[0]"),
            (json!({"hosts": ["*.example.com"]}), "sandbox.hosts[0]"),
            (json!({"hosts": ["[::1]"]}), "sandbox.hosts[0]"),
            (json!({"hosts": ["*:443"]}), "sandbox.hosts[0]"),
            (json!({"hosts": ["user@example.com:443"]}), "sandbox.hosts[0]"),
            (json!({"hosts": ["example.com:0"]}), "sandbox.hosts[0]"),
            (json!({"memory": "lots"}), "sandbox.memory"),
            (json!({"memory": "1MiB"}), "sandbox.memory"),
            (json!({"processes": 0}), "sandbox.processes"),
            (json!({"open_files": "many"}), "sandbox.open_files"),
            (json!({"unconfined": "yes"}), "sandbox.unconfined"),
            (json!({"network": "all"}), "sandbox.network"),
            (json!(["x"]), "sandbox"),
        ] {
            match stdio("python3", sb.clone()).sandbox() {
                Err(Error::Config { field: f, message }) => assert_eq!(f, field, "{sb}: {message}"),
                other => panic!("{sb}: {other:?}"),
            }
        }
    }

    #[test]
    fn hosts_are_read_by_the_proxys_grammar_with_their_port() {
        let s =
            stdio("python3", json!({"hosts": ["*.Example.com:443", "[::1]:8080", "10.0.0.7:5432"]})).sandbox().unwrap();
        assert_eq!(s.hosts, vec!["*.example.com:443", "[::1]:8080", "10.0.0.7:5432"]);
    }

    #[test]
    fn defaults_and_launcher_registries() {
        let s = stdio("npx", json!({"hosts": ["API.example.com:443"], "memory": "512MiB", "processes": 64}))
            .sandbox()
            .unwrap();
        assert_eq!(s.hosts, vec!["api.example.com:443", "registry.npmjs.org:443"]);
        assert_eq!((s.memory, s.processes, s.open_files), (512 << 20, 64, DEFAULT_OPEN_FILES));
        let d = stdio("/usr/bin/python3", Value::Null).sandbox().unwrap();
        assert_eq!((d.memory, d.processes, d.unconfined, d.hosts.len()), (1 << 30, 256, false, 0));
        assert!(stdio("uvx", json!({})).sandbox().unwrap().hosts.contains(&"pypi.org:443".to_string()));
    }

    struct Vars(&'static [(&'static str, &'static str)]);
    impl gosling_config::Env for Vars {
        fn get(&self, key: &str) -> Option<String> {
            self.0.iter().find(|(k, _)| *k == key).map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_launcher_caches_are_where_the_child_looks_and_never_the_home() {
        let p = |s: &str| PathBuf::from(s);
        let plain = caches(&Vars(&[("HOME", "/home/u")]));
        assert_eq!(
            plain,
            [p("/home/u/.npm"), p("/home/u/.cache/uv"), p("/home/u/.local/share/uv"), p("/home/u/.cache/pip")]
        );
        let xdg = caches(&Vars(&[("HOME", "/home/u"), ("XDG_CACHE_HOME", "/var/cache/u"), ("XDG_DATA_HOME", "rel")]));
        assert_eq!(xdg, [p("/home/u/.npm"), p("/var/cache/u/uv"), p("/home/u/.local/share/uv"), p("/var/cache/u/pip")]);
        assert!(caches(&Vars(&[])).is_empty() && caches(&Vars(&[("HOME", "relative")])).is_empty());
        assert_eq!(launcher_caches("/usr/bin/npx", &xdg), [p("/home/u/.npm")]);
        assert_eq!(launcher_caches("uvx", &xdg), [p("/var/cache/u/uv"), p("/home/u/.local/share/uv")]);
        assert!(launcher_caches("python3", &xdg).is_empty());
    }

    #[test]
    fn a_grant_over_goslings_dirs_is_refused() {
        let own = vec![PathBuf::from("/home/u/.config/gosling"), PathBuf::from("/home/u/.local/state/gosling")];
        let sb = stdio("python3", json!({"paths": ["/home/u"]})).sandbox().unwrap();
        let e = confinement(&sb, Path::new("/usr/bin/python3"), &[], None, Path::new("/tmp/x"), None, &[], &own)
            .unwrap_err();
        assert!(e.to_string().contains("sandbox.paths[0]") && e.to_string().contains("outside it"), "{e}");
        let ok = stdio("python3", json!({"paths": ["/home/u/data"]})).sandbox().unwrap();
        let c = confinement(
            &ok,
            Path::new("/usr/bin/python3"),
            &[],
            Some(Path::new("/home/u/work")),
            Path::new("/tmp/x"),
            Some(Path::new("/home/u")),
            &[PathBuf::from("/home/u/.npm")],
            &own,
        )
        .unwrap();
        assert!(c.write.contains(&PathBuf::from("/home/u/data")) && c.write.contains(&PathBuf::from("/home/u/work")));
        assert!(c.write.contains(&PathBuf::from("/home/u/.npm")), "the launcher caches: {:?}", c.write);
        assert!(!c.read.iter().chain(&c.write).any(|p| p == Path::new("/home/u")));
        let inside = stdio("python3", json!({"paths": ["/home/u/.config/gosling/secrets.json"]})).sandbox().unwrap();
        let e = confinement(&inside, Path::new("/usr/bin/python3"), &[], None, Path::new("/tmp/x"), None, &[], &own)
            .unwrap_err();
        assert!(e.to_string().contains("sandbox.paths[0]"), "{e}");
        let e = confinement(
            &ok,
            Path::new("/usr/bin/python3"),
            &[],
            Some(Path::new("/home/u/.local/state/gosling/x")),
            Path::new("/tmp/x"),
            None,
            &[],
            &own,
        )
        .unwrap_err();
        assert!(e.to_string().contains("working_dir"), "{e}");
    }
}
