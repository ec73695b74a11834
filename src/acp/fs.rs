//! The developer builtin's `text_editor` through the editor (`fs/read_text_file`,
//! `fs/write_text_file`), when the client offers them.
//!
//! Design: the builtin is a child process (`gosling mcp developer`) that only knows the disk.
//! Rather than giving the child a channel back to the editor, the agent answers
//! `text_editor` itself for the session (a `ToolDelegate` on its runtime): it reads through
//! the editor (so unsaved buffers are seen), edits in memory with the builtin's own
//! `replace_once`/`insert_after_line`, and writes through the editor (so edits land in its
//! buffers). Paths are confined to the session's working directory exactly as the builtin
//! does (`resolve_in`). What the editor cannot do — directories, `shell`, `list_directory`,
//! or a command whose capability the client did not offer — still goes to the child.

use crate::acp::conn::Conn;
use crate::builtins::developer::{insert_after_line, replace_once, resolve_in};
use crate::extensions::config::{runtime_key, ExtensionConfig};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one `fs/*` request may take (an editor may ask the person to save or trust).
const FS_TIMEOUT: Duration = Duration::from_secs(120);
/// Past edits kept per file for `undo_edit`.
const UNDO_DEPTH: usize = 10;

/// What the client offered in `clientCapabilities.fs`.
#[derive(Debug, Clone, Copy, Default)]
pub struct FsCaps {
    pub read: bool,
    pub write: bool,
}

/// The state before an edit: the old text, or no file.
enum Before {
    Text(String),
    Absent,
}

pub struct EditorFs {
    conn: Arc<Conn>,
    session_id: String,
    root: PathBuf,
    unrestricted: bool,
    caps: FsCaps,
    history: Mutex<HashMap<PathBuf, Vec<Before>>>,
}

fn result(r: Result<String, String>) -> Value {
    match r {
        Ok(t) => json!({ "content": [{ "type": "text", "text": t }], "isError": false }),
        Err(e) => json!({ "content": [{ "type": "text", "text": format!("developer: {e}") }], "isError": true }),
    }
}

fn str_arg<'a>(args: &'a Value, k: &str) -> Result<&'a str, String> {
    args.get(k).and_then(Value::as_str).ok_or_else(|| format!("missing required string argument `{k}`"))
}

impl EditorFs {
    pub fn new(conn: Arc<Conn>, session_id: &str, cwd: &Path, caps: FsCaps) -> Result<EditorFs, String> {
        let root = std::fs::canonicalize(cwd).map_err(|e| format!("working directory {}: {e}", cwd.display()))?;
        let unrestricted =
            std::env::var("GOSLING_DEVELOPER_UNRESTRICTED").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"));
        Ok(EditorFs { conn, session_id: session_id.to_string(), root, unrestricted, caps, history: Mutex::default() })
    }

    /// The runtime's delegate entry: `Some(CallToolResult)` for the calls the editor answers.
    pub fn call(&self, ext: &ExtensionConfig, tool: &str, args: Option<&Value>) -> Option<Value> {
        if !matches!(ext, ExtensionConfig::Builtin { name, .. } if runtime_key(name) == "developer")
            || tool != "text_editor"
        {
            return None;
        }
        let args = args?;
        let command = args.get("command").and_then(Value::as_str)?;
        let needs_write = command != "view";
        if !self.caps.read || (needs_write && !self.caps.write) {
            return None;
        }
        let path = match str_arg(args, "path").and_then(|p| resolve_in(&self.root, p, self.unrestricted)) {
            Ok(p) => p,
            Err(e) => return Some(result(Err(e))),
        };
        if path.is_dir() {
            return None;
        }
        let shown = match path.strip_prefix(&self.root) {
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        };
        log::debug!("acp: text_editor {command} {shown} through the editor");
        Some(result(self.run(command, &path, &shown, args)))
    }

    fn read(&self, path: &Path) -> Result<String, String> {
        let p = json!({ "sessionId": self.session_id, "path": path.display().to_string() });
        let v = self.conn.request("fs/read_text_file", p, FS_TIMEOUT, None).map_err(|e| e.to_string())?;
        v.get("content")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| "acp: the editor's fs/read_text_file answer has no `content` string".to_string())
    }

    fn write(&self, path: &Path, content: &str) -> Result<(), String> {
        let p = json!({ "sessionId": self.session_id, "path": path.display().to_string(), "content": content });
        self.conn.request("fs/write_text_file", p, FS_TIMEOUT, None).map(|_| ()).map_err(|e| e.to_string())
    }

    fn remember(&self, path: &Path, before: Before) {
        let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let stack = h.entry(path.to_path_buf()).or_default();
        if stack.len() >= UNDO_DEPTH {
            stack.remove(0);
        }
        stack.push(before);
    }

    fn run(&self, command: &str, path: &Path, shown: &str, args: &Value) -> Result<String, String> {
        match command {
            "view" => Ok(view(&self.read(path)?, shown, args.get("view_range"))?),
            "write" => {
                let text = str_arg(args, "file_text")?;
                let before = self.read(path).map(Before::Text).unwrap_or(Before::Absent);
                let existed = matches!(before, Before::Text(_));
                self.write(path, text)?;
                self.remember(path, before);
                Ok(format!(
                    "{} {shown} ({} bytes, {} lines) in the editor",
                    if existed { "overwrote" } else { "created" },
                    text.len(),
                    text.lines().count()
                ))
            }
            "str_replace" => {
                let old = str_arg(args, "old_str")?;
                let new = str_arg(args, "new_str").map_err(|e| format!("{e}; pass \"\" to delete old_str"))?;
                let content = self.read(path)?;
                let updated = replace_once(&content, old, new).map_err(|e| format!("{shown}: {e}"))?;
                self.write(path, &updated)?;
                let line = content[..content.find(old).unwrap_or(0)].matches('\n').count() + 1;
                self.remember(path, Before::Text(content));
                Ok(format!("replaced 1 occurrence in {shown} at line {line}"))
            }
            "insert" => {
                let after = args
                    .get("insert_line")
                    .and_then(Value::as_u64)
                    .ok_or("missing required argument `insert_line` (0 = before the first line)")?;
                let new = str_arg(args, "new_str")?;
                let content = self.read(path)?;
                let updated = insert_after_line(&content, after, new).map_err(|e| format!("{shown}: {e}"))?;
                self.write(path, &updated)?;
                self.remember(path, Before::Text(content));
                Ok(format!("inserted {} line(s) after line {after} of {shown}", new.lines().count().max(1)))
            }
            "undo_edit" => {
                let before = self.history.lock().unwrap_or_else(|e| e.into_inner()).get_mut(path).and_then(Vec::pop);
                match before {
                    None => Err(format!("no edit of {shown} to undo in this session")),
                    Some(Before::Absent) => {
                        Err(format!("{shown} was created in this session and the editor cannot delete files; remove it with the shell tool"))
                    }
                    Some(Before::Text(t)) => {
                        self.write(path, &t)?;
                        Ok(format!("restored {shown} to its content before the last edit"))
                    }
                }
            }
            other => {
                Err(format!("unknown text_editor command {other:?}; use view, write, str_replace, insert or undo_edit"))
            }
        }
    }
}

/// The builtin's `view` output (numbered lines, optional 1-based range) over text from the
/// editor.
fn view(content: &str, shown: &str, range: Option<&Value>) -> Result<String, String> {
    let total = content.lines().count();
    if total == 0 {
        return Ok(format!("{shown} is empty"));
    }
    let (start, end) = match range {
        None | Some(Value::Null) => (1, total),
        Some(Value::Array(a)) if a.len() == 2 => {
            let start = a[0].as_i64().filter(|s| *s >= 1).ok_or("view_range[0] must be a line number >= 1")? as usize;
            let end = a[1]
                .as_i64()
                .filter(|e| *e == -1 || *e >= start as i64)
                .ok_or("view_range[1] must be >= view_range[0], or -1 for the end of the file")?;
            (start, if end == -1 { total } else { (end as usize).min(total) })
        }
        Some(_) => return Err("view_range must be [start_line, end_line] (1-based, end -1 = to the end)".into()),
    };
    if start > total {
        return Err(format!("{shown} has {total} lines; view_range starts after the end"));
    }
    let mut out = format!("{shown} (lines {start}-{end} of {total})\n");
    for (i, line) in content.lines().enumerate().skip(start - 1).take(end + 1 - start) {
        out.push_str(&format!("{:>6}  {line}\n", i + 1));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn view_numbers_lines_and_ranges() {
        let v = super::view("a\nb\nc\n", "f", Some(&serde_json::json!([2, -1]))).unwrap();
        assert_eq!(v, "f (lines 2-3 of 3)\n     2  b\n     3  c\n");
        assert!(super::view("a\n", "f", Some(&serde_json::json!([3, 4]))).unwrap_err().contains("after the end"));
        assert_eq!(super::view("", "f", None).unwrap(), "f is empty");
    }
}
