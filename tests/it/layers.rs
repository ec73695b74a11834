//! ARCHITECTURE.md's invariants that a test can read off the source: the layers point one way,
//! and only store/ (and the developer builtin, whose job is editing the user's files) writes files.
//! Its source readers (`src`, `rust_files`, `code_lines`) also serve `waits.rs`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Each top-level module of src/ and the modules it may import. The layers:
/// http/cli → agent → extensions → mcp → wire, with llm and store beside (usable from agent
/// and up; store also from extensions), acp beside http (http serves it at `/acp`), and a foundation (util, sys, config, tls) everyone may
/// use. builtins are separate programs served by this binary (`gosling mcp NAME`); extensions
/// import only their spawn spec. The composition root (main, lib, agent_cmd, core) wires them and
/// is imported by nobody.
const ALLOWED: &[(&str, &[&str])] = &[
    ("util", &[]),
    ("sys", &["util"]),
    ("config", &[]),
    ("wire", &["util"]),
    ("tls", &["util", "config"]),
    ("store", &["util", "sys", "wire"]),
    ("llm", &["util", "sys", "config", "wire"]),
    ("mcp", &["util", "sys", "config", "wire"]),
    ("builtins", &["util", "sys", "config", "wire", "store"]),
    ("extensions", &["util", "sys", "config", "wire", "store", "mcp", "builtins"]),
    ("agent", &["util", "sys", "config", "wire", "store", "mcp", "extensions", "llm", "builtins"]),
    ("acp", &["util", "sys", "config", "wire", "store", "mcp", "extensions", "llm", "agent", "builtins"]),
    ("web", &[]),
    ("http", &["util", "sys", "config", "wire", "store", "mcp", "extensions", "llm", "agent", "acp", "tls", "web"]),
    ("cli", &["util", "sys", "config", "wire", "store", "mcp", "extensions"]),
];

const ROOT: &[&str] = &["main", "lib", "agent_cmd", "core"];

pub(crate) fn src() -> PathBuf {
    crate::support::manifest_dir().join("src")
}

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of src/ belongs to (`src/mcp/client.rs` → `mcp`).
fn module_of(path: &Path) -> String {
    let rel = path.strip_prefix(src()).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().to_string();
    first.trim_end_matches(".rs").to_string()
}

/// The lines of a file up to its `#[cfg(test)]` tail (tests may reach anywhere), each split
/// into its code and its `//` comment.
pub(crate) fn code_lines(text: &str) -> Vec<(String, String)> {
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match comment_start(l) {
            Some(i) => (l[..i].to_string(), l[i..].to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

/// Where a line's `//` comment starts, outside string literals (and the `'"'` char literal).
fn comment_start(l: &str) -> Option<usize> {
    let b = l.as_bytes();
    let (mut i, mut in_str) = (0, false);
    while i < b.len() {
        match b[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            b'\'' if !in_str && b.get(i + 1) == Some(&b'"') && b.get(i + 2) == Some(&b'\'') => i += 2,
            b'/' if !in_str && b.get(i + 1) == Some(&b'/') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

/// The code of a file without comments and without its `#[cfg(test)]` tail.
fn code(text: &str) -> String {
    code_lines(text).into_iter().map(|(code, _)| code).collect::<Vec<_>>().join("\n")
}

/// The top-level modules a piece of code names as `crate::X`, in `use` lines or inline paths,
/// including `use crate::{a, b}` groups.
fn imports(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for part in group[..end].split(',') {
                let name: String = part.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        } else {
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

#[test]
fn layers_point_one_way() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    assert!(files.len() > 30, "found the sources ({} files)", files.len());
    let mut wrong = Vec::new();
    for file in &files {
        let module = module_of(file);
        let shown = file.strip_prefix(crate::support::manifest_dir()).unwrap().display().to_string();
        let text = std::fs::read_to_string(file).unwrap();
        for target in imports(&code(&text)) {
            if target == module {
                continue;
            }
            if ROOT.contains(&module.as_str()) {
                continue;
            }
            if ROOT.contains(&target.as_str()) {
                wrong.push(format!("{shown}: imports the composition root `{target}`"));
                continue;
            }
            let allowed = ALLOWED
                .iter()
                .find(|(m, _)| *m == module)
                .unwrap_or_else(|| {
                    panic!("{}: module `{module}` is not in ALLOWED; place it in a layer", file.display())
                })
                .1;
            if !allowed.contains(&target.as_str()) {
                wrong.push(format!("{shown}: `{module}` imports `{target}`, which is not below it"));
            }
        }
    }
    assert!(wrong.is_empty(), "imports that go up or sideways:\n{}", wrong.join("\n"));
}

#[test]
fn the_checker_sees_every_import_form() {
    let found =
        imports("use crate::mcp::client::Client;\nuse crate::{store, wire::sse};\nlet x = crate::util::hex(&[]);");
    assert_eq!(found.into_iter().collect::<Vec<_>>(), ["mcp", "store", "util", "wire"]);
    assert!(imports(&code("// crate::http in a comment\n#[cfg(test)]\nuse crate::http;")).is_empty());
    let lines = code_lines("let u = \"http://x\"; // crate::http\nlet q = '\"'; // crate::mcp");
    assert_eq!(lines[0], ("let u = \"http://x\"; ".to_string(), "// crate::http".to_string()));
    assert_eq!(lines[1].1, "// crate::mcp");
}

/// Only store/ writes files; the exceptions say why.
#[test]
fn only_store_writes_files() {
    const WRITES: &[&str] = &["fs::write", "File::create", "OpenOptions::new", "fs::rename", "create_dir"];
    // The developer builtin's file tools edit the user's working directory: that is their job.
    const EXEMPT: &[&str] = &["builtins/developer.rs"];
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut wrong = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(src()).unwrap().to_string_lossy().to_string();
        if rel.starts_with("store/") || EXEMPT.contains(&rel.as_str()) {
            continue;
        }
        let text = code(&std::fs::read_to_string(file).unwrap());
        for w in WRITES {
            if text.contains(w) {
                wrong.push(format!("src/{rel}: {w}"));
            }
        }
    }
    assert!(wrong.is_empty(), "files written outside store/:\n{}", wrong.join("\n"));
}
