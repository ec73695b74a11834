//! Rules 2–4: the command lines gosling runs, judged by positive grammars. Each launcher and
//! interpreter gosling runs (`RUNS`) has a grammar of allowed options and positional forms;
//! anything outside it is refused with the rule named. A program recognised as another
//! interpreter, shell, launcher or tool that runs code named in its arguments (`RECOGNISED`) is
//! refused by name, and no launcher may run one (nor an interpreter) as its package. A program
//! neither runs nor recognises is the person's own (the allowed-commands rule keeps it off links
//! and imports). docs/install.md has the same grammar as a table, with the reason for each
//! allowed option; keep the two together.
//!
//! `check_args` is pure. `resolve_mounts` (at activation) and `launch_dir` read the file system.

use crate::error::{Error, Refusal};
use gosling_util::{in_words, printable};
use std::path::{Component, Path, PathBuf};

/// The launchers and interpreters gosling runs, each with a grammar below.
pub const RUNS: &str = "npx uvx jbang docker podman node python gosling goosed cu i-ching-mcp-server";

/// Programs gosling recognises and does not run: other interpreters and shells, launchers and
/// package managers (so none can be nested in a launcher), and tools that run code named in their
/// arguments or options (`tar --checkpoint-action`, `git -c alias.x=!…`, `env`, `xargs`, …).
const RECOGNISED: &str = "sh bash rbash zsh dash ksh mksh pdksh csh tcsh fish ash yash posh elvish nu xonsh \
    perl ruby irb pry php php-cgi lua luajit julia rscript osascript groovy pwsh powershell cmd java jshell \
    deno bun bunx tsx ts-node ts-node-dev esno esrun zx coffee babel-node sucrase-node vite-node jiti \
    npm pnpm pnpx yarn yarnpkg corepack npm-exec uv pip pipx poetry hatch pdm pipenv conda mamba micromamba \
    ipython bpython ptpython jupyter hy \
    awk gawk mawk nawk sed busybox toybox env xargs find expect tclsh wish gdb lldb strace ltrace script eval exec \
    source time nice nohup timeout stdbuf setsid sudo doas su runuser chroot watch parallel vim nvim vi emacs ex ed \
    ssh make just rake ant mvn gradle cross-env cross-env-shell shx concurrently npm-run-all run-p run-s nodemon \
    env-cmd dotenv dotenv-cli tar git curl wget kubectl docker-compose podman-compose nerdctl flatpak snap";

/// Python modules that run code or programs named in their arguments, install packages, or are
/// themselves launchers or shells: refused by the nested-launcher rule. Every other module
/// must still be named as an MCP server (`mcp_named`): this list only names the rule.
const PYTHON_RUNNERS: &str = "pip pipx uv xonsh ipython idlelib code codeop runpy pdb timeit cprofile profile \
    trace doctest ensurepip venv virtualenv asyncio webbrowser pydoc http zipapp tarfile zipfile \
    ptpython bpython jupyter hy poetry pipenv pdm hatch conda nox tox invoke pytest unittest";

/// What a program name is to the grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Program {
    Npx,
    Uvx,
    Jbang,
    Container,
    Gosling,
    Node,
    Python,
    /// container-use: `cu stdio` only.
    Cu,
    /// goose's I Ching server: no arguments.
    IChing,
    /// In `RECOGNISED`: refused by name.
    Refused,
    /// A program the person named; only rule 1 (links, imports) limits it.
    Unknown,
}

/// `/usr/bin/Python3.12.exe` → `python3.12`: the file name, lower-cased, without `.exe`/`.cmd`.
fn program_name(arg: &str) -> String {
    let base = arg.rsplit(['/', '\\']).next().unwrap_or(arg).to_ascii_lowercase();
    base.strip_suffix(".exe").or_else(|| base.strip_suffix(".cmd")).unwrap_or(&base).to_string()
}

/// The program's family: the name, or the name before a version (`python3.12`,
/// `perl5.36-x86_64-linux-gnu`, `node20`), or `pythonw`.
fn classify(prog: &str) -> Program {
    let name = program_name(prog);
    let of = |n: &str| -> Option<Program> {
        Some(match n {
            "npx" => Program::Npx,
            "uvx" => Program::Uvx,
            "jbang" => Program::Jbang,
            "docker" | "podman" => Program::Container,
            "gosling" | "goosed" => Program::Gosling,
            "node" | "nodejs" => Program::Node,
            "python" | "pythonw" => Program::Python,
            "cu" => Program::Cu,
            "i-ching-mcp-server" => Program::IChing,
            n if in_words(RECOGNISED, n) => Program::Refused,
            _ => return None,
        })
    };
    if let Some(p) = of(&name) {
        return p;
    }
    // A version after the name: the part before the first digit, without a trailing `-`/`.`.
    if let Some(i) = name.find(|c: char| c.is_ascii_digit()).filter(|i| *i >= 2) {
        if let Some(p) = of(name[..i].trim_end_matches(['-', '.', '_'])) {
            return p;
        }
    }
    Program::Unknown
}

/// Whether `name` (a package, an executable or a Python module) says it is an MCP server: one of
/// its words (split on `-`, `_`, `.`, `/`, `@`) is `mcp`, beside at least one other word
/// (`mcp-server-fetch`, `mcp_server_time`, `awslabs.aws-documentation-mcp-server`). The SDK's
/// own `mcp` command and test runners, task runners, debuggers and REPLs (`pytest`, `tox`,
/// `invoke`, `debugpy`, `pickle`, …) do not, so a launcher or `python -m` never runs them.
fn mcp_named(name: &str) -> bool {
    let words: Vec<String> =
        name.split(['-', '_', '.', '/', '@']).filter(|w| !w.is_empty()).map(str::to_ascii_lowercase).collect();
    words.len() >= 2 && words.iter().any(|w| w == "mcp")
}

fn grammar(cmd: &str, arg: &str, rule: &'static str, why: String) -> Refusal {
    Refusal::InlineCode { cmd: cmd.to_string(), arg: arg.to_string(), why, rule }
}

fn not_package(cmd: &str, arg: &str, why: impl Into<String>) -> Refusal {
    Refusal::NotAPackage { cmd: cmd.to_string(), arg: arg.to_string(), why: why.into() }
}

/// The words of `list`, comma-separated, for a message.
fn shown(list: &str) -> String {
    list.split_whitespace().collect::<Vec<_>>().join(", ")
}

const METACHARS: [&str; 8] = ["$(", "`", ";", "&&", "||", "|", "\n", "\r"];

/// Rules 2–4 for one command line; see the module header and docs/install.md for the grammar.
pub(super) fn check_args(cmd: &str, args: &[String]) -> Result<(), Refusal> {
    for arg in args {
        if let Some(m) = METACHARS.iter().find(|m| arg.contains(**m)) {
            return Err(Refusal::ShellMetacharacter { arg: arg.clone(), pattern: m });
        }
    }
    check_program(cmd, cmd, args, false)
}

/// `prog` with `args`, run directly (`nested` false) or as what a container runs.
fn check_program(cmd: &str, prog: &str, args: &[String], nested: bool) -> Result<(), Refusal> {
    match classify(prog) {
        Program::Npx => check_npx(cmd, args),
        Program::Uvx => check_uvx(cmd, args),
        Program::Jbang => check_jbang(cmd, args),
        Program::Container if !nested => check_container(cmd, args),
        Program::Gosling if !nested => {
            if args.len() == 2 && args[0] == "mcp" && !args[1].starts_with('-') {
                Ok(())
            } else {
                Err(grammar(
                    cmd,
                    args.first().map_or("", String::as_str),
                    "gosling grammar",
                    format!("{cmd} may only be installed as `{cmd} mcp NAME` (a builtin extension), not to start a server or run other subcommands"),
                ))
            }
        }
        Program::Node => check_node(cmd, args),
        Program::Python => check_python(cmd, args),
        Program::Cu if !nested => match args {
            [a] if a == "stdio" => Ok(()),
            _ => Err(grammar(
                cmd,
                args.first().map_or("", String::as_str),
                "cu grammar",
                "container-use runs only as `cu stdio`".into(),
            )),
        },
        Program::IChing if !nested => match args.first() {
            None => Ok(()),
            Some(a) => Err(grammar(cmd, a, "i-ching-mcp-server grammar", "it takes no arguments".into())),
        },
        Program::Refused | Program::Container | Program::Gosling | Program::Cu | Program::IChing => Err(grammar(
            cmd,
            prog,
            "known-programs",
            format!(
                "`{}` is an interpreter, shell, launcher or a tool that runs code named in its arguments, and gosling does not run it \
                 (it runs only: {}); run the server's script with node or python, or its package with npx, uvx or jbang",
                program_name(prog),
                shown(RUNS)
            ),
        )),
        Program::Unknown => Ok(()),
    }
}

/// A program gosling has no grammar for (neither in `RUNS` nor recognised) runs on any path —
/// a link, an import, a recipe, the API, the editor's ACP `mcpServers` — only when its name says
/// it is an MCP server (`mcp-server-time`, `github-mcp-server`, `/opt/x/bin/notes-mcp`) or the
/// operator allowed it by exact name (`allowed`: `GOSLING_ALLOWED_COMMANDS`, the allowlist
/// file's `allowed_commands`). Any other program may be one that runs another program named in
/// its arguments (`flock -c`, `ld.so /bin/sh`, `unshare`, `nsenter`, `setpriv`, `rsync -e`,
/// `sqlite3 -cmd .shell`, `xterm -e`), which no grammar could judge.
pub(super) fn check_own_program(cmd: &str, allowed: &[String]) -> Result<(), Refusal> {
    if classify(cmd) != Program::Unknown || mcp_named(&program_name(cmd)) || allowed.iter().any(|a| a == cmd) {
        return Ok(());
    }
    Err(grammar(
        cmd,
        cmd,
        "own-program",
        format!(
            "gosling runs a program it has no grammar for only when its name says it is an MCP server (`mcp` one word of it: \
             `mcp-server-time`, `github-mcp-server`) or an administrator allowed it by name (GOSLING_ALLOWED_COMMANDS={} or \
             \"allowed_commands\" in the allowlist file); `{}` is neither, and a program such as `flock -c`, `ld.so`, `unshare`, \
             `rsync -e` or `xterm -e` would run any other program; run a script with node or python, or a package with npx, uvx or jbang",
            printable(cmd),
            printable(&program_name(cmd))
        ),
    ))
}

/// What a launcher runs (its package's program) may not itself be a launcher or interpreter.
fn not_nested(cmd: &str, program: &str) -> Result<(), Refusal> {
    match classify(program) {
        Program::Unknown => Ok(()),
        _ => Err(grammar(
            cmd,
            program,
            "nested-launcher",
            format!(
                "`{}` is a launcher, interpreter or shell; a launcher runs an MCP server's package, never another launcher or interpreter \
                 (which would run code from anywhere)",
                program_name(program)
            ),
        )),
    }
}

/// A script path for an interpreter: a file (no URL, no `data:`), with one of `exts`.
fn check_script(cmd: &str, interp: &str, script: &str, exts: &[&str]) -> Result<(), Refusal> {
    let lower = script.to_ascii_lowercase();
    let scheme = lower.split_once(':').is_some_and(|(s, _)| s.len() > 1 && s.bytes().all(|b| b.is_ascii_alphabetic()));
    if script.starts_with('-') || scheme || !exts.iter().any(|e| lower.ends_with(e)) {
        return Err(grammar(
            cmd,
            script,
            "interpreter grammar",
            format!(
                "{interp} runs a script file ending in {} (no URL, no `data:`), given after its options",
                exts.join(" ")
            ),
        ));
    }
    Ok(())
}

/// node: `node [OPTION…] [--] SCRIPT.{js,mjs,cjs} [ARGS…]`. Option names are compared with `_`
/// read as `-`, as node does.
fn check_node(cmd: &str, args: &[String]) -> Result<(), Refusal> {
    const FLAGS: &str = "--no-warnings --no-deprecation --enable-source-maps --trace-warnings --trace-deprecation \
        --trace-uncaught --preserve-symlinks --preserve-symlinks-main";
    const NUMBERS: &str = "--max-old-space-size --max-semi-space-size --stack-size";
    const REJECTIONS: &str = "strict warn throw none warn-with-error-code";
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if a == "--" {
            i += 1;
            break;
        }
        if !a.starts_with('-') {
            break;
        }
        let (name, value) = a.split_once('=').map_or((a.as_str(), None), |(n, v)| (n, Some(v)));
        let name = match name.strip_prefix("--") {
            Some(rest) => format!("--{}", rest.replace('_', "-")),
            None => name.to_string(),
        };
        let ok = match value {
            None => in_words(FLAGS, &name),
            Some(v) if in_words(NUMBERS, &name) => !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()),
            Some(v) => name == "--unhandled-rejections" && in_words(REJECTIONS, v),
        };
        if !ok {
            return Err(grammar(
                cmd,
                a,
                "node grammar",
                format!(
                    "`{name}` is not one of the options node may be given ({}, {}, --unhandled-rejections=MODE); \
                     node's other options load or run code (-e, -p, -r, --import, --require, --loader, --inspect, --test-reporter, …)",
                    shown(FLAGS),
                    NUMBERS.split_whitespace().map(|n| format!("{n}=N")).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        i += 1;
    }
    let script = args.get(i).map_or("", String::as_str);
    check_script(cmd, "node", script, &[".js", ".mjs", ".cjs"])
}

/// python: `python [FLAG…] (SCRIPT.{py,pyz} | -m MODULE) [ARGS…]`, FLAG one of `-u -B -E -I -s
/// -S -O -OO -q -P -b -bb` (or a cluster of those letters).
fn check_python(cmd: &str, args: &[String]) -> Result<(), Refusal> {
    const LETTERS: &str = "uBEIsSOqPb";
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if a == "--" {
            i += 1;
            break;
        }
        if a == "-m" {
            let module = args.get(i + 1).map_or("", String::as_str);
            let ident = |p: &str| {
                p.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                    && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            };
            if module.is_empty() || !module.split('.').all(ident) {
                return Err(grammar(
                    cmd,
                    module,
                    "python grammar",
                    "`-m` takes a module name (`package.module`)".into(),
                ));
            }
            let top = module.split('.').next().unwrap_or("").to_ascii_lowercase();
            if in_words(PYTHON_RUNNERS, &top) || classify(&top) != Program::Unknown {
                return Err(grammar(
                    cmd,
                    module,
                    "nested-launcher",
                    format!("`python -m {module}` runs code or programs named in its arguments, installs packages, or is a shell or launcher"),
                ));
            }
            let top_package = module.split('.').next().unwrap_or("");
            if !mcp_named(top_package) {
                return Err(grammar(
                    cmd,
                    module,
                    "python grammar",
                    format!(
                        "`python -m` runs only an MCP server's module, named as one (`mcp` a word of its package: \
                         `mcp_server_time`); `{top_package}` is not (a test runner, debugger, REPL or the standard \
                         library's tools run code from the working dir or from files named in their arguments); \
                         run the server's script instead"
                    ),
                ));
            }
            return Ok(());
        }
        let short = a.strip_prefix('-').filter(|b| !b.is_empty() && !b.starts_with('-'));
        match short {
            Some(b) if b.chars().all(|c| LETTERS.contains(c)) => i += 1,
            Some(_) | None if a.starts_with('-') => return Err(grammar(
                cmd,
                a,
                "python grammar",
                "python takes only the flags -u -B -E -I -s -S -O -OO -q -P -b -bb before its script or `-m MODULE`; \
                     its other options run code or change what is imported (-c, -X, -W, -i, …)"
                    .into(),
            )),
            _ => break,
        }
    }
    let script = args.get(i).map_or("", String::as_str);
    check_script(cmd, "python", script, &[".py", ".pyz"])
}

fn no_path_or_url(cmd: &str, spec: &str, what: &str) -> Result<(), Refusal> {
    let lower = spec.to_ascii_lowercase();
    if spec.contains("://") || lower.starts_with("git+") || lower.starts_with("file:") || lower.starts_with("data:") {
        return Err(not_package(cmd, spec, format!("it is a URL; {what}")));
    }
    if spec.starts_with(['.', '/', '\\', '~']) || spec.contains('\\') || spec.contains("..") {
        return Err(not_package(cmd, spec, format!("it is a path; {what}")));
    }
    if lower.ends_with(".tgz") || lower.ends_with(".tar.gz") || lower.ends_with(".whl") || lower.ends_with(".zip") {
        return Err(not_package(cmd, spec, format!("it is an archive file; {what}")));
    }
    Ok(())
}

/// npm: `name`, `@scope/name`, each optionally `@version-or-tag`. Returns the package's name
/// without its scope (the program npx runs).
fn check_npm_spec(cmd: &str, spec: &str) -> Result<String, Refusal> {
    const WHAT: &str = "npx runs a registry package: `name`, `@scope/name` or `name@version`";
    no_path_or_url(cmd, spec, WHAT)?;
    let part = |s: &str| {
        !s.is_empty()
            && s.len() <= 214
            && !s.starts_with(['.', '_', '-'])
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._~-".contains(&b))
    };
    let (name, version) = match spec.strip_prefix('@') {
        Some(rest) => {
            let (scope, tail) = rest.split_once('/').ok_or_else(|| not_package(cmd, spec, WHAT))?;
            let (n, v) = tail.split_once('@').map_or((tail, None), |(n, v)| (n, Some(v)));
            if !part(scope) || !part(n) {
                return Err(not_package(cmd, spec, WHAT));
            }
            (n.to_string(), v)
        }
        None => {
            let (n, v) = spec.split_once('@').map_or((spec, None), |(n, v)| (n, Some(v)));
            if !part(n) {
                return Err(not_package(cmd, spec, WHAT));
            }
            (n.to_string(), v)
        }
    };
    if let Some(v) = version {
        if v.is_empty() || !v.bytes().all(|b| b.is_ascii_alphanumeric() || b"._^~<>=*+-".contains(&b)) {
            return Err(not_package(cmd, spec, format!("the version `{v}` is not a version or tag; {WHAT}")));
        }
    }
    Ok(name)
}

/// PyPI (uvx): `name`, `name[extra,…]`, with `==1.0`, `>=1,<2`, `~=1.2` or `@1.0`/`@latest`.
fn check_pypi_spec(cmd: &str, spec: &str) -> Result<String, Refusal> {
    const WHAT: &str = "uvx runs a registry package: `name`, `name==1.0`, `name[extra]` or `name@latest`";
    no_path_or_url(cmd, spec, WHAT)?;
    let end = spec.find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c))).unwrap_or(spec.len());
    let (name, mut rest) = spec.split_at(end);
    if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Err(not_package(cmd, spec, WHAT));
    }
    if let Some(r) = rest.strip_prefix('[') {
        let (extras, after) = r.split_once(']').ok_or_else(|| not_package(cmd, spec, WHAT))?;
        if !extras.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-,".contains(&b)) {
            return Err(not_package(cmd, spec, WHAT));
        }
        rest = after;
    }
    let version = rest.strip_prefix('@').unwrap_or(rest);
    if !version.bytes().all(|b| b.is_ascii_alphanumeric() || b".*+!,<>=~_-".contains(&b)) {
        return Err(not_package(cmd, spec, format!("`{rest}` is not a version specifier; {WHAT}")));
    }
    Ok(name.to_string())
}

/// An executable a package provides (`--from`/`--package` name the package): a plain name.
fn check_bin_name(cmd: &str, bin: &str) -> Result<String, Refusal> {
    no_path_or_url(cmd, bin, "name one of the package's executables")?;
    if bin.is_empty() || bin.starts_with('-') || !bin.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        return Err(not_package(cmd, bin, "name one of the package's executables (letters, digits, `.`, `_`, `-`)"));
    }
    Ok(bin.to_string())
}

/// Splits a launcher's own options from its program. `flags` take no value, `valued` take one
/// (`--opt v` or `--opt=v`; `check` validates it). Anything else before the program is refused.
fn launcher_options(
    cmd: &str,
    args: &[String],
    flags: &str,
    valued: &str,
    mut check: impl FnMut(&str, &str) -> Result<(), Refusal>,
) -> Result<usize, Refusal> {
    let launcher = program_name(cmd);
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            return Ok(i + 1);
        }
        if !a.starts_with('-') || a == "-" {
            return Ok(i);
        }
        let (opt, glued) = a.split_once('=').map_or((a, None), |(o, v)| (o, Some(v)));
        if in_words(flags, a) {
            i += 1;
        } else if in_words(valued, opt) {
            let v = match glued {
                Some(v) => v,
                None => {
                    i += 1;
                    args.get(i).map(String::as_str).ok_or_else(|| not_package(cmd, a, "the option needs a value"))?
                }
            };
            check(opt, v)?;
            i += 1;
        } else {
            return Err(grammar(
                cmd,
                a,
                "launcher grammar",
                format!(
                    "`{opt}` is not one of the {launcher} options gosling allows ({}, {}); others run code or change where packages come from",
                    shown(flags),
                    shown(valued)
                ),
            ));
        }
    }
    Ok(i)
}

/// npx: `npx [-y|--yes|--no|-q|--quiet|--silent|--prefer-offline|--prefer-online|--offline]…
/// [-p|--package SPEC]… PACKAGE [ARGS…]`.
fn check_npx(cmd: &str, args: &[String]) -> Result<(), Refusal> {
    // As goose does: `-c`/`--call` anywhere (npm reads its options after the package too).
    if let Some(a) = args.iter().find(|a| {
        let opt = a.split_once('=').map_or(a.as_str(), |(o, _)| o);
        opt == "-c" || opt == "--call"
    }) {
        return Err(grammar(cmd, a, "no-inline-code", format!("npx with `{a}` runs an arbitrary shell command")));
    }
    let mut named_package = false;
    let i = launcher_options(
        cmd,
        args,
        "-y --yes --no -q --quiet --silent --prefer-offline --prefer-online --offline",
        "-p --package",
        |_, v| {
            named_package = true;
            not_nested(cmd, &check_npm_spec(cmd, v)?)
        },
    )?;
    let Some(program) = args.get(i) else {
        return Err(not_package(cmd, "", "npx needs a package to run"));
    };
    let bin = if named_package { check_bin_name(cmd, program)? } else { check_npm_spec(cmd, program)? };
    not_nested(cmd, &bin)
}

/// uvx: `uvx [FLAG…] [--from SPEC] [--with SPEC[,SPEC…]]… [-p|--python VERSION] PACKAGE [ARGS…]`.
fn check_uvx(cmd: &str, args: &[String]) -> Result<(), Refusal> {
    let mut from = false;
    let i = launcher_options(
        cmd,
        args,
        "-q --quiet -v --verbose --offline --refresh --isolated --no-cache -n --no-progress",
        "--from --with -p --python --refresh-package",
        |opt, v| match opt {
            "--from" => {
                from = true;
                not_nested(cmd, &check_pypi_spec(cmd, v)?)
            }
            "--with" => v.split(',').try_for_each(|p| check_pypi_spec(cmd, p.trim()).map(|_| ())),
            "--refresh-package" => check_pypi_spec(cmd, v).map(|_| ()),
            _ => {
                if v.bytes().all(|b| b.is_ascii_alphanumeric() || b".@_+-".contains(&b)) {
                    Ok(())
                } else {
                    Err(not_package(
                        cmd,
                        v,
                        "--python takes a version or implementation name (`3.12`, `pypy@3.10`), not a path",
                    ))
                }
            }
        },
    )?;
    let Some(program) = args.get(i) else {
        return Err(not_package(cmd, "", "uvx needs a package to run"));
    };
    let bin = if from { check_bin_name(cmd, program)? } else { check_pypi_spec(cmd, program)? };
    not_nested(cmd, &bin)?;
    if !mcp_named(&bin) {
        return Err(grammar(
            cmd,
            program,
            "uvx grammar",
            format!(
                "uvx runs only an MCP server's package, named as one (`mcp` a word of the program it runs: \
                 `mcp-server-fetch`, `aws-documentation-mcp-server`); `{bin}` is not (test and task runners such as \
                 pytest, tox, nox, invoke run the working dir's conftest.py, tox.ini, noxfile.py, tasks.py)"
            ),
        ));
    }
    Ok(())
}

/// jbang: `jbang [run] [FLAG…] [--java|-j VERSION] (GROUP:ARTIFACT:VERSION | ALIAS@CATALOG) [ARGS…]`.
/// `run` comes first or not at all; what follows the options is a Maven coordinate or an alias
/// that names its catalog (`jdbc@quarkiverse/quarkus-mcp-servers`). A bare word there is what
/// jbang reads as a subcommand (`jbang --quiet run --javaagent=…`, `app install`, `trust add`)
/// or an alias from a catalog in the directory it runs in, so it is never a target.
fn check_jbang(cmd: &str, args: &[String]) -> Result<(), Refusal> {
    let args = if args.first().is_some_and(|a| a == "run") { &args[1..] } else { args };
    let i =
        launcher_options(cmd, args, "-q --quiet --fresh --verbose -o --offline --no-cache", "--java -j", |_, v| {
            if v.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) {
                Ok(())
            } else {
                Err(not_package(cmd, v, "--java takes a version"))
            }
        })?;
    let Some(program) = args.get(i) else {
        return Err(not_package(cmd, "", "jbang needs a Maven coordinate or catalog alias to run"));
    };
    const WHAT: &str = "jbang runs a Maven coordinate `group:artifact:version` or a catalog alias that names its catalog \
        (`name@catalog` or `name@org/repo`), after `run` and its options; a bare word is a jbang subcommand or a local alias";
    no_path_or_url(cmd, program, WHAT)?;
    let ok_part = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b));
    let lower = program.to_ascii_lowercase();
    let source_file = [".java", ".jsh", ".kt", ".groovy", ".md", ".jar"].iter().any(|s| lower.ends_with(s));
    let gav = program.split(':').count() >= 3 && program.split(':').all(ok_part);
    let alias = match program.split_once('@') {
        Some((name, catalog)) if !program.contains(':') => {
            let mut parts = catalog.split('/');
            let owner_ok = parts.next().is_some_and(ok_part);
            let rest: Vec<&str> = parts.collect();
            (ok_part(name) && owner_ok && rest.len() <= 1 && rest.iter().all(|r| ok_part(r))).then_some(name)
        }
        _ => None,
    };
    if source_file || !(gav || alias.is_some()) {
        return Err(not_package(cmd, program, WHAT));
    }
    if let Some(name) = alias {
        not_nested(cmd, name)?;
    }
    Ok(())
}

/// The option of `docker`/`podman run` gosling allows, and the kind of value it takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Value {
    Flag,
    Env,
    Text,
    Word,
    Network,
    Pull,
    ContainerPath,
    Volume,
    Mount,
}

/// `(long, short, value)`: every option `docker`/`podman run` may be given (docs/install.md says
/// why each is harmless). Everything else is refused: it reaches the host.
const CONTAINER_OPTIONS: &[(&str, Option<char>, Value)] = &[
    ("--interactive", Some('i'), Value::Flag),
    ("--tty", Some('t'), Value::Flag),
    ("--quiet", Some('q'), Value::Flag),
    ("--rm", None, Value::Flag),
    ("--init", None, Value::Flag),
    ("--read-only", None, Value::Flag),
    ("--env", Some('e'), Value::Env),
    ("--name", None, Value::Word),
    ("--label", Some('l'), Value::Text),
    ("--workdir", Some('w'), Value::ContainerPath),
    ("--user", Some('u'), Value::Word),
    ("--network", None, Value::Network),
    ("--net", None, Value::Network),
    ("--platform", None, Value::Word),
    ("--memory", Some('m'), Value::Word),
    ("--cpus", None, Value::Word),
    ("--pull", None, Value::Pull),
    ("--cap-drop", None, Value::Word),
    ("--tmpfs", None, Value::ContainerPath),
    ("--publish", Some('p'), Value::Word),
    ("--volume", Some('v'), Value::Volume),
    ("--mount", None, Value::Mount),
];

/// One option of a container command line, where its value is (to rewrite mounts).
struct Opt {
    name: &'static str,
    value: Value,
    text: String,
    /// The argument holding the value and the byte where the value starts in it.
    at: Option<(usize, usize)>,
}

/// Parses `run [OPTION…] IMAGE [COMMAND…]` as the engine's flag parser does (long options with
/// `=` or a separate value, short clusters `-it`, a short value glued `-v./d:/d` or `-v=./d:/d`).
/// Returns the options, where `run` ends and the image's index.
fn parse_container(cmd: &str, args: &[String]) -> Result<(Vec<Opt>, usize), Refusal> {
    let reach = |arg: &str, why: String| Refusal::ContainerReach { cmd: cmd.into(), arg: arg.into(), why };
    let start = match args.first().map(String::as_str) {
        Some("run") => 1,
        Some("container") if args.get(1).is_some_and(|a| a == "run") => 2,
        other => {
            return Err(reach(
                other.unwrap_or(""),
                format!("gosling runs only `{cmd} run [OPTION…] IMAGE …` (no global options such as -H/--context, no other subcommands)"),
            ))
        }
    };
    let listed = || {
        CONTAINER_OPTIONS
            .iter()
            .map(|(l, s, _)| s.map_or(l.to_string(), |s| format!("-{s}/{l}")))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let refuse = |a: &str, opt: &str| {
        let why = if opt.trim_start_matches('-').starts_with("entrypoint") {
            "no entrypoint override (`--entrypoint`, even empty): the image runs its own entrypoint".to_string()
        } else {
            format!(
                "`{opt}` is not one of the {cmd} run options gosling allows ({}); the others reach the host",
                listed()
            )
        };
        reach(a, why)
    };
    let mut opts = Vec::new();
    let mut i = start;
    while let Some(a) = args.get(i) {
        if a == "--" || !a.starts_with('-') || a == "-" {
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, glued) = long.split_once('=').map_or((long, None), |(n, v)| (n, Some(v)));
            let Some(&(full, _, value)) = CONTAINER_OPTIONS.iter().find(|(l, _, _)| l[2..] == *name) else {
                return Err(refuse(a, &format!("--{name}")));
            };
            match (value, glued) {
                (Value::Flag, None) => opts.push(Opt { name: full, value, text: String::new(), at: None }),
                (Value::Flag, Some(v)) if v == "true" || v == "false" => {}
                (Value::Flag, Some(_)) => return Err(refuse(a, full)),
                (_, Some(v)) => opts.push(Opt { name: full, value, text: v.into(), at: Some((i, a.len() - v.len())) }),
                (_, None) => {
                    i += 1;
                    let v = args.get(i).ok_or_else(|| reach(a, format!("`{full}` needs a value")))?;
                    opts.push(Opt { name: full, value, text: v.clone(), at: Some((i, 0)) });
                }
            }
            i += 1;
            continue;
        }
        // A short cluster: flags, then at most one valued letter taking the rest or the next arg.
        for (pos, c) in a.char_indices().skip(1) {
            let Some(&(full, _, value)) = CONTAINER_OPTIONS.iter().find(|(_, s, _)| *s == Some(c)) else {
                return Err(refuse(a, &format!("-{c}")));
            };
            if value == Value::Flag {
                opts.push(Opt { name: full, value, text: String::new(), at: None });
                continue;
            }
            let mut from = pos + c.len_utf8();
            if a[from..].starts_with('=') {
                from += 1;
            }
            if from < a.len() {
                opts.push(Opt { name: full, value, text: a[from..].to_string(), at: Some((i, from)) });
            } else {
                i += 1;
                let v = args.get(i).ok_or_else(|| reach(a, format!("`-{c}` needs a value")))?;
                opts.push(Opt { name: full, value, text: v.clone(), at: Some((i, 0)) });
            }
            break;
        }
        i += 1;
    }
    if args.get(i).is_some_and(|a| a == "--") {
        i += 1;
    }
    Ok((opts, i))
}

/// A host path a container may mount: written relative to the session's working dir (`.` or
/// `./sub`, where the engine runs), never leaving it (`..`), resolved at activation.
fn check_bind_source(cmd: &str, arg: &str, src: &str) -> Result<(), Refusal> {
    let rel = src == "." || src.starts_with("./");
    let escapes = Path::new(src).components().any(|c| matches!(c, Component::ParentDir));
    if !rel || escapes || src.contains('\\') {
        return Err(Refusal::ContainerReach {
            cmd: cmd.into(),
            arg: arg.into(),
            why: format!(
                "mounts only of paths inside the session's working dir: write the host path relative to it (`./data:/data`), \
                 without `..` (got `{src}`)"
            ),
        });
    }
    Ok(())
}

fn named_volume(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

/// The host source of a `-v` value, if it is a bind mount (`SRC:DST[:MODE]`).
fn volume_parts(v: &str) -> Result<Option<&str>, String> {
    let parts: Vec<&str> = v.split(':').collect();
    let modes_ok = |m: &str| m.split(',').all(|x| matches!(x, "ro" | "rw" | "z" | "Z"));
    match parts.as_slice() {
        [dst] if dst.starts_with('/') => Ok(None),
        [src, dst] | [src, dst, _] if dst.starts_with('/') => {
            if parts.len() == 3 && !modes_ok(parts[2]) {
                return Err(format!("volume mode `{}` is not one of ro, rw, z, Z", parts[2]));
            }
            if named_volume(src) {
                Ok(None)
            } else {
                Ok(Some(src))
            }
        }
        _ => Err("a volume is `./HOST_PATH:/CONTAINER_PATH[:ro]`, `NAME:/CONTAINER_PATH` or `/CONTAINER_PATH`".into()),
    }
}

/// A `--mount` value's `key=value` fields, keys lower-cased, in order.
type MountFields = Vec<(String, String)>;

/// Go's `encoding/csv` fields of one `--mount` value: `"…"` quotes a field (`""` is a quote);
/// a quote inside an unquoted field is refused rather than guessed at.
fn csv_fields(v: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut chars = v.chars().peekable();
    loop {
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next()? {
                    '"' if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    '"' => break,
                    c => field.push(c),
                }
            }
            match chars.next() {
                None => {
                    out.push(field);
                    return Some(out);
                }
                Some(',') => {}
                Some(_) => return None,
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        out.push(field);
                        return Some(out);
                    }
                    Some(',') => break,
                    Some('"') => return None,
                    Some(c) => field.push(c),
                }
            }
        }
        out.push(field);
    }
}

/// A `--mount` value: keys (compared case-insensitively, as the engine does) only `type` (bind,
/// volume, tmpfs), `source`/`src`, `target`/`destination`/`dst`, `readonly`/`ro`, `tmpfs-size`,
/// `tmpfs-mode`. Returns the bind source, if any, and the fields (to rewrite it).
fn mount_fields(v: &str) -> Result<(Option<String>, MountFields), String> {
    let fields = csv_fields(v).ok_or("a quote inside a --mount field is ambiguous; quote whole fields only")?;
    let mut kv = Vec::new();
    for f in fields {
        let (k, val) = f.split_once('=').map_or((f.as_str(), ""), |(k, v)| (k, v));
        let k = k.trim().to_ascii_lowercase();
        if !matches!(
            k.as_str(),
            "type"
                | "source"
                | "src"
                | "target"
                | "destination"
                | "dst"
                | "readonly"
                | "ro"
                | "tmpfs-size"
                | "tmpfs-mode"
        ) {
            return Err(format!(
                "--mount key `{k}` is not one of type, source, target, readonly, tmpfs-size, tmpfs-mode (volume and bind options reach the host)"
            ));
        }
        kv.push((k, val.to_string()));
    }
    let get = |keys: &[&str]| kv.iter().rev().find(|(k, _)| keys.contains(&k.as_str())).map(|(_, v)| v.clone());
    let kind = get(&["type"]).unwrap_or_else(|| "volume".into());
    let source = get(&["source", "src"]);
    match (kind.as_str(), source) {
        ("bind", Some(s)) => Ok((Some(s), kv)),
        ("bind", None) => Err("a bind mount needs a source inside the working dir".into()),
        ("volume", Some(s)) if !named_volume(&s) => Err(format!("`{s}` is not a volume name")),
        ("volume", _) => Ok((None, kv)),
        ("tmpfs", None) => Ok((None, kv)),
        ("tmpfs", Some(_)) => Err("a tmpfs mount has no source".into()),
        (t, _) => Err(format!("mount type `{t}` is not one of bind, volume, tmpfs")),
    }
}

/// docker/podman: `run [OPTION…] IMAGE [COMMAND [ARGS…]]` with the options of
/// `CONTAINER_OPTIONS` only, mounts only inside the working dir, no entrypoint override; the
/// container's command passes the grammar of what it runs.
fn check_container(cmd: &str, args: &[String]) -> Result<(), Refusal> {
    let (opts, image_at) = parse_container(cmd, args)?;
    let reach = |arg: &str, why: String| Refusal::ContainerReach { cmd: cmd.into(), arg: arg.into(), why };
    for o in &opts {
        let shown = format!("{} {}", o.name, o.text);
        let v = o.text.as_str();
        let word = |extra: &[u8]| !v.is_empty() && v.bytes().all(|b| b.is_ascii_alphanumeric() || extra.contains(&b));
        match o.value {
            Value::Flag => {}
            Value::Env => {
                let name = v.split('=').next().unwrap_or("");
                if crate::config::is_reserved_secret(name) {
                    return Err(Refusal::ReservedSecret { field: format!("{cmd} run {}", o.name), name: name.into() });
                }
            }
            Value::Text => {
                if v.chars().any(char::is_control) {
                    return Err(reach(&shown, "control characters in an option value".into()));
                }
            }
            Value::Word => {
                if !word(b"._:/-[]") {
                    return Err(reach(&shown, format!("`{}` takes a plain value", o.name)));
                }
            }
            Value::Network => {
                if !named_volume(v) || v.eq_ignore_ascii_case("host") {
                    return Err(reach(
                        &shown,
                        "the network is `none`, `bridge` or a named network, never the host's or another container's"
                            .into(),
                    ));
                }
            }
            Value::Pull => {
                if !matches!(v, "always" | "missing" | "never") {
                    return Err(reach(&shown, "--pull is always, missing or never".into()));
                }
            }
            Value::ContainerPath => {
                if !v.starts_with('/') {
                    return Err(reach(&shown, format!("`{}` takes a path inside the container", o.name)));
                }
            }
            Value::Volume => match volume_parts(v) {
                Ok(Some(src)) => check_bind_source(cmd, &shown, src)?,
                Ok(None) => {}
                Err(why) => return Err(reach(&shown, why)),
            },
            Value::Mount => match mount_fields(v) {
                Ok((Some(src), _)) => check_bind_source(cmd, &shown, &src)?,
                Ok((None, _)) => {}
                Err(why) => return Err(reach(&shown, why)),
            },
        }
    }
    let Some(image) = args.get(image_at) else {
        return Err(reach("", format!("`{cmd} run` needs an image")));
    };
    if !image.bytes().all(|b| b.is_ascii_alphanumeric() || b"._/:@-".contains(&b)) {
        return Err(not_package(cmd, image, "an image is a name like `ghcr.io/org/server:tag`"));
    }
    let after = &args[image_at + 1..];
    match after.first() {
        Some(prog) => check_program(cmd, prog, &after[1..], true),
        None => Ok(()),
    }
}

/// At activation (every start, resume and restart): the grammar again, then the arguments to
/// run — for a container, each bind source (`./sub`) replaced by its canonical path, which must
/// lie inside the canonical working dir (symlinks followed, so a link pointing out of it is
/// refused), and the working dir must not be `/`. Other programs' arguments come back as they are.
pub fn check_launch(cmd: &str, args: &[String], working_dir: &Path) -> Result<Vec<String>, Error> {
    launch_args(cmd, args, working_dir).map_err(Error::Refused)
}

fn launch_args(cmd: &str, args: &[String], working_dir: &Path) -> Result<Vec<String>, Refusal> {
    check_args(cmd, args)?;
    if classify(cmd) != Program::Container {
        return Ok(args.to_vec());
    }
    let (opts, _) = parse_container(cmd, args)?;
    let mut out = args.to_vec();
    let reach = |arg: &str, why: String| Refusal::ContainerReach { cmd: cmd.into(), arg: arg.into(), why };
    let inside = |src: &str| -> Result<String, Refusal> {
        let root = std::fs::canonicalize(working_dir)
            .map_err(|e| reach(src, format!("the working dir {} cannot be resolved: {e}", working_dir.display())))?;
        if root == Path::new("/") {
            return Err(reach(src, "the session's working dir is `/`: nothing may be mounted from it".into()));
        }
        let resolved = canonical_within(&root, src);
        match resolved {
            Some(p) if p.starts_with(&root) => Ok(p.display().to_string()),
            _ => Err(reach(
                src,
                format!("`{src}` resolves outside the session's working dir {} (a symbolic link?)", root.display()),
            )),
        }
    };
    // Rewrite from the last option back, so earlier byte offsets stay valid.
    for o in opts.iter().rev() {
        let Some((idx, from)) = o.at else { continue };
        let new_value = match o.value {
            Value::Volume => match volume_parts(&o.text) {
                Ok(Some(src)) => {
                    let abs = inside(src)?;
                    format!("{abs}{}", &o.text[src.len()..])
                }
                _ => continue,
            },
            Value::Mount => match mount_fields(&o.text) {
                Ok((Some(src), kv)) => {
                    let abs = inside(&src)?;
                    kv.iter()
                        .map(|(k, v)| {
                            let v = if k == "source" || k == "src" { abs.as_str() } else { v.as_str() };
                            let f = if v.is_empty() && (k == "readonly" || k == "ro") {
                                k.clone()
                            } else {
                                format!("{k}={v}")
                            };
                            if f.contains([',', '"']) {
                                format!("\"{}\"", f.replace('"', "\"\""))
                            } else {
                                f
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                }
                _ => continue,
            },
            _ => continue,
        };
        out[idx] = format!("{}{new_value}", &out[idx][..from]);
    }
    Ok(out)
}

/// `src` (relative) under `root`: the longest existing prefix canonicalised (links followed),
/// the rest appended; `None` when a remaining part climbs (`..`).
fn canonical_within(root: &Path, src: &str) -> Option<PathBuf> {
    let full = root.join(src);
    let mut existing = full.clone();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(&existing) {
            let mut p = c;
            for part in rest.iter().rev() {
                p.push(part);
            }
            return Some(p);
        }
        let name = existing.file_name()?.to_os_string();
        if name == ".." {
            return None;
        }
        rest.push(name);
        existing = existing.parent()?.to_path_buf();
    }
}

/// `PATH` as a child is given it: only the absolute entries of `path`, in order. A relative or
/// empty entry (`.`, `bin`, `::`) would be read in the directory the child starts in — the
/// working dir, a cloned repository — after the change of directory, so an approved `uvx`
/// could resolve to the working dir's own `uvx`. Returns the new value and the entries dropped.
pub fn absolute_path(path: &std::ffi::OsStr) -> (std::ffi::OsString, Vec<PathBuf>) {
    let (keep, dropped): (Vec<PathBuf>, Vec<PathBuf>) = std::env::split_paths(path).partition(|p| p.is_absolute());
    (std::env::join_paths(keep).unwrap_or_default(), dropped)
}

/// Where a stdio extension starts: launchers that read configuration from the directory they
/// run in (npm's project `.npmrc`, jbang's local catalogs) start in the user's home (`home`, or
/// `/` without one), so a working dir — a cloned repository, say — cannot change what they run;
/// everything else starts in the working dir.
pub fn launch_dir(cmd: &str, working_dir: &Path, home: Option<&Path>) -> PathBuf {
    match classify(cmd) {
        Program::Npx | Program::Jbang => home.filter(|h| h.is_dir()).unwrap_or(Path::new("/")).to_path_buf(),
        _ => working_dir.to_path_buf(),
    }
}

/// What kind of program `cmd` is, in the words of the install summary: `launcher` (npx, uvx,
/// jbang: fetches a package and runs it), `container` (docker, podman), `interpreter` (node,
/// python: runs a script), `gosling` (a builtin), `refused` (a recognised interpreter, shell or
/// code-running tool) or `other` (a program the person named).
pub fn program_family(cmd: &str) -> &'static str {
    match classify(cmd) {
        Program::Npx | Program::Uvx | Program::Jbang => "launcher",
        Program::Container => "container",
        Program::Node | Program::Python => "interpreter",
        Program::Gosling => "gosling",
        Program::Cu | Program::IChing => "known",
        Program::Refused => "refused",
        Program::Unknown => "other",
    }
}
