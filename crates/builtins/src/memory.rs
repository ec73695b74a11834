//! The `memory` builtin: remember, retrieve and forget notes grouped by category.
//!
//! Notes live as JSON in the state dir (`GOSLING_STATE_DIR`, else the XDG state dir) under
//! `memory/`: `global.json` for notes shared by every project, and
//! `local/<dir-name>-<hash>.json` for notes of one working directory (`GOOSE_WORKING_DIR`,
//! else the cwd). Every change is a locked read-modify-write through `store::atomic`, so two
//! sessions writing at once never lose a note and a crash never tears a file.
//!
//! Document shape: `{"working_dir"?: str, "categories": {CATEGORY: [{"data", "tags", "saved_at"}]}}`.

use super::error::Error;
use super::server::{opt_bool_arg, str_arg, working_dir_from_env, Builtin, Cancel, ToolOutcome};
use gosling_store::atomic;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// Longest note accepted.
pub const MAX_NOTE_BYTES: usize = 64 << 10;
/// Notes kept per category; remembering more is refused.
pub const MAX_NOTES_PER_CATEGORY: usize = 1000;
/// Bytes of stored notes shown in the initialize instructions.
pub const MAX_INSTRUCTION_NOTES: usize = 8 << 10;
/// Longest category name.
pub const MAX_CATEGORY_CHARS: usize = 64;

pub struct Memory {
    dir: PathBuf,
    working_dir: PathBuf,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Scope {
    Global,
    Local,
}

impl Scope {
    fn label(self) -> &'static str {
        match self {
            Scope::Global => "global",
            Scope::Local => "local",
        }
    }
}

impl Memory {
    pub fn from_env() -> Result<Memory, Error> {
        let state = gosling_config::state_dir(&gosling_config::ProcessEnv);
        let wd = working_dir_from_env().map_err(|e| Error::Setup {
            builtin: "memory",
            reason: format!("cannot read the current directory: {e}; set GOOSE_WORKING_DIR"),
        })?;
        Ok(Memory::new(&state, &wd))
    }

    /// Notes under `state_dir/memory`; local notes belong to `working_dir`.
    pub fn new(state_dir: &Path, working_dir: &Path) -> Memory {
        let working_dir = std::fs::canonicalize(working_dir).unwrap_or_else(|_| working_dir.to_path_buf());
        Memory { dir: state_dir.join("memory"), working_dir }
    }

    fn file(&self, scope: Scope) -> PathBuf {
        match scope {
            Scope::Global => self.dir.join("global.json"),
            Scope::Local => {
                let text = self.working_dir.to_string_lossy();
                let slug: String = self
                    .working_dir
                    .file_name()
                    .map(|n| {
                        n.to_string_lossy()
                            .chars()
                            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
                            .take(40)
                            .collect()
                    })
                    .unwrap_or_else(|| "root".into());
                self.dir.join("local").join(format!("{slug}-{:016x}.json", fnv1a(text.as_bytes())))
            }
        }
    }

    /// The scopes a read or removal looks at: the one asked for, or both.
    fn scopes(args: &Map<String, Value>) -> Result<Vec<Scope>, Error> {
        Ok(match opt_bool_arg(args, "is_global")? {
            Some(true) => vec![Scope::Global],
            Some(false) => vec![Scope::Local],
            None => vec![Scope::Local, Scope::Global],
        })
    }

    fn update<R>(&self, scope: Scope, f: impl FnOnce(&mut Map<String, Value>) -> R) -> Result<R, Error> {
        let wd = self.working_dir.display().to_string();
        atomic::update_json(&self.file(scope), |doc| {
            if !doc.get("categories").is_some_and(Value::is_object) {
                doc.insert("categories".into(), json!({}));
            }
            if scope == Scope::Local && !doc.contains_key("working_dir") {
                doc.insert("working_dir".into(), Value::from(wd));
            }
            let Some(Value::Object(cats)) = doc.get_mut("categories") else { unreachable!("inserted above") };
            f(cats)
        })
        .map_err(Error::Store)
    }

    fn read(&self, scope: Scope) -> Result<Map<String, Value>, Error> {
        match atomic::read_object(&self.file(scope))?.remove("categories") {
            Some(Value::Object(m)) => Ok(m),
            _ => Ok(Map::new()),
        }
    }

    fn remember(&self, args: &Map<String, Value>) -> Result<String, Error> {
        let category = category_arg(args, false)?;
        let data = str_arg(args, "data")?.trim();
        if data.is_empty() {
            return Err(Error::Refused("`data` is empty; pass the text to remember".into()));
        }
        if data.len() > MAX_NOTE_BYTES {
            return Err(Error::Refused(format!(
                "`data` is {} bytes; notes are limited to {MAX_NOTE_BYTES} bytes, store a summary",
                data.len()
            )));
        }
        let tags = tags_arg(args)?;
        let scope = if opt_bool_arg(args, "is_global")?.unwrap_or(false) { Scope::Global } else { Scope::Local };
        let note = json!({"data": data, "tags": tags, "saved_at": gosling_util::unix_secs()});
        let result = self.update(scope, |cats| {
            let list = cats.entry(category.clone()).or_insert_with(|| json!([]));
            if !list.is_array() {
                *list = json!([]);
            }
            let Value::Array(notes) = list else { unreachable!("made an array above") };
            if notes.iter().any(|n| n["data"] == data) {
                return Ok(false);
            }
            if notes.len() >= MAX_NOTES_PER_CATEGORY {
                return Err(Error::Refused(format!(
                    "category {category:?} already holds {MAX_NOTES_PER_CATEGORY} notes; remove some or use another category"
                )));
            }
            notes.push(note);
            Ok(true)
        })??;
        Ok(if result {
            format!("remembered in {category:?} ({})", scope.label())
        } else {
            format!("already remembered in {category:?} ({}); nothing changed", scope.label())
        })
    }

    fn retrieve(&self, args: &Map<String, Value>) -> Result<String, Error> {
        let category = category_arg(args, true)?;
        let mut out = String::new();
        for scope in Memory::scopes(args)? {
            for (name, notes) in self.read(scope)? {
                if category != "*" && name != category {
                    continue;
                }
                let Some(notes) = notes.as_array().filter(|n| !n.is_empty()) else { continue };
                out.push_str(&format!("# {name} ({})\n", scope.label()));
                for n in notes {
                    let data = n["data"].as_str().unwrap_or("").replace('\n', "\n  ");
                    let tags: Vec<&str> =
                        n["tags"].as_array().map(|t| t.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
                    let tags = if tags.is_empty() { String::new() } else { format!(" [tags: {}]", tags.join(", ")) };
                    out.push_str(&format!("- {data}{tags}\n"));
                }
            }
        }
        // Only categories with notes get a heading: no text is no notes.
        if out.is_empty() {
            return Ok(if category == "*" {
                "no memories stored yet".into()
            } else {
                format!("no memories in category {category:?}")
            });
        }
        Ok(out)
    }

    /// Runs `remove` on the categories of each scope `args` selects; how many it removed in all.
    fn remove_in_scopes(
        &self,
        args: &Map<String, Value>,
        remove: impl Fn(&mut Map<String, Value>) -> usize,
    ) -> Result<usize, Error> {
        Memory::scopes(args)?.into_iter().map(|scope| self.update(scope, &remove)).sum()
    }

    fn remove_category(&self, args: &Map<String, Value>) -> Result<String, Error> {
        let category = category_arg(args, true)?;
        let removed = self.remove_in_scopes(args, |cats| {
            if category == "*" {
                let n = cats.len();
                cats.clear();
                n
            } else {
                usize::from(cats.remove(&category).is_some())
            }
        })?;
        Ok(match (category.as_str(), removed) {
            ("*", n) => format!("removed all {n} categories"),
            (_, 0) => format!("no category {category:?} to remove; nothing changed"),
            (_, _) => format!("removed category {category:?}"),
        })
    }

    fn remove_specific(&self, args: &Map<String, Value>) -> Result<String, Error> {
        let category = category_arg(args, false)?;
        let content = str_arg(args, "memory_content")?.trim().to_string();
        if content.is_empty() {
            return Err(Error::Refused("`memory_content` is empty; pass the exact text of the note to remove".into()));
        }
        let removed = self.remove_in_scopes(args, |cats| {
            let Some(Value::Array(notes)) = cats.get_mut(&category) else { return 0 };
            let before = notes.len();
            notes.retain(|n| n["data"].as_str().map(str::trim) != Some(content.as_str()));
            let n = before - notes.len();
            if notes.is_empty() {
                cats.remove(&category);
            }
            n
        })?;
        if removed == 0 {
            return Err(Error::Refused(format!(
                "no note with exactly that text in category {category:?}; retrieve_memories shows the stored text to copy"
            )));
        }
        Ok(format!("removed {removed} note(s) from {category:?}"))
    }
}

/// The `category` argument, trimmed and lower-cased; `*` only where `allow_all`.
fn category_arg(args: &Map<String, Value>, allow_all: bool) -> Result<String, Error> {
    let raw = str_arg(args, "category")?.trim();
    if raw == "*" {
        return if allow_all {
            Ok("*".into())
        } else {
            Err(Error::Refused("category \"*\" is only for retrieving or removing; name one category".into()))
        };
    }
    validate_category(raw)?;
    Ok(raw.to_lowercase())
}

/// Category names: 1..=64 characters of letters, digits, space, `_`, `-`, `.`; no path
/// separators and not starting with a dot.
pub fn validate_category(name: &str) -> Result<(), Error> {
    let refuse = |why: String| Err(Error::Refused(why));
    if name.is_empty() {
        return refuse("`category` is empty; pass a short name like \"preferences\"".into());
    }
    if name.chars().count() > MAX_CATEGORY_CHARS {
        return refuse(format!("category is longer than {MAX_CATEGORY_CHARS} characters; use a short name"));
    }
    if name.starts_with('.') || !name.chars().all(|c| c.is_alphanumeric() || matches!(c, ' ' | '_' | '-' | '.')) {
        return refuse(format!("category {name:?} is not allowed; use letters, digits, spaces, '_', '-' or '.' (no '/' and not starting with '.')"));
    }
    Ok(())
}

fn tags_arg(args: &Map<String, Value>) -> Result<Vec<String>, Error> {
    let wrong = || Error::WrongType { key: "tags".into(), kind: "a list of strings" };
    let tags: Vec<String> = match args.get("tags") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => {
            a.iter().map(|t| t.as_str().map(|s| s.trim().to_string()).ok_or_else(wrong)).collect::<Result<_, _>>()?
        }
        Some(Value::String(s)) => s.split(',').map(|t| t.trim().to_string()).collect(),
        Some(_) => return Err(wrong()),
    };
    let tags: Vec<String> = tags.into_iter().filter(|t| !t.is_empty()).collect();
    if tags.len() > 32 || tags.iter().any(|t| t.len() > 64) {
        return Err(Error::Refused("too many or too long tags; use at most 32 tags of up to 64 bytes".into()));
    }
    Ok(tags)
}

/// The tools, as MCP `Tool` objects (JSON text: far smaller in the binary than the code that
/// would build it).
const TOOLS: &str = r#"[
{"name": "remember_memory", "title": "Remember a note",
 "description": "Store a note under a category, optionally with tags. is_global=true keeps it for every project; otherwise it belongs to the current working directory.",
 "inputSchema": {"type": "object", "properties": {
   "category": {"type": "string", "description": "Short category name (letters, digits, space, _ - .)"},
   "data": {"type": "string", "description": "The text to remember"},
   "tags": {"type": "array", "items": {"type": "string"}},
   "is_global": {"type": "boolean", "description": "true: notes shared by every project; false: notes of this working directory; omitted: both (default false when remembering)"}},
   "required": ["category", "data"]},
 "annotations": {"title": "Remember a note", "openWorldHint": false}},
{"name": "retrieve_memories", "title": "Retrieve notes",
 "description": "Return the notes of a category, or of all categories with \"*\".",
 "inputSchema": {"type": "object", "properties": {
   "category": {"type": "string", "description": "Category name, or \"*\" for all"},
   "is_global": {"type": "boolean", "description": "true: notes shared by every project; false: notes of this working directory; omitted: both (default false when remembering)"}},
   "required": ["category"]},
 "annotations": {"title": "Retrieve notes", "readOnlyHint": true, "openWorldHint": false}},
{"name": "remove_memory_category", "title": "Forget a category",
 "description": "Delete every note of a category (\"*\" deletes all categories).",
 "inputSchema": {"type": "object", "properties": {
   "category": {"type": "string", "description": "Category name, or \"*\" for all"},
   "is_global": {"type": "boolean", "description": "true: notes shared by every project; false: notes of this working directory; omitted: both (default false when remembering)"}},
   "required": ["category"]},
 "annotations": {"title": "Forget a category", "destructiveHint": true, "openWorldHint": false}},
{"name": "remove_specific_memory", "title": "Forget one note",
 "description": "Delete the note of a category whose text is exactly memory_content.",
 "inputSchema": {"type": "object", "properties": {
   "category": {"type": "string"},
   "memory_content": {"type": "string", "description": "The exact text of the note"},
   "is_global": {"type": "boolean", "description": "true: notes shared by every project; false: notes of this working directory; omitted: both (default false when remembering)"}},
   "required": ["category", "memory_content"]},
 "annotations": {"title": "Forget one note", "destructiveHint": true, "openWorldHint": false}}
]"#;

/// FNV-1a, 64-bit: a stable file name for a working directory (not a security boundary).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

impl Builtin for Memory {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn instructions(&self) -> String {
        let mut text = "The memory extension keeps notes across sessions, grouped by category (e.g. \"preferences\", \
         \"project-setup\"). Use remember_memory when the user states a preference or a fact worth \
         keeping; is_global=true shares it with every project, otherwise it belongs to the current working \
         directory. Use retrieve_memories (category, or \"*\" for all) before relying on what you were told \
         earlier. remove_memory_category forgets a whole category; remove_specific_memory forgets one note \
         by its exact text."
            .to_string();
        // Like goose's memory server, show what is already stored so the model starts with it.
        let stored = self.retrieve(&Map::from_iter([("category".to_string(), Value::from("*"))])).unwrap_or_default();
        if stored.starts_with('#') {
            let mut cut = stored.len().min(MAX_INSTRUCTION_NOTES);
            while !stored.is_char_boundary(cut) {
                cut -= 1;
            }
            text.push_str("\n\nNotes saved so far:\n");
            text.push_str(&stored[..cut]);
            if cut < stored.len() {
                text.push_str("\n[... more notes; use retrieve_memories]");
            }
        }
        text
    }

    fn tools(&self) -> Vec<Value> {
        crate::server::tool_list(TOOLS)
    }

    fn call(&self, tool: &str, args: &Map<String, Value>, _cancel: &Cancel) -> ToolOutcome {
        let r = match tool {
            "remember_memory" => self.remember(args),
            "retrieve_memories" => self.retrieve(args),
            "remove_memory_category" => self.remove_category(args),
            "remove_specific_memory" => self.remove_specific(args),
            other => Err(Error::UnknownTool(other.to_string())),
        };
        r.map_err(|e| format!("memory: {e}")).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(m: &Memory, tool: &str, args: Value) -> ToolOutcome {
        let Value::Object(a) = args else { unreachable!() };
        m.call(tool, &a, &Cancel::new())
    }

    #[test]
    fn the_tool_list_is_json_with_an_object_schema_per_tool() {
        let tools = crate::server::tool_list(TOOLS);
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["remember_memory", "retrieve_memories", "remove_memory_category", "remove_specific_memory"]);
        assert!(tools.iter().all(|t| t["inputSchema"]["type"] == "object" && t["annotations"]["title"] == t["title"]));
    }

    #[test]
    fn categories_are_validated() {
        for ok in ["preferences", "Project Setup", "a.b-c_d", "ümlaut"] {
            validate_category(ok).unwrap();
        }
        for bad in ["", "a/b", "..", ".hidden", "a\\b", "x\0", &"c".repeat(65)] {
            assert!(validate_category(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn scopes_are_separate_files() {
        let base = std::env::temp_dir().join(format!("gosling-mem-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("wd")).unwrap();
        let m = Memory::new(&base.join("state"), &base.join("wd"));
        assert!(!call(&m, "remember_memory", json!({"category": "Prefs", "data": "tabs", "is_global": true})).is_error);
        assert!(
            !call(&m, "remember_memory", json!({"category": "prefs", "data": "local note", "tags": ["x"]})).is_error
        );
        assert!(base.join("state/memory/global.json").exists());
        assert_eq!(
            std::fs::read_dir(base.join("state/memory/local"))
                .unwrap()
                .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "json"))
                .count(),
            1
        );
        let both = call(&m, "retrieve_memories", json!({"category": "prefs"})).text;
        assert!(both.contains("tabs") && both.contains("local note [tags: x]"), "{both}");
        let global = call(&m, "retrieve_memories", json!({"category": "*", "is_global": true})).text;
        assert!(global.contains("tabs") && !global.contains("local note"), "{global}");
        assert!(call(&m, "remember_memory", json!({"category": "*", "data": "x"})).is_error);
        // A damaged file is reported and left alone, never overwritten.
        std::fs::write(base.join("state/memory/global.json"), "{broken").unwrap();
        let r = call(&m, "remember_memory", json!({"category": "prefs", "data": "more", "is_global": true}));
        assert!(r.is_error && r.text.starts_with("memory: store: ") && r.text.contains("global.json"), "{}", r.text);
        assert_eq!(std::fs::read_to_string(base.join("state/memory/global.json")).unwrap(), "{broken");
        let _ = std::fs::remove_dir_all(&base);
    }
}
