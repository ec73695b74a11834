//! The `developer` builtin: run a shell command, view/write/edit a file, list a directory.
//!
//! Everything happens in the working directory (`GOOSE_WORKING_DIR`, else the process cwd).
//! Paths are resolved against it and must stay inside it after following symlinks, unless
//! `GOSLING_DEVELOPER_UNRESTRICTED=1`. The shell tool is a deliberate escape hatch: it runs
//! `sh -c COMMAND` (that is its purpose) with the working dir as cwd, but is bounded by a
//! timeout and an output cap, and its whole process group is killed on timeout or cancel.
//!
//! Confinement holds at use time too: every open, create, list and remove is relative to a
//! descriptor of the working dir and resolved by the kernel beneath it (`sys::open_beneath`:
//! `openat2` with `RESOLVE_BENEATH`, else a per-component `O_NOFOLLOW` walk), so swapping a
//! directory for a symlink after the path was checked cannot lead a write outside.
//!
//! `text_editor` itself is `text_editor::TextEditor` over `WorkDir` (the disk); acp/ runs the
//! same editor over the editor's buffers, confined by a `WorkDir` of the session's cwd.

use super::error::Error;
use super::server::{opt_str_arg, opt_u64_arg, str_arg, working_dir_from_env, Builtin, Cancel, ToolOutcome};
use super::text_editor::{checked_text, TextEditor, TextFiles};
use gosling_util::lock;
use serde_json::{Map, Value};
use std::collections::VecDeque;
use std::fs;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Shell timeout when the call does not pass `timeout_secs`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// Largest `timeout_secs` accepted.
pub const MAX_TIMEOUT_SECS: u64 = 600;
/// Combined stdout+stderr kept from a shell command: the first `OUTPUT_HEAD` bytes and the
/// last `OUTPUT_TAIL` bytes (the end of a build log is usually what matters).
pub const OUTPUT_HEAD: usize = 16 << 10;
pub const OUTPUT_TAIL: usize = 48 << 10;
/// Directory entries listed at most.
pub const MAX_LIST_ENTRIES: usize = 1000;

/// Whether `GOSLING_DEVELOPER_UNRESTRICTED` lifts path confinement.
pub fn unrestricted_from_env() -> bool {
    gosling_config::settings::developer_unrestricted(&gosling_config::ProcessEnv)
}

/// The working directory: where paths are resolved and, unless unrestricted, confined; on
/// disk, the `TextFiles` every file operation goes through, beneath its descriptor.
pub struct WorkDir {
    /// Canonical working directory.
    root: PathBuf,
    /// The working dir, opened once: what every file operation is resolved beneath.
    root_dir: fs::File,
    unrestricted: bool,
}

impl WorkDir {
    pub fn open(dir: &Path, unrestricted: bool) -> Result<WorkDir, Error> {
        let work_dir = |source| Error::WorkDir { dir: dir.to_path_buf(), source };
        let root = fs::canonicalize(dir).map_err(work_dir)?;
        if !root.is_dir() {
            return Err(work_dir(io::Error::from_raw_os_error(libc::ENOTDIR)));
        }
        let root_dir = fs::File::open(&root).map_err(work_dir)?;
        Ok(WorkDir { root, root_dir, unrestricted })
    }

    /// Resolves a tool's path argument (relative to the working dir) and enforces confinement.
    pub fn resolve(&self, input: &str) -> Result<PathBuf, Error> {
        resolve_in(&self.root, input, self.unrestricted)
    }

    /// How a path is shown back to the model: relative to the working dir when inside it.
    pub fn show(&self, p: &Path) -> String {
        match p.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".into(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => p.display().to_string(),
        }
    }

    /// Opens a resolved path: beneath the working dir's descriptor unless unrestricted.
    fn open_at(&self, path: &Path, access: Access) -> io::Result<fs::File> {
        if self.unrestricted {
            return match access {
                Access::Read | Access::Dir => fs::File::open(path),
                Access::Write => fs::OpenOptions::new().write(true).create(true).truncate(true).open(path),
            };
        }
        let flags = match access {
            Access::Read => libc::O_RDONLY,
            Access::Dir => libc::O_RDONLY | libc::O_DIRECTORY,
            Access::Write => libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
        };
        gosling_sys::open_beneath(&self.root_dir, self.rel(path)?, flags, 0o644)
    }

    fn rel<'a>(&self, path: &'a Path) -> io::Result<&'a Path> {
        path.strip_prefix(&self.root).map_err(|_| io::Error::from_raw_os_error(libc::EXDEV))
    }

    fn create_parents(&self, path: &Path, shown: &str) -> Result<(), Error> {
        let Some(parent) = path.parent() else { return Ok(()) };
        let r = if self.unrestricted {
            fs::create_dir_all(parent)
        } else {
            self.rel(parent).and_then(|rel| gosling_sys::mkdirs_beneath(&self.root_dir, rel))
        };
        r.map_err(|e| file_err(e, "create the directories of", shown))
    }

    fn list(&self, path: &Path, shown: &str) -> Result<String, Error> {
        // Listed through the descriptor (its /proc/self/fd entry names exactly that directory).
        let dir = self.open_at(path, Access::Dir).map_err(|e| file_err(e, "list", shown))?;
        let via = PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&dir)));
        let rd = fs::read_dir(if self.unrestricted { path } else { &via }).map_err(|e| file_err(e, "list", shown))?;
        let mut entries: Vec<(String, String)> = Vec::new();
        for e in rd {
            let e = e.map_err(|e| file_err(e, "list", shown))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let desc = match e.metadata() {
                Ok(m) if m.file_type().is_symlink() => {
                    let target =
                        fs::read_link(e.path()).map(|t| t.display().to_string()).unwrap_or_else(|_| "?".into());
                    format!("symlink  -> {target}")
                }
                Ok(m) if m.is_dir() => "dir".to_string(),
                Ok(m) if m.is_file() => format!("file     {} bytes", m.len()),
                Ok(_) => "other".to_string(),
                Err(err) => format!("unreadable ({err})"),
            };
            entries.push((name, desc));
        }
        entries.sort();
        let total = entries.len();
        let mut out = format!("{shown}: {total} entries\n");
        for (name, desc) in entries.iter().take(MAX_LIST_ENTRIES) {
            let slash = if desc == "dir" { "/" } else { "" };
            out.push_str(&format!("{name}{slash}\t{desc}\n"));
        }
        if total > MAX_LIST_ENTRIES {
            let more = total - MAX_LIST_ENTRIES;
            out.push_str(&format!(
                "[... {more} more entries not shown; use the shell tool with ls or find to filter]\n"
            ));
        }
        Ok(out)
    }
}

impl TextFiles for WorkDir {
    fn read(&self, path: &Path, shown: &str, limit: u64) -> Result<String, Error> {
        let file = self.open_at(path, Access::Read).map_err(|e| file_err(e, "read", shown))?;
        let meta = file.metadata().map_err(|e| file_err(e, "read", shown))?;
        if meta.is_dir() {
            return Err(Error::Refused(format!("{shown} is a directory")));
        }
        if meta.len() > limit {
            return Err(Error::TooBig { shown: shown.to_string(), size: Some(meta.len()), limit });
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        file.take(limit + 1).read_to_end(&mut bytes).map_err(|e| file_err(e, "read", shown))?;
        checked_text(bytes, shown, limit)
    }

    fn write(&self, path: &Path, shown: &str, text: &str) -> Result<(), Error> {
        self.create_parents(path, shown)?;
        let mut f = self.open_at(path, Access::Write).map_err(|e| file_err(e, "write", shown))?;
        io::Write::write_all(&mut f, text.as_bytes()).map_err(|e| file_err(e, "write", shown))
    }

    fn remove(&self, path: &Path, shown: &str) -> Result<(), Error> {
        let r = if self.unrestricted {
            fs::remove_file(path)
        } else {
            self.rel(path).and_then(|rel| gosling_sys::unlink_beneath(&self.root_dir, rel))
        };
        r.map_err(|e| file_err(e, "remove", shown))
    }
}

pub struct Developer {
    dir: WorkDir,
    editor: TextEditor,
}

impl Developer {
    /// Working dir from `GOOSE_WORKING_DIR` or the cwd; `GOSLING_DEVELOPER_UNRESTRICTED=1`
    /// lifts path confinement.
    pub fn from_env() -> Result<Developer, Error> {
        let dir = working_dir_from_env().map_err(|source| Error::WorkDir { dir: PathBuf::from("."), source })?;
        Developer::new(&dir, unrestricted_from_env())
    }

    pub fn new(dir: &Path, unrestricted: bool) -> Result<Developer, Error> {
        Ok(Developer { dir: WorkDir::open(dir, unrestricted)?, editor: TextEditor::default() })
    }

    fn shell(&self, args: &Map<String, Value>, cancel: &Cancel) -> Result<ToolOutcome, Error> {
        let command = str_arg(args, "command")?;
        if command.trim().is_empty() {
            return Err(Error::Refused("`command` is empty; pass the shell command to run".into()));
        }
        let timeout = opt_u64_arg(args, "timeout_secs")?.unwrap_or(DEFAULT_TIMEOUT_SECS);
        if !(1..=MAX_TIMEOUT_SECS).contains(&timeout) {
            let why = format!("timeout_secs {timeout} is out of range; use 1 to {MAX_TIMEOUT_SECS}");
            return Err(Error::Refused(why));
        }
        Ok(run_shell(command, &self.dir.root, Duration::from_secs(timeout), cancel))
    }

    fn text_editor(&self, args: &Map<String, Value>) -> Result<String, Error> {
        str_arg(args, "command")?;
        let path = self.dir.resolve(str_arg(args, "path")?)?;
        let shown = self.dir.show(&path);
        self.editor.run(&self.dir, &path, &shown, args)
    }

    fn list_directory(&self, args: &Map<String, Value>) -> Result<String, Error> {
        let path = self.dir.resolve(opt_str_arg(args, "path")?.unwrap_or("."))?;
        self.dir.list(&path, &self.dir.show(&path))
    }
}

/// The tools, as MCP `Tool` objects (JSON text: far smaller in the binary than the code that
/// would build it); `tools()` fills in the descriptions that name the limits.
const TOOLS: &str = r#"[
{"name": "shell", "title": "Run a shell command", "description": "",
 "inputSchema": {"type": "object", "properties": {
   "command": {"type": "string", "description": "The command line, run by sh -c"},
   "timeout_secs": {"type": "integer", "minimum": 1, "maximum": 0, "description": "Kill the command after this many seconds"}},
   "required": ["command"]},
 "annotations": {"title": "Run a shell command", "destructiveHint": true, "openWorldHint": true}},
{"name": "text_editor", "title": "View or edit a file",
 "description": "View, create/overwrite, or edit a file in the working directory. command=view (path, optional view_range [start, end] 1-based, end -1 for the end), command=write (path, file_text; creates parent directories), command=str_replace (path, old_str, new_str; old_str must occur exactly once), command=insert (path, insert_line, new_str; 0 inserts at the top), command=undo_edit (path; reverts the last write/str_replace/insert of that file in this session).",
 "inputSchema": {"type": "object", "properties": {
   "command": {"type": "string", "enum": ["view", "write", "str_replace", "insert", "undo_edit"]},
   "path": {"type": "string", "description": "File path, relative to the working directory"},
   "view_range": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2},
   "file_text": {"type": "string", "description": "Full new content for command=write"},
   "old_str": {"type": "string", "description": "Exact text to replace for command=str_replace"},
   "new_str": {"type": "string", "description": "Replacement text for command=str_replace, inserted text for command=insert"},
   "insert_line": {"type": "integer", "minimum": 0, "description": "For command=insert: insert after this line (0 = at the top)"}},
   "required": ["command", "path"]},
 "annotations": {"title": "View or edit a file", "destructiveHint": true, "openWorldHint": false}},
{"name": "list_directory", "title": "List a directory", "description": "",
 "inputSchema": {"type": "object", "properties": {
   "path": {"type": "string", "description": "Directory path, relative to the working directory (default \".\")"}}},
 "annotations": {"title": "List a directory", "readOnlyHint": true, "openWorldHint": false}}
]"#;

impl Builtin for Developer {
    fn name(&self) -> &'static str {
        "developer"
    }

    fn instructions(&self) -> String {
        format!(
            "The developer extension works in the directory {root}.\n\
             - shell: run a command with `sh -c` in that directory; returns the exit code and the combined \
             stdout/stderr (capped at {cap} KiB, middle elided). Default timeout {DEFAULT_TIMEOUT_SECS} s, \
             `timeout_secs` up to {MAX_TIMEOUT_SECS}; the command is killed when it runs over. stdin is empty, so \
             use non-interactive flags. Background processes still holding the output when the command ends are \
             stopped; redirect their output to a file (`cmd > log 2>&1 &`) to keep them running.\n\
             - text_editor: `view` a file (optionally `view_range` [start, end], lines are numbered), `write` a \
             file (creates parent directories, overwrites), `str_replace` `old_str` with `new_str` (old_str \
             must occur exactly once), `insert` `new_str` after line `insert_line` (0 = at the top), \
             `undo_edit` the last edit of a file.\n\
             - list_directory: the entries of a directory with their type and size.\n\
             Relative paths are relative to the working directory{confine}.",
            root = self.dir.root.display(),
            cap = (OUTPUT_HEAD + OUTPUT_TAIL) >> 10,
            confine = if self.dir.unrestricted { "" } else { "; paths outside it are refused" },
        )
    }

    fn tools(&self) -> Vec<Value> {
        let mut tools = crate::server::tool_list(TOOLS);
        // The limits in the descriptions are the constants'.
        tools[0]["description"] = format!("Run a shell command (`sh -c`) in the working directory and return its exit code and combined output. Times out after timeout_secs (default {DEFAULT_TIMEOUT_SECS}, max {MAX_TIMEOUT_SECS}); output is capped at {} KiB.", (OUTPUT_HEAD + OUTPUT_TAIL) >> 10).into();
        tools[0]["inputSchema"]["properties"]["timeout_secs"]["maximum"] = MAX_TIMEOUT_SECS.into();
        tools[2]["description"] = format!("List the entries of a directory (default: the working directory), sorted by name, with type and size; at most {MAX_LIST_ENTRIES} entries.").into();
        tools
    }

    fn call(&self, tool: &str, args: &Map<String, Value>, cancel: &Cancel) -> ToolOutcome {
        let r = match tool {
            "shell" => self.shell(args, cancel),
            "text_editor" => self.text_editor(args).map(ToolOutcome::ok),
            "list_directory" => self.list_directory(args).map(ToolOutcome::ok),
            other => Err(Error::UnknownTool(other.to_string())),
        };
        r.unwrap_or_else(|e| ToolOutcome::error(format!("developer: {e}")))
    }
}

/// Resolves `input` against `root` (already canonical) following symlinks one component at a
/// time, so `..` and links are judged by where they really lead. Components that do not exist
/// yet are appended as written. Unless `unrestricted`, the result must lie inside `root`.
pub fn resolve_in(root: &Path, input: &str, unrestricted: bool) -> Result<PathBuf, Error> {
    if input.is_empty() {
        return Err(Error::Refused("`path` is empty; pass a path relative to the working directory".into()));
    }
    if input.contains('\0') {
        return Err(Error::Refused("`path` contains a NUL byte".into()));
    }
    let given = Path::new(input);
    let mut cur = if given.is_absolute() { PathBuf::from("/") } else { root.to_path_buf() };
    // Once a component is missing, everything after it is missing too and no more links apply.
    let mut missing = false;
    for comp in given.components() {
        match comp {
            Component::Prefix(_) | Component::RootDir => cur = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                // `cur` is canonical (or a missing tail under a canonical dir): its parent is real.
                cur.pop();
                missing = missing && !cur.exists();
            }
            Component::Normal(name) => {
                let next = cur.join(name);
                if !missing && fs::symlink_metadata(&next).is_ok() {
                    cur = fs::canonicalize(&next).map_err(|source| Error::Unresolvable {
                        input: input.to_string(),
                        at: next.clone(),
                        source,
                    })?;
                } else {
                    missing = true;
                    cur = next;
                }
            }
        }
    }
    if !unrestricted && !cur.starts_with(root) {
        return Err(Error::Outside { input: input.to_string(), resolved: cur, root: root.to_path_buf() });
    }
    Ok(cur)
}

/// How a file is opened (`WorkDir::open_at`).
#[derive(Clone, Copy)]
enum Access {
    Read,
    Write,
    Dir,
}

fn file_err(source: io::Error, verb: &'static str, shown: &str) -> Error {
    Error::File { verb, shown: shown.to_string(), source }
}

/// Keeps the first `OUTPUT_HEAD` and the last `OUTPUT_TAIL` bytes of a stream.
#[derive(Default)]
struct CappedOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl CappedOutput {
    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = OUTPUT_HEAD.saturating_sub(self.head.len());
        let take = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..take]);
        bytes = &bytes[take..];
        if bytes.len() >= OUTPUT_TAIL {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - OUTPUT_TAIL..]);
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(OUTPUT_TAIL);
            self.tail.drain(..overflow);
            self.tail.extend(bytes);
        }
    }

    fn render(&self) -> String {
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        let kept = (self.head.len() + self.tail.len()) as u64;
        if self.total > kept {
            out.push_str(&format!(
                "\n[... {} bytes of output omitted (total {} bytes); redirect the output to a file and view parts of it ...]\n",
                self.total - kept,
                self.total
            ));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        out.push_str(&String::from_utf8_lossy(&tail));
        out
    }
}

/// Runs `sh -c command` in `dir` with stdout and stderr on one pipe, bounded by `timeout`
/// and `cancel`; the command's process group is killed when either fires.
// One pipe keeps stdout and stderr in the order they were written. `std::io::pipe` is from
// Rust 1.87; the crate already needs 1.89 (`File::lock` in store/atomic.rs), only the
// `rust-version` in Cargo.toml lags behind.
#[allow(clippy::incompatible_msrv)]
fn run_shell(command: &str, dir: &Path, timeout: Duration, cancel: &Cancel) -> ToolOutcome {
    let pipe = io::pipe().and_then(|(reader, writer)| Ok((reader, writer.try_clone()?, writer)));
    let (mut reader, writer2, writer) = match pipe {
        Ok(p) => p,
        Err(e) => return ToolOutcome::error(format!("developer: cannot create a pipe: {e}")),
    };
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(command).current_dir(dir).stdin(Stdio::null()).stdout(writer).stderr(writer2);
    // `cmd` (holding our copies of the write end) is dropped once spawned, so EOF comes when
    // the command and whatever it started have closed their copies.
    let mut child = match gosling_sys::spawn_tied(cmd) {
        Ok(c) => c,
        Err(e) => return ToolOutcome::error(format!("developer: cannot start sh: {e}")),
    };
    let pid = child.id();
    log::debug!("developer: shell pid {pid} started");
    let output = Arc::new(Mutex::new(CappedOutput::default()));
    let (done_tx, done_rx) = crossbeam_channel::bounded::<()>(1);
    let read_into = output.clone();
    let spawned = std::thread::Builder::new().name("developer-shell-out".into()).spawn(move || {
        let mut buf = [0u8; 8192];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => lock(&read_into).push(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = done_tx.send(());
    });
    if let Err(e) = spawned {
        let _ = gosling_sys::kill_group(pid);
        let _ = child.wait(); // wait: SIGKILLed just above
        return ToolOutcome::error(format!("developer: cannot start a reader thread: {e}"));
    }
    // The shell is reaped only at the very end: until then its pid (our process-group id) is
    // reserved, so signalling the group can never hit an unrelated process that reused it.
    let deadline = Instant::now() + timeout;
    let ended: Result<(), &'static str> = loop {
        if gosling_sys::exited_unreaped(pid) {
            break Ok(());
        } else if cancel.is_cancelled() {
            break Err("cancelled");
        } else if Instant::now() >= deadline {
            break Err("timeout");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if ended.is_err() {
        let _ = gosling_sys::kill_group(pid);
    }
    // Background processes of the command may still hold the pipe: give them a moment, then
    // kill the group so the call returns.
    if done_rx.recv_timeout(Duration::from_millis(500)).is_err() {
        log::debug!("developer: shell pid {pid} left processes holding its output; killing its group");
        let _ = gosling_sys::kill_group(pid);
        if done_rx.recv_timeout(Duration::from_secs(2)).is_err() {
            log::warn!("developer: output of shell pid {pid} is still open (a process left its group); returning what was read");
        }
    }
    // wait: the shell has exited or was SIGKILLed above
    let waited = child.wait();
    let ended = ended.and_then(|()| waited.map_err(|_| "wait failed"));
    let text = lock(&output).render();
    let text = if text.is_empty() { "(no output)".to_string() } else { text };
    match ended {
        Ok(status) => {
            use std::os::unix::process::ExitStatusExt;
            let head = match (status.code(), status.signal()) {
                (Some(code), _) => format!("exit code: {code}"),
                (None, Some(sig)) => format!("killed by signal {sig}"),
                (None, None) => "exit status unknown".to_string(),
            };
            ToolOutcome::ok(format!("{head}\n{text}"))
        }
        Err("timeout") => ToolOutcome::error(format!(
            "developer: command timed out after {} s and was killed; pass a larger timeout_secs (max {MAX_TIMEOUT_SECS}) or run it in the background with output to a file\noutput so far:\n{text}",
            timeout.as_secs()
        )),
        Err(why) => ToolOutcome::error(format!("developer: command {why}\noutput so far:\n{text}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gosling-dev-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        fs::canonicalize(&d).unwrap()
    }

    #[test]
    fn the_tool_list_is_json_with_an_object_schema_per_tool() {
        let tools = crate::server::tool_list(TOOLS);
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["shell", "text_editor", "list_directory"]);
        assert!(tools.iter().all(|t| t["inputSchema"]["type"] == "object" && t["annotations"]["title"] == t["title"]));
    }

    #[test]
    fn paths_stay_inside_the_root() {
        let base = tmp("confine");
        let root = base.join("root");
        fs::create_dir_all(root.join("sub")).unwrap();
        fs::write(base.join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(base.join("secret"), root.join("out-link")).unwrap();
        std::os::unix::fs::symlink(root.join("sub"), root.join("in-link")).unwrap();
        std::os::unix::fs::symlink(base.join("nowhere"), root.join("dangling")).unwrap();

        assert_eq!(resolve_in(&root, "sub/a.txt", false).unwrap(), root.join("sub/a.txt"));
        assert_eq!(resolve_in(&root, "./sub/../b", false).unwrap(), root.join("b"));
        assert_eq!(resolve_in(&root, "new/dir/../f", false).unwrap(), root.join("new/f"));
        assert_eq!(resolve_in(&root, "in-link/x", false).unwrap(), root.join("sub/x"));
        assert_eq!(resolve_in(&root, root.join("sub").to_str().unwrap(), false).unwrap(), root.join("sub"));
        assert_eq!(resolve_in(&root, ".", false).unwrap(), root);
        for bad in ["../secret", "sub/../../secret", "out-link", "/etc/passwd", "missing/../../x", "dangling", ""] {
            let e = resolve_in(&root, bad, false).unwrap_err().to_string();
            assert!(!e.is_empty(), "{bad}");
        }
        assert!(resolve_in(&root, "../secret", false)
            .unwrap_err()
            .to_string()
            .contains("outside the working directory"));
        assert_eq!(resolve_in(&root, "../secret", true).unwrap(), base.join("secret"));
        assert_eq!(resolve_in(&root, "out-link", true).unwrap(), base.join("secret"));
        let _ = fs::remove_dir_all(&base);
    }

    #[test]
    fn opens_stay_beneath_the_root_at_use_time() {
        let base = tmp("beneath");
        let root = base.join("root");
        fs::create_dir_all(root.join("sub")).unwrap();
        std::os::unix::fs::symlink(&base, root.join("out")).unwrap();
        std::os::unix::fs::symlink("sub", root.join("in")).unwrap();
        let dir = fs::File::open(&root).unwrap();
        let create = libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC;
        for escape in ["out/x", "../x", "sub/../../x", "/etc/passwd"] {
            let e = gosling_sys::open_beneath(&dir, Path::new(escape), create, 0o644).unwrap_err();
            assert!(matches!(e.raw_os_error(), Some(libc::EXDEV) | Some(libc::ELOOP)), "{escape}: {e}");
        }
        assert!(!base.join("x").exists());
        gosling_sys::open_beneath(&dir, Path::new("in/y"), create, 0o644).unwrap();
        assert!(root.join("sub/y").exists());
        gosling_sys::mkdirs_beneath(&dir, Path::new("a/b/c")).unwrap();
        assert!(gosling_sys::mkdirs_beneath(&dir, Path::new("out/z")).is_err());
        assert!(!base.join("z").exists());
        gosling_sys::unlink_beneath(&dir, Path::new("in/y")).unwrap();
        let _ = fs::remove_dir_all(&base);
    }

    #[test]
    fn output_keeps_head_and_tail() {
        let mut o = CappedOutput::default();
        o.push(b"start");
        o.push(&vec![b'x'; OUTPUT_HEAD + OUTPUT_TAIL]);
        o.push(b"end");
        let r = o.render();
        assert!(r.starts_with("start"));
        assert!(r.ends_with("end"));
        assert!(r.contains("8 bytes of output omitted"), "{}", &r[OUTPUT_HEAD..OUTPUT_HEAD + 200]);
        let mut small = CappedOutput::default();
        small.push(b"hello");
        assert_eq!(small.render(), "hello");
    }

    #[test]
    fn view_write_replace_list_in_a_temp_root() {
        let root = tmp("editor");
        let dev = Developer::new(&root, false).unwrap();
        let call = |args: Value| {
            let Value::Object(m) = args else { unreachable!() };
            dev.call(if m.contains_key("command") { "text_editor" } else { "list_directory" }, &m, &Cancel::new())
        };
        let w = call(json!({"command": "write", "path": "d/e/f.txt", "file_text": "one\ntwo\nthree\n"}));
        assert!(!w.is_error, "{}", w.text);
        let v = call(json!({"command": "view", "path": "d/e/f.txt", "view_range": [2, 2]}));
        assert!(v.text.contains("     2  two") && !v.text.contains("three"), "{}", v.text);
        let r = call(json!({"command": "str_replace", "path": "d/e/f.txt", "old_str": "two", "new_str": "2"}));
        assert!(!r.is_error, "{}", r.text);
        assert_eq!(fs::read_to_string(root.join("d/e/f.txt")).unwrap(), "one\n2\nthree\n");
        let l = call(json!({"path": "d"}));
        assert!(l.text.contains("e/\tdir"), "{}", l.text);
        let bad = call(json!({"command": "write", "path": "../x", "file_text": ""}));
        assert!(bad.is_error && bad.text.starts_with("developer: "), "{}", bad.text);
        let _ = fs::remove_dir_all(&root);
    }
}
