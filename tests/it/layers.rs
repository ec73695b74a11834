//! ARCHITECTURE.md's invariants that a test can read off the source: the layers point one way
//! (each layer is a crate of the workspace, so the compiler refuses an import its Cargo.toml does
//! not list; this test holds those lists to the documented table), and only store (and the
//! developer builtin, whose job is editing the user's files) writes files.
//! Its source readers (`sources`, `code_lines`) also serve `waits.rs`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Each layer (a crate under crates/, `gosling-NAME`) and the layers it may depend on. The layers:
/// http/cli → agent → extensions → mcp → wire, with llm and store beside (usable from agent
/// and up; store also from extensions; both import wire, whose formats are theirs too: JSON-RPC
/// for llm, MCP's data types for the tool results in store's conversation), acp beside http (http serves it at `/acp`), and a
/// foundation (util, sys, config, tls) everyone may use. builtins are separate programs served by
/// this binary (`gosling mcp NAME`); extensions import only their spawn spec. The composition root
/// (the `gosling` package: main, lib, agent_cmd, core) wires them and is imported by nobody.
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

/// The workspace's root directory.
fn root() -> PathBuf {
    crate::support::manifest_dir()
}

/// Every Rust source file of the workspace (the root package's src/ and each crate's src/), with
/// its path relative to the root.
pub(crate) fn sources() -> Vec<(String, PathBuf)> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    rust_files(&root().join("crates"), &mut files);
    files.into_iter().map(|f| (f.strip_prefix(root()).unwrap().to_string_lossy().replace('\\', "/"), f)).collect()
}

/// The layer a source file belongs to: `crates/mcp/src/client.rs` → `mcp`; the root package's
/// files → `root`.
fn layer_of(rel: &str) -> &str {
    match rel.strip_prefix("crates/") {
        Some(rest) => rest.split('/').next().unwrap(),
        None => "root",
    }
}

/// The `gosling-*` crates a Cargo.toml lists under `[dependencies]` and under
/// `[dev-dependencies]`/`[build-dependencies]`.
fn gosling_deps(manifest: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut normal, mut other) = (BTreeSet::new(), BTreeSet::new());
    let mut section = String::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.to_string();
            continue;
        }
        let name = match line.strip_prefix("gosling") {
            Some(rest) if rest.starts_with('-') => {
                rest[1..].chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>()
            }
            // The root package itself (`gosling = { path = ... }`): the composition root.
            Some(rest) if rest.trim_start().starts_with('=') || rest.starts_with('.') => "root".to_string(),
            _ => continue,
        };
        match section.as_str() {
            "[dependencies]" => normal.insert(name),
            _ => other.insert(name),
        };
    }
    (normal, other)
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

/// The lines of a file without its `#[cfg(test)]` items (tests may reach anywhere), each split
/// into its code and its `//` comment. Only the item after each `#[cfg(test)]` is cut (to its
/// `;` or its matching `}`), so code after a test module is still read; line numbers are kept.
pub(crate) fn code_lines(text: &str) -> Vec<(String, String)> {
    without_test_items(text)
        .lines()
        .map(|l| match comment_start(l) {
            Some(i) => (l[..i].to_string(), l[i..].to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

/// `text` with each `#[cfg(test)]` attribute and the item it applies to blanked out (newlines
/// kept). Braces inside strings, char literals and comments do not count.
fn without_test_items(text: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = text.as_bytes().to_vec();
    let b = text.as_bytes();
    let mut from = 0;
    while let Some(i) = text[from..].find(MARK).map(|i| i + from) {
        let end = item_end(b, i + MARK.len());
        for c in &mut out[i..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end;
    }
    String::from_utf8(out).expect("blanking ASCII bytes keeps UTF-8 boundaries only for ASCII")
}

/// Where the item starting at `i` ends: after its first `;` at depth 0 or after the `}` closing
/// its first `{`.
fn item_end(b: &[u8], mut i: usize) -> usize {
    let mut depth = 0usize;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                while i + 1 < b.len() && !(b[i] == b'*' && b[i + 1] == b'/') {
                    i += 1;
                }
                i += 2;
                continue;
            }
            b'r' if matches!(b.get(i + 1), Some(b'"' | b'#')) && (i == 0 || !b[i - 1].is_ascii_alphanumeric()) => {
                // A raw string: r"…" or r#"…"#.
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) == Some(&b'"') {
                    let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
                    j += 1;
                    while j < b.len() && !b[j..].starts_with(&close) {
                        j += 1;
                    }
                    i = j + close.len();
                    continue;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => i += 2,
            b'\'' if b.get(i + 1) == Some(&b'\\') => {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
            }
            b'{' => depth += 1,
            b'}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            b';' if depth == 0 => return i + 1,
            _ => {}
        }
        i += 1;
    }
    b.len()
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

/// The code of a file without comments and without its `#[cfg(test)]` items.
fn code(text: &str) -> String {
    code_lines(text).into_iter().map(|(code, _)| code).collect::<Vec<_>>().join("\n")
}

#[test]
fn layers_point_one_way() {
    let mut crates = Vec::new();
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        if dir.join("Cargo.toml").is_file() {
            crates.push(dir.file_name().unwrap().to_string_lossy().to_string());
        }
    }
    crates.sort();
    let documented: BTreeSet<&str> = ALLOWED.iter().map(|(m, _)| *m).collect();
    let found: BTreeSet<&str> = crates.iter().map(String::as_str).collect();
    assert_eq!(found, documented, "the crates under crates/ and the layer table must name the same layers");
    let mut wrong = Vec::new();
    for name in &crates {
        let manifest = std::fs::read_to_string(root().join("crates").join(name).join("Cargo.toml")).unwrap();
        let (normal, other) = gosling_deps(&manifest);
        let allowed = ALLOWED.iter().find(|(m, _)| m == name).unwrap().1;
        for dep in &normal {
            if dep == "root" {
                wrong.push(format!("crates/{name}: depends on the composition root (the `gosling` package)"));
            } else if !allowed.contains(&dep.as_str()) {
                wrong.push(format!("crates/{name}: depends on `gosling-{dep}`, which is not below it"));
            }
        }
        for dep in &other {
            wrong.push(format!(
                "crates/{name}: a dev/build dependency on `gosling-{dep}` (tests that need upper layers are integration tests)"
            ));
        }
    }
    assert!(wrong.is_empty(), "dependencies that go up or sideways:\n{}", wrong.join("\n"));
}

#[test]
fn the_checkers_read_cargo_lists_and_cut_only_test_items() {
    let (normal, other) = gosling_deps(
        "[package]\nname = \"gosling-agent\"\n[dependencies]\ngosling-mcp = { path = \"../mcp\" }\ngosling-store.workspace = true\ngosling = { path = \"../..\" }\nlog.workspace = true\n[dev-dependencies]\ngosling-http = { path = \"../http\" }\n",
    );
    assert_eq!(normal.into_iter().collect::<Vec<_>>(), ["mcp", "root", "store"]);
    assert_eq!(other.into_iter().collect::<Vec<_>>(), ["http"]);
    // A test module is cut; what follows it is read again, on its own line number.
    let text = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn t() { let s = \"}\"; let c = '}'; let r = r#\"}\"#; }\n}\nfn b() { std::fs::write(p, x); }\n";
    let lines = code_lines(text);
    assert_eq!(lines.len(), 6);
    assert!(lines[1..5].iter().all(|(c, _)| c.trim().is_empty()), "{lines:?}");
    assert!(lines[5].0.contains("fs::write"));
    assert!(code("#[cfg(test)]\nuse std::fs::write;\nfn c() { File::create(p); }").contains("File::create"));
    let lines = code_lines("let u = \"http://x\"; // crate::http\nlet q = '\"'; // crate::mcp");
    assert_eq!(lines[0], ("let u = \"http://x\"; ".to_string(), "// crate::http".to_string()));
    assert_eq!(lines[1].1, "// crate::mcp");
}

/// Only the store writes files; the exceptions say why.
#[test]
fn only_store_writes_files() {
    const WRITES: &[&str] = &["fs::write", "File::create", "OpenOptions::new", "fs::rename", "create_dir"];
    // The developer builtin's file tools edit the user's working directory: that is their job.
    const EXEMPT: &[&str] = &["crates/builtins/src/developer.rs"];
    let files = sources();
    assert!(files.len() > 30, "found the sources ({} files)", files.len());
    let mut wrong = Vec::new();
    for (rel, file) in &files {
        if layer_of(rel) == "store" || EXEMPT.contains(&rel.as_str()) {
            continue;
        }
        let text = code(&std::fs::read_to_string(file).unwrap());
        for w in WRITES {
            if text.contains(w) {
                wrong.push(format!("{rel}: {w}"));
            }
        }
    }
    assert!(wrong.is_empty(), "files written outside the store:\n{}", wrong.join("\n"));
}

/// Each `file: key` of `keys` named in the code (test items aside) of a source file that
/// `allowed` does not exempt.
fn keys_named_outside(keys: &[&str], allowed: impl Fn(&str) -> bool) -> Vec<String> {
    let mut wrong = Vec::new();
    for (rel, file) in sources().iter().filter(|(rel, _)| !allowed(rel)) {
        let text = code(&std::fs::read_to_string(file).unwrap());
        for k in keys.iter().filter(|k| text.contains(**k)) {
            wrong.push(format!("{rel}: {k}"));
        }
    }
    wrong
}

/// The core's conversation is typed: goose's message JSON is read and written only by
/// `store/src/message.rs` (at the edges: a session file's lines, an HTTP body, an event), so no
/// other code names its keys — store, agent, acp and http use `Message` and `Content` fields and
/// `match`. Test code may build messages as JSON.
#[test]
fn goose_message_json_is_read_and_written_only_by_the_message_module() {
    // Keys and tags of goose's Message, MessageContent and MessageMetadata that no other
    // protocol gosling speaks uses (not `toolCall`: ACP's permission requests have one too).
    const KEYS: &[&str] = &[
        "\"toolRequest\"",
        "\"frontendToolRequest\"",
        "\"toolResponse\"",
        "\"toolResult\"",
        "\"actionRequired\"",
        "\"actionType\"",
        "\"systemNotification\"",
        "\"notificationType\"",
        "\"userVisible\"",
        "\"agentVisible\"",
        "\"goslingStopped\"",
        "\"goslingError\"",
    ];
    let wrong = keys_named_outside(KEYS, |rel| rel == "crates/store/src/message.rs");
    assert!(wrong.is_empty(), "goose message JSON handled outside store/src/message.rs:\n{}", wrong.join("\n"));
}

#[test]
fn mcp_tool_and_result_json_is_read_and_written_only_by_mcp_types() {
    // Keys of MCP's Tool, CallToolResult, Resource(Template), ReadResourceResult and Prompt that
    // the core reads through `wire::mcp_types` (not `inputSchema`/`outputSchema`: goose's ACP
    // tool listing has them too). The builtins are separate programs speaking MCP's JSON, so they
    // are left out.
    const KEYS: &[&str] = &[
        "\"isError\"",
        "\"structuredContent\"",
        "\"readOnlyHint\"",
        "\"destructiveHint\"",
        "\"taskSupport\"",
        "\"uriTemplate\"",
        "\"blob\"",
        "\"contents\"",
    ];
    let wrong =
        keys_named_outside(KEYS, |rel| rel == "crates/wire/src/mcp_types.rs" || rel.starts_with("crates/builtins/"));
    assert!(wrong.is_empty(), "MCP tool/result JSON handled outside wire/src/mcp_types.rs:\n{}", wrong.join("\n"));
}

/// A layer's modules (`client`, `policy::grammar`; the crate root is left out: it wires its
/// modules) and, for each, the modules it names as `crate::m` or `super::m`.
fn module_graph(layer: &str) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let base = root().join("crates").join(layer).join("src");
    let mut files = Vec::new();
    rust_files(&base, &mut files);
    let name_of = |f: &Path| {
        let rel = f.strip_prefix(&base).unwrap().with_extension("");
        let rel = rel.to_string_lossy().replace('\\', "/");
        rel.trim_end_matches("/mod").replace('/', "::")
    };
    let names: BTreeSet<String> = files.iter().map(|f| name_of(f)).filter(|n| n != "lib").collect();
    let mut graph = std::collections::BTreeMap::new();
    for f in &files {
        let name = name_of(f);
        if name == "lib" {
            continue;
        }
        let text = code(&std::fs::read_to_string(f).unwrap());
        let parent = name.rsplit_once("::").map(|(p, _)| p.to_string());
        let mut deps = BTreeSet::new();
        for (prefix, base) in [("crate::", None), ("super::", parent.as_deref())] {
            let mut rest = text.as_str();
            while let Some(i) = rest.find(prefix) {
                rest = &rest[i + prefix.len()..];
                let m: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                let full = match base {
                    Some(p) => format!("{p}::{m}"),
                    None => m,
                };
                if names.contains(&full) && full != name {
                    deps.insert(full);
                }
            }
        }
        graph.insert(name, deps);
    }
    graph
}

/// The circles of a graph: its strongly connected parts of more than one module, each sorted.
fn circles(graph: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.to_string()];
        while let Some(n) = todo.pop() {
            for d in graph.get(&n).into_iter().flatten() {
                if seen.insert(d.clone()) {
                    todo.push(d.clone());
                }
            }
        }
        seen
    };
    let reaches: std::collections::BTreeMap<&String, BTreeSet<String>> = graph.keys().map(|k| (k, reach(k))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for a in graph.keys() {
        let part: Vec<String> =
            graph.keys().filter(|b| *b == a || (reaches[a].contains(*b) && reaches[*b].contains(a))).cloned().collect();
        if part.len() > 1 && !out.contains(&part) {
            out.push(part);
        }
    }
    out
}

/// No circles among a layer's own modules (issue 26 item 7): each module of a layer imports
/// only modules that do not import it back, directly or through others; the crate root wires.
#[test]
fn no_circles_inside_a_layer() {
    let mut wrong = Vec::new();
    for (layer, _) in ALLOWED {
        for c in circles(&module_graph(layer)) {
            wrong.push(format!("crates/{layer}: a circle among {}", c.join(", ")));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_circle_finder_sees_a_circle_and_not_a_chain() {
    let g = |edges: &[(&str, &str)]| {
        let mut g: std::collections::BTreeMap<String, BTreeSet<String>> = std::collections::BTreeMap::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    assert_eq!(circles(&g(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])), [["a", "b", "c"]]);
    assert!(circles(&g(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
}

/// One public error type per layer: in each crate (and the root package) the only type that
/// implements `std::error::Error` is the one named `Error`; detail callers match on is a plain
/// enum carried by one of its variants. Test code may define its own.
#[test]
fn one_error_type_per_layer() {
    let mut found: std::collections::BTreeMap<String, BTreeSet<String>> = std::collections::BTreeMap::new();
    for (rel, file) in sources() {
        let text = code(&std::fs::read_to_string(&file).unwrap());
        let mut rest = text.as_str();
        while let Some(i) = rest.find("error::Error for ") {
            rest = &rest[i + "error::Error for ".len()..];
            let ty: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            found.entry(layer_of(&rel).to_string()).or_default().insert(format!("{ty} ({rel})"));
        }
    }
    assert!(found.len() >= 10, "found the layers' error types: {found:?}");
    let wrong: Vec<String> = found
        .iter()
        .filter(|(_, types)| types.len() > 1 || types.iter().any(|t| !t.starts_with("Error ")))
        .map(|(layer, types)| format!("{layer}: {}", types.iter().cloned().collect::<Vec<_>>().join(", ")))
        .collect();
    assert!(wrong.is_empty(), "layers with more than their one `Error`:\n{}", wrong.join("\n"));
}
