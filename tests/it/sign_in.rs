//! Signing in as a person does, for the OAuth tests: the URL gosling hands out, a browser
//! that follows redirects, `gosling auth` run from a terminal, and a session whose `remote`
//! extension (a Streamable HTTP server behind its own authorization server) needs the sign-in.

use crate::support::{resume, start_session, Resp, Server, TempDir};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStderr, Output, Stdio};
use std::time::Duration;

/// The URL in a "needs sign-in" message: the word after "open ".
pub(crate) fn sign_in_url(msg: &str) -> String {
    msg.split("open ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no URL to open in {msg:?}"))
        .to_string()
}

/// The browser: no redirect followed on its own (`follow` does, one at a time), errors are
/// answers.
pub(crate) fn browser() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// GETs `url` and each redirect (at most five): the last URL, its status and body.
pub(crate) fn follow(agent: &ureq::Agent, url: &str) -> (String, u16, String) {
    let mut next = url.to_string();
    for _ in 0..5 {
        let resp = agent.get(&next).call().expect("GET");
        let status = resp.status().as_u16();
        let location = resp.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_string);
        let body = resp.into_body().read_to_string().unwrap_or_default();
        match location {
            Some(l) if (300..400).contains(&status) => next = l,
            _ => return (next, status, body),
        }
    }
    panic!("too many redirects from {url}")
}

/// A new browser opens `url` and follows the redirects (an authorization server that approves
/// at once ends on gosling's loopback page): the last status and body.
pub(crate) fn browse(url: &str) -> (u16, String) {
    let (_, status, body) = follow(&browser(), url);
    (status, body)
}

/// The config of the extension `remote` at `uri` (Streamable HTTP).
pub(crate) fn remote(uri: &str) -> Value {
    json!({"type": "streamable_http", "name": "remote", "description": "", "uri": uri, "timeout": 30})
}

/// A session with the config's enabled extensions, resumed: its id and the resume answer
/// (whose `extension_results` carry a sign-in URL while one is needed).
pub(crate) fn session_with_config_extensions(s: &Server) -> (String, Value) {
    let work = TempDir::new("work");
    let id = start_session(s, work.path(), None);
    let res = resume(s, &id);
    std::mem::forget(work); // the session's working dir outlives this helper
    (id, res)
}

/// Signs in through the HTTP API to a server whose authorization server approves at once:
/// `config` (an extension named `name`) enabled in the config, a session whose resume hands out
/// the sign-in URL, the browser following it to gosling's "Signed in" page, then the extension
/// added to the session. The session's id.
pub(crate) fn signed_in_session(s: &Server, name: &str, config: &Value) -> String {
    let add = s.post("/config/extensions", json!({"name": name, "enabled": true, "config": config}));
    assert_eq!(add.status, 200, "{}", add.text());
    let (id, res) = session_with_config_extensions(s);
    let msg = res["extension_results"][0]["error"].as_str().unwrap_or_else(|| panic!("no sign-in asked: {res}"));
    let (status, page) = browse(&sign_in_url(msg));
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Signed in"), "{page}");
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": config}));
    assert_eq!(add.status, 200, "{}", add.text());
    id
}

/// Calls `remote`'s `whoami` tool in session `id`.
pub(crate) fn whoami(s: &Server, id: &str) -> Resp {
    s.post("/agent/call_tool", json!({"session_id": id, "name": "remote__whoami", "arguments": {}}))
}

/// `gosling auth ARGS` run from a terminal without a desktop: it prints the URL to open on
/// stderr and waits for the browser.
pub(crate) struct AuthCli {
    child: Child,
    err: BufReader<ChildStderr>,
    /// Everything it printed on stderr so far.
    pub printed: String,
}

impl AuthCli {
    pub(crate) fn start(home: &TempDir, args: &[&str]) -> AuthCli {
        let mut child = crate::support::gosling(home)
            .arg("auth")
            .args(args)
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = BufReader::new(child.stderr.take().unwrap());
        AuthCli { child, err, printed: String::new() }
    }

    /// The next authorization URL it prints (it prints another after a failed sign-in).
    pub(crate) fn next_url(&mut self) -> String {
        loop {
            let mut line = String::new();
            let n = self.err.read_line(&mut line).unwrap();
            assert!(n > 0, "gosling auth ended without a URL: {}", self.printed);
            self.printed.push_str(&line);
            if let Some(u) = line.split_whitespace().find(|w| w.contains("/authorize?")) {
                return u.to_string();
            }
        }
    }

    /// Waits for it to exit: its output, and what it printed on stderr after the last URL.
    pub(crate) fn finish(mut self) -> (Output, String) {
        let mut rest = String::new();
        let _ = self.err.read_to_string(&mut rest);
        let out = self.child.wait_with_output().unwrap();
        (out, rest)
    }
}
