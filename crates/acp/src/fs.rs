//! The developer builtin's `text_editor` through the editor (`fs/read_text_file`,
//! `fs/write_text_file`), when the client offers them.
//!
//! Design: the builtin is a child process (`gosling mcp developer`) that only knows the disk.
//! Rather than giving the child a channel back to the editor, the agent answers
//! `text_editor` itself for the session (a `ToolDelegate` on its runtime) with the builtin's
//! own `TextEditor`, over `TextFiles` that read through the editor (so unsaved buffers are
//! seen) and write through it (so edits land in its buffers). Paths are resolved and confined
//! to the session's working directory by the builtin's `WorkDir`. What the editor cannot do —
//! directories, `shell`, `list_directory`, or a command whose capability the client did not
//! offer — still goes to the child.

use crate::client_requests::{ReadTextFile, WriteTextFile};
use crate::conn::Conn;
use gosling_builtins::developer::{unrestricted_from_env, WorkDir};
use gosling_builtins::text_editor::{checked_text, TextEditor, TextFiles};
use gosling_extensions::config::{runtime_key, ExtensionConfig, Kind};
use gosling_wire::mcp_types::CallToolResult;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long one `fs/*` request may take (an editor may ask the person to save or trust).
const FS_TIMEOUT: Duration = Duration::from_secs(120);

/// What the client offered in `clientCapabilities.fs`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FsCaps {
    pub read: bool,
    pub write: bool,
}

pub struct EditorFs {
    files: EditorFiles,
    dir: WorkDir,
    caps: FsCaps,
    editor: TextEditor,
}

/// The session's files as the editor holds them.
struct EditorFiles {
    conn: Arc<Conn>,
    session_id: String,
}

/// The editor's `fs/*` request gave no usable answer.
fn delegate(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> gosling_builtins::Error {
    gosling_builtins::Error::Delegate(e.into())
}

impl TextFiles for EditorFiles {
    fn read(&self, path: &Path, shown: &str, limit: u64) -> Result<String, gosling_builtins::Error> {
        let p = ReadTextFile { session_id: self.session_id.clone(), path: path.display().to_string() }.params();
        let v = self.conn.request("fs/read_text_file", p, FS_TIMEOUT, None).map_err(delegate)?;
        checked_text(ReadTextFile::parse_answer(&v).map_err(delegate)?.into_bytes(), shown, limit)
    }

    fn write(&self, path: &Path, _shown: &str, text: &str) -> Result<(), gosling_builtins::Error> {
        let p = WriteTextFile {
            session_id: self.session_id.clone(),
            path: path.display().to_string(),
            content: text.to_string(),
        }
        .params();
        self.conn.request("fs/write_text_file", p, FS_TIMEOUT, None).map(|_| ()).map_err(delegate)
    }

    fn remove(&self, _path: &Path, shown: &str) -> Result<(), gosling_builtins::Error> {
        Err(gosling_builtins::Error::Refused(format!(
            "{shown} was created in this session and the editor cannot delete files; remove it with the shell tool"
        )))
    }

    fn place(&self) -> &'static str {
        " in the editor"
    }
}

impl EditorFs {
    pub fn new(
        conn: Arc<Conn>,
        session_id: &str,
        cwd: &Path,
        caps: FsCaps,
    ) -> Result<EditorFs, gosling_builtins::Error> {
        Ok(EditorFs {
            files: EditorFiles { conn, session_id: session_id.to_string() },
            dir: WorkDir::open(cwd, unrestricted_from_env())?,
            caps,
            editor: TextEditor::default(),
        })
    }

    /// The runtime's delegate entry: `Some(CallToolResult)` for the calls the editor answers.
    pub fn call(&self, ext: &ExtensionConfig, tool: &str, args: Option<&Value>) -> Option<CallToolResult> {
        if !(matches!(ext.kind, Kind::Builtin { .. }) && runtime_key(&ext.name) == "developer") || tool != "text_editor"
        {
            return None;
        }
        let args = args?.as_object()?;
        let command = args.get("command").and_then(Value::as_str)?;
        let needs_write = command != "view";
        if !self.caps.read || (needs_write && !self.caps.write) {
            return None;
        }
        let r = gosling_builtins::server::str_arg(args, "path").and_then(|p| self.dir.resolve(p)).and_then(|path| {
            if path.is_dir() {
                return Ok(None);
            }
            let shown = self.dir.show(&path);
            log::debug!("acp: text_editor {command} {shown} through the editor");
            self.editor.run(&self.files, &path, &shown, args).map(Some)
        });
        match r {
            Ok(None) => None,
            Ok(Some(text)) => Some(CallToolResult::text(text, false)),
            Err(e) => Some(CallToolResult::text(format!("developer: {e}"), true)),
        }
    }
}
