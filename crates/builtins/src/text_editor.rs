//! The developer builtin's `text_editor` tool, written once: `view` (numbered lines, an
//! optional 1-based range, an output cap), `write`, `str_replace` (exactly one match),
//! `insert` (after a line) and `undo_edit` (per-file history of this session).
//!
//! Where the text lives is a `TextFiles`: the working directory on disk, opened beneath its
//! descriptor (`developer::WorkDir`, what `gosling mcp developer` uses), or the editor's
//! buffers through ACP's `fs/*` requests (`acp::fs`). Paths arrive resolved and confined by
//! the caller; this module reads and writes only through its `TextFiles`.

use super::error::Error;
use super::server::{opt_u64_arg, str_arg};
use gosling_util::lock;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Largest file `view` shows whole (and the most text one `view` prints); bigger files need
/// `view_range`.
pub const MAX_VIEW_BYTES: u64 = 256 << 10;
/// Largest file `view` reads at all (with a range) and `str_replace`/`insert` edit.
pub const MAX_EDIT_BYTES: u64 = 16 << 20;
/// Edits remembered per file for `undo_edit`, and files tracked at most.
pub const UNDO_DEPTH: usize = 10;
pub const UNDO_FILES: usize = 100;

/// Reads and writes whole text files for `text_editor`. `shown` is how the path is named in
/// messages (relative to the working directory when inside it).
pub trait TextFiles {
    /// The text of `path`; more than `limit` bytes, a binary file or non-UTF-8 is refused
    /// (`checked_text`).
    fn read(&self, path: &Path, shown: &str, limit: u64) -> Result<String, Error>;
    /// Replaces `path`'s content with `text`, creating the file (and, where it can, its
    /// directories).
    fn write(&self, path: &Path, shown: &str, text: &str) -> Result<(), Error>;
    /// Removes `path`, undoing its creation.
    fn remove(&self, path: &Path, shown: &str) -> Result<(), Error>;
    /// Where a write lands, appended to its report (`""` for the disk).
    fn place(&self) -> &'static str {
        ""
    }
}

/// Turns a file's bytes into text, refusing what is over `limit`, binary (a NUL in the first
/// 8 KiB) or not UTF-8.
pub fn checked_text(bytes: Vec<u8>, shown: &str, limit: u64) -> Result<String, Error> {
    if bytes.len() as u64 > limit {
        return Err(Error::TooBig { shown: shown.to_string(), size: None, limit });
    }
    if bytes[..bytes.len().min(8192)].contains(&0) {
        return Err(Error::NotText { shown: shown.to_string(), binary: true });
    }
    String::from_utf8(bytes).map_err(|_| Error::NotText { shown: shown.to_string(), binary: false })
}

/// A file's state before an edit.
enum Before {
    Absent,
    Text(String),
}

/// The `text_editor` commands and the session's undo history.
#[derive(Default)]
pub struct TextEditor {
    /// What each edited file held before its last edits (newest last), for `undo_edit`.
    history: Mutex<HashMap<PathBuf, Vec<Before>>>,
}

impl TextEditor {
    /// Runs the `command` of `args` on `path` (resolved and confined) through `files`.
    pub fn run(
        &self,
        files: &dyn TextFiles,
        path: &Path,
        shown: &str,
        args: &Map<String, Value>,
    ) -> Result<String, Error> {
        match str_arg(args, "command")? {
            "view" => view(files, path, shown, args.get("view_range")),
            "write" => {
                let text = str_arg(args, "file_text")?;
                if path.is_dir() {
                    return Err(Error::Refused(format!("{shown} is a directory; give a file path")));
                }
                let existed = path.exists();
                let before = if existed {
                    files.read(path, shown, MAX_EDIT_BYTES).ok().map(Before::Text)
                } else {
                    Some(Before::Absent)
                };
                files.write(path, shown, text)?;
                self.remember(path, before);
                let (verb, lines) = (if existed { "overwrote" } else { "created" }, text.lines().count());
                Ok(format!("{verb} {shown} ({} bytes, {lines} lines){}", text.len(), files.place()))
            }
            "str_replace" => {
                let old = str_arg(args, "old_str")?;
                let new = str_arg(args, "new_str")
                    .map_err(|e| Error::Refused(format!("{e}; pass \"\" to delete old_str")))?;
                let content = files.read(path, shown, MAX_EDIT_BYTES)?;
                let updated = replace_once(&content, old, new).map_err(|e| in_file(shown, e))?;
                files.write(path, shown, &updated)?;
                let line = content[..content.find(old).unwrap_or(0)].matches('\n').count() + 1;
                self.remember(path, Some(Before::Text(content)));
                Ok(format!("replaced 1 occurrence in {shown} at line {line}"))
            }
            "insert" => {
                let after = opt_u64_arg(args, "insert_line")?
                    .ok_or(Error::Missing { key: "insert_line".into(), kind: "0 = before the first line" })?;
                let new = str_arg(args, "new_str")?;
                let content = files.read(path, shown, MAX_EDIT_BYTES)?;
                let updated = insert_after_line(&content, after, new).map_err(|e| in_file(shown, e))?;
                files.write(path, shown, &updated)?;
                self.remember(path, Some(Before::Text(content)));
                Ok(format!("inserted {} line(s) after line {after} of {shown}", new.lines().count().max(1)))
            }
            "undo_edit" => {
                let before = lock(&self.history).get_mut(path).and_then(Vec::pop);
                match before {
                    None => Err(Error::Refused(format!("no edit of {shown} to undo in this session"))),
                    Some(Before::Absent) => {
                        files.remove(path, shown)?;
                        Ok(format!("undid the creation of {shown} (removed it)"))
                    }
                    Some(Before::Text(t)) => {
                        files.write(path, shown, &t)?;
                        Ok(format!("restored {shown} to its content before the last edit"))
                    }
                }
            }
            other => Err(Error::Refused(format!(
                "unknown text_editor command {other:?}; use view, write, str_replace, insert or undo_edit"
            ))),
        }
    }

    /// Records the state before an edit; `None` (unknown) forgets the file's history, since
    /// older states could no longer be restored in order.
    fn remember(&self, path: &Path, before: Option<Before>) {
        let mut h = lock(&self.history);
        let Some(before) = before else {
            h.remove(path);
            return;
        };
        if !h.contains_key(path) && h.len() >= UNDO_FILES {
            h.clear();
        }
        let stack = h.entry(path.to_path_buf()).or_default();
        if stack.len() >= UNDO_DEPTH {
            stack.remove(0);
        }
        stack.push(before);
    }
}

fn in_file(shown: &str, e: Error) -> Error {
    Error::Refused(format!("{shown}: {e}"))
}

/// `view`: the file's lines numbered, all of them or `range` ([start, end], 1-based, end -1 =
/// to the end), printing at most about `MAX_VIEW_BYTES`.
fn view(files: &dyn TextFiles, path: &Path, shown: &str, range: Option<&Value>) -> Result<String, Error> {
    if path.is_dir() {
        return Err(Error::Refused(format!("{shown} is a directory; use list_directory to see its entries")));
    }
    let refuse = |why: &str| Error::Refused(why.to_string());
    let range = match range {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) if a.len() == 2 => {
            let start =
                a[0].as_i64().filter(|s| *s >= 1).ok_or_else(|| refuse("view_range[0] must be a line number >= 1"))?;
            let end = a[1]
                .as_i64()
                .filter(|e| *e == -1 || *e >= start)
                .ok_or_else(|| refuse("view_range[1] must be >= view_range[0], or -1 for the end of the file"))?;
            Some((start as usize, if end == -1 { usize::MAX } else { end as usize }))
        }
        Some(_) => return Err(refuse("view_range must be [start_line, end_line] (1-based, end -1 = to the end)")),
    };
    let limit = if range.is_some() { MAX_EDIT_BYTES } else { MAX_VIEW_BYTES };
    let content = match files.read(path, shown, limit) {
        Err(e @ Error::TooBig { .. }) if range.is_none() => {
            return Err(Error::Refused(format!("{e}; pass view_range to see part of it")))
        }
        r => r?,
    };
    let total = content.lines().count();
    if total == 0 {
        return Ok(format!("{shown} is empty"));
    }
    let (start, end) = range.unwrap_or((1, usize::MAX));
    let end = end.min(total);
    if start > total {
        return Err(Error::Refused(format!("{shown} has {total} lines; view_range starts after the end")));
    }
    let mut out = format!("{shown} (lines {start}-{end} of {total})\n");
    let mut shown_bytes = 0usize;
    for (i, line) in content.lines().enumerate().skip(start - 1).take(end + 1 - start) {
        let n = i + 1;
        if shown_bytes > MAX_VIEW_BYTES as usize {
            out.push_str(&format!("[... stopped at line {n}: output cap reached; use view_range for the rest]\n"));
            break;
        }
        shown_bytes += line.len();
        out.push_str(&format!("{n:>6}  {line}\n"));
    }
    Ok(out)
}

/// Replaces the single occurrence of `old` in `content`; zero or several occurrences are errors
/// that say how many there were.
fn replace_once(content: &str, old: &str, new: &str) -> Result<String, Error> {
    if old.is_empty() {
        return Err(Error::Refused("old_str is empty; pass the exact text to replace".into()));
    }
    match content.matches(old).count() {
        1 => Ok(content.replacen(old, new, 1)),
        0 => Err(Error::Refused(
            "old_str was not found; view the file and copy the exact text, including whitespace and indentation".into(),
        )),
        n => Err(Error::Refused(format!(
            "old_str occurs {n} times; include more surrounding lines so it matches exactly once"
        ))),
    }
}

/// Inserts `new` after line `after` (0 = at the top). `new` becomes whole lines.
fn insert_after_line(content: &str, after: u64, new: &str) -> Result<String, Error> {
    let total = content.lines().count() as u64;
    if after > total {
        return Err(Error::Refused(format!("insert_line {after} is past the end; the file has {total} lines")));
    }
    let mut offset = 0;
    for _ in 0..after {
        offset += content[offset..].find('\n').map_or(content.len() - offset, |i| i + 1);
    }
    let mut piece = String::new();
    if offset == content.len() && !content.is_empty() && !content.ends_with('\n') {
        piece.push('\n');
    }
    piece.push_str(new);
    if !new.ends_with('\n') && offset < content.len() {
        piece.push('\n');
    }
    let mut out = String::with_capacity(content.len() + piece.len());
    out.push_str(&content[..offset]);
    out.push_str(&piece);
    out.push_str(&content[offset..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::cell::RefCell;

    /// Files in memory: the seam's behaviour without a disk.
    #[derive(Default)]
    struct Mem(RefCell<HashMap<PathBuf, String>>);

    impl TextFiles for Mem {
        fn read(&self, path: &Path, shown: &str, limit: u64) -> Result<String, Error> {
            let text = self.0.borrow().get(path).cloned().ok_or_else(|| Error::Refused(format!("no {shown}")))?;
            checked_text(text.into_bytes(), shown, limit)
        }
        fn write(&self, path: &Path, _: &str, text: &str) -> Result<(), Error> {
            self.0.borrow_mut().insert(path.to_path_buf(), text.to_string());
            Ok(())
        }
        fn remove(&self, path: &Path, _: &str) -> Result<(), Error> {
            self.0.borrow_mut().remove(path);
            Ok(())
        }
    }

    fn run(ed: &TextEditor, files: &Mem, args: Value) -> Result<String, String> {
        let Value::Object(m) = args else { unreachable!() };
        ed.run(files, Path::new("/nowhere/f"), "f", &m).map_err(|e| e.to_string())
    }

    #[test]
    fn str_replace_needs_exactly_one_match() {
        assert_eq!(replace_once("a b c", "b", "X").unwrap(), "a X c");
        assert_eq!(replace_once("a b c", "b ", "").unwrap(), "a c");
        assert!(replace_once("a b c", "z", "X").unwrap_err().to_string().contains("not found"));
        assert!(replace_once("b b b", "b", "X").unwrap_err().to_string().contains("occurs 3 times"));
        assert!(replace_once("abc", "", "X").unwrap_err().to_string().contains("empty"));
    }

    #[test]
    fn insert_after_a_line() {
        assert_eq!(insert_after_line("a\nb\n", 0, "x").unwrap(), "x\na\nb\n");
        assert_eq!(insert_after_line("a\nb\n", 1, "x\ny").unwrap(), "a\nx\ny\nb\n");
        assert_eq!(insert_after_line("a\nb\n", 2, "x\n").unwrap(), "a\nb\nx\n");
        assert_eq!(insert_after_line("a\nb", 2, "x").unwrap(), "a\nb\nx");
        assert_eq!(insert_after_line("", 0, "x").unwrap(), "x");
        assert!(insert_after_line("a\n", 2, "x").unwrap_err().to_string().contains("has 1 lines"));
    }

    #[test]
    fn view_numbers_lines_and_ranges() {
        let (ed, files) = (TextEditor::default(), Mem::default());
        files.write(Path::new("/nowhere/f"), "f", "a\nb\nc\n").unwrap();
        let v = run(&ed, &files, json!({"command": "view", "view_range": [2, -1]})).unwrap();
        assert_eq!(v, "f (lines 2-3 of 3)\n     2  b\n     3  c\n");
        let e = run(&ed, &files, json!({"command": "view", "view_range": [4, 5]})).unwrap_err();
        assert!(e.contains("after the end"), "{e}");
        files.write(Path::new("/nowhere/f"), "f", "").unwrap();
        assert_eq!(run(&ed, &files, json!({"command": "view"})).unwrap(), "f is empty");
    }

    #[test]
    fn edits_undo_in_order_back_to_the_creation() {
        let (ed, files) = (TextEditor::default(), Mem::default());
        let r = run(&ed, &files, json!({"command": "write", "file_text": "one\ntwo\n"})).unwrap();
        assert_eq!(r, "created f (8 bytes, 2 lines)");
        run(&ed, &files, json!({"command": "str_replace", "old_str": "two", "new_str": "2"})).unwrap();
        run(&ed, &files, json!({"command": "insert", "insert_line": 0, "new_str": "zero"})).unwrap();
        assert_eq!(files.read(Path::new("/nowhere/f"), "f", 100).unwrap(), "zero\none\n2\n");
        run(&ed, &files, json!({"command": "undo_edit"})).unwrap();
        run(&ed, &files, json!({"command": "undo_edit"})).unwrap();
        assert_eq!(files.read(Path::new("/nowhere/f"), "f", 100).unwrap(), "one\ntwo\n");
        assert!(run(&ed, &files, json!({"command": "undo_edit"})).unwrap().contains("undid the creation"));
        assert!(files.0.borrow().is_empty());
        assert!(run(&ed, &files, json!({"command": "undo_edit"})).unwrap_err().contains("no edit of f"));
        let e = run(&ed, &files, json!({"command": "insert", "new_str": "x"})).unwrap_err();
        assert_eq!(e, "missing required argument `insert_line` (0 = before the first line)");
        let e = run(&ed, &files, json!({"command": "move"})).unwrap_err();
        assert!(e.contains("use view, write, str_replace, insert or undo_edit"), "{e}");
    }

    #[test]
    fn text_is_checked() {
        assert!(checked_text(vec![b'a'; 11], "f", 10).unwrap_err().to_string().contains("over the 10-byte limit"));
        assert!(checked_text(b"a\0b".to_vec(), "f", 10).unwrap_err().to_string().contains("binary"));
        assert!(checked_text(vec![0xff, 0xfe], "f", 10).unwrap_err().to_string().contains("not UTF-8"));
    }
}
