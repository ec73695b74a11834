//! Deflates the page's files into `OUT_DIR` at build time (`src/deflate.rs`), so the binary
//! carries ~35 KB of them instead of ~100 KB (the static size budget, BENCHMARKS.md);
//! `src/inflate.rs` restores each one the first time it is served. Reads the four files,
//! writes four; no other input.

use std::{env, fs, path::Path};

#[path = "src/deflate.rs"]
mod deflate;

/// The files deflated, by their name in `src/` (`assets.rs` includes `<name>.deflate`).
const ASSETS: [&str; 4] = ["index.html", "app.js", "style.css", "markdown.js"];

fn main() {
    let out = env::var("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    for name in ASSETS {
        let src = Path::new("src").join(name);
        println!("cargo:rerun-if-changed={}", src.display());
        let text = fs::read_to_string(&src).unwrap_or_else(|e| panic!("web: cannot read {}: {e}", src.display()));
        fs::write(Path::new(&out).join(format!("{name}.deflate")), deflate::deflate(text.as_bytes()))
            .unwrap_or_else(|e| panic!("web: cannot write {name}.deflate into {out}: {e}"));
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/deflate.rs");
}
