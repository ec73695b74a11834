//! ARCHITECTURE.md's "every wait has a deadline", read off the source: a blocking wait in the sources
//! uses its deadline form (`recv_timeout`, `select!` with `default(timeout)` or an `after`
//! channel, `wait_timeout`, a socket read timeout) or says why unbounded is fine in a reviewed
//! comment `// wait: <why>` at the end of its line, or alone on the line just above it (where
//! rustfmt would move a comment after a `{`): a server's accept loop, a thread whose input
//! ends when its pipe closes, a child already killed.

use crate::layers::{code_lines, sources};

/// Calls that block until someone else acts, and what to use instead.
const BLOCKING: &[(&str, &str)] = &[
    (".recv()", "recv_timeout, or select! with a default(timeout) arm"),
    (".join()", "a deadline on what the thread waits for"),
    (".wait(", "wait_timeout (a Condvar), or a deadline before killing the child"),
    ("wait_while(", "wait_timeout_while"),
    ("read_line(", "a read timeout on the socket or pipe"),
    ("read_until(", "a read timeout on the socket or pipe"),
    (".accept()", "a non-blocking listener polled against a deadline"),
    (".incoming()", "a non-blocking listener polled against a deadline"),
];

/// The reviewed allowance, on the same line as the wait.
const ALLOW: &str = "// wait:";

/// Parts of the sources the check does not cover yet (none: every directory is checked). Add a
/// `(dir, why)` here only while a directory is being rewritten elsewhere.
const NOT_YET: &[(&str, &str)] = &[];

/// The waits of one file's code (its `#[cfg(test)]` items excluded) that have neither a
/// deadline nor an allowance: (line number, line, what to use).
fn unbounded(text: &str) -> Vec<(usize, String, &'static str)> {
    let mut out = Vec::new();
    let lines = code_lines(text);
    let allowed = |n: usize| {
        lines[n].1.contains(ALLOW) || (n > 0 && lines[n - 1].0.trim().is_empty() && lines[n - 1].1.contains(ALLOW))
    };
    for (n, (code, _)) in lines.iter().enumerate() {
        if allowed(n) {
            continue;
        }
        let flagged = BLOCKING
            .iter()
            .find(|(call, _)| code.contains(call) && !code.contains(&format!("fn {}", call.trim_start_matches('.'))))
            .map(|(_, fix)| *fix)
            .or_else(|| channel_loop(code).then_some("recv_timeout in a loop"));
        if let Some(fix) = flagged {
            out.push((n + 1, code.trim().to_string(), fix));
        }
    }
    // A `select!` waits for ever unless one arm is a deadline.
    let code: String = lines.iter().map(|(c, _)| format!("{c}\n")).collect();
    let mut from = 0;
    while let Some(i) = code[from..].find("select!") {
        let at = from + i;
        let line = code[..at].matches('\n').count();
        let bounded = ["default(", "after(", "at(", "tick("].iter().any(|d| balanced(&code[at..]).contains(d));
        if !bounded && !allowed(line) {
            out.push((line + 1, lines[line].0.trim().to_string(), "a default(timeout) arm or an after(..) channel"));
        }
        from = at + "select!".len();
    }
    out.sort();
    out
}

/// `for x in rx {` or `rx.iter()`: a loop over a channel's receiver, which ends only when
/// every sender is gone.
fn channel_loop(code: &str) -> bool {
    let is_rx = |name: &str| name.trim_start_matches('&').ends_with("rx");
    let ident = |s: &str| s.chars().rev().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '&').count();
    if let Some(i) = code.find(".iter()") {
        let before = &code[..i];
        if is_rx(&before[before.len() - ident(before)..]) {
            return true;
        }
    }
    if let (Some(f), Some(i)) = (code.find("for "), code.rfind(" in ")) {
        let rest = code[i + 4..].trim_end();
        if f < i && rest.ends_with('{') && is_rx(rest.trim_end_matches('{').trim()) {
            return true;
        }
    }
    false
}

/// The text from a macro name to the brace that closes its first `{`.
fn balanced(s: &str) -> &str {
    let mut depth = 0;
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 1 => return &s[..=i],
            '}' => depth -= 1,
            _ => {}
        }
    }
    s
}

#[test]
fn every_wait_has_a_deadline() {
    let files = sources();
    assert!(files.len() > 30, "found the sources ({} files)", files.len());
    let mut wrong = Vec::new();
    for (rel, file) in &files {
        if NOT_YET.iter().any(|(dir, _)| rel.starts_with(dir)) {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (line, code, fix) in unbounded(&text) {
            wrong.push(format!(
                "{rel}:{line}: {code}\n    use {fix}; or, if unbounded is fine, end the line with `{ALLOW} <why>`"
            ));
        }
    }
    assert!(wrong.is_empty(), "blocking waits without a deadline:\n{}", wrong.join("\n"));
}

#[test]
fn the_wait_checker_sees_each_form() {
    let src = r#"
fn f() {
    let a = rx.recv();
    let b = rx.recv_timeout(d);
    h.join().unwrap();
    let v = names.join(", ");
    child.wait();
    child.wait(); // wait: killed just above
    // wait: killed just above
    child.wait();
    let g = cv.wait(g);
    let g = cv.wait_timeout(g, d);
    reader.read_line(&mut s);
    input.read_until(b'\n', &mut v).map_err(|_| "x")?; // wait: the parent's pipe
    listener.accept();
    for x in rx {
    for x in &done_rx {
    for x in items {
    for x in rx.iter() {
    select! { recv(a) -> v => v, recv(b) -> v => v }
    select! { recv(a) -> v => v, default(d) => None }
    // rx.recv() in a comment
}
fn read_line(r: &mut R) {}
#[cfg(test)]
mod tests { fn t() { rx.recv(); } }
"#;
    let found: Vec<usize> = unbounded(src).into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(found, [3, 5, 7, 11, 13, 15, 16, 17, 19, 20]);
}

/// What the integration tests may not do with the clock (issue 37 item 6), in one test file's
/// code: assert on an elapsed time (`assert!(t.elapsed() < …)`: use the event that shows the
/// requirement, or `support::assert_well_under` where the time is the requirement), or assert
/// right after a sleep (wait for the event instead). (line number, line, what to do).
fn clock_checks(text: &str) -> Vec<(usize, String, &'static str)> {
    let lines = code_lines(text);
    let mut out = Vec::new();
    let mut after_sleep: Option<usize> = None;
    for (n, (code, _)) in lines.iter().enumerate() {
        let code = code.trim();
        if code.is_empty() {
            continue;
        }
        let asserts = code.starts_with("assert") && !code.starts_with("assert_well_under");
        if asserts && code.contains("elapsed()") {
            out.push((n + 1, code.to_string(), "assert on the event that shows it, or assert_well_under"));
        }
        if let (true, Some(_)) = (asserts, after_sleep) {
            out.push((n + 1, code.to_string(), "wait for the event instead of sleeping"));
        }
        after_sleep = code.starts_with("std::thread::sleep(").then_some(n);
    }
    out
}

#[test]
fn tests_wait_on_events_not_on_the_clock() {
    let dir = crate::support::manifest_dir().join("tests/it");
    let mut wrong = Vec::new();
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        // This file and layers.rs hold the checkers' own examples.
        if !name.ends_with(".rs") || name == "waits.rs" {
            continue;
        }
        files += 1;
        for (line, code, fix) in clock_checks(&std::fs::read_to_string(&path).unwrap()) {
            wrong.push(format!("tests/it/{name}:{line}: {code}\n    {fix}"));
        }
    }
    assert!(files > 30, "found the test files ({files})");
    assert!(wrong.is_empty(), "tests that lean on the clock:\n{}", wrong.join("\n"));
}

#[test]
fn the_clock_checker_sees_each_form() {
    let src = r#"
fn t() {
    assert!(t.elapsed() < Duration::from_secs(3));
    assert_well_under(t.elapsed(), Duration::from_secs(30), "x");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(a, b);
    std::thread::sleep(Duration::from_millis(300));
    // a comment between
    let r = get();
    assert_eq!(r, 1);
    std::thread::sleep(Duration::from_millis(300));

    assert!(ok);
}
"#;
    let found: Vec<usize> = clock_checks(src).into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(found, [3, 6, 13]);
}
