// Sign-in against a real authorization server: the Python SDK's own auth classes
// (scripts/peers/py_auth_server.py, built the way the SDK's simple-auth example is), whose
// authorization server registers confidential clients (client_secret_basic) and shows a login
// form a person fills in. The test plays the person: it opens the URL gosling hands out, fills
// in the form and follows the redirects to gosling's loopback listener (issue 28).

use crate::require_peers;
use crate::sign_in::{
    browser, follow, remote, session_with_config_extensions, sign_in_url, signed_in_session, whoami, AuthCli,
};
use crate::support::*;
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

struct AuthPeer {
    _proc: PeerProc,
    issuer: String,
    mcp: String,
}

/// The authorization server and the MCP (resource) server; access tokens live `secs`.
fn auth_peer(peers: &Peers, secs: u64) -> AuthPeer {
    // The authorization server's port is chosen with the resource server's, for each try.
    let mut as_port = 0;
    let mut proc = spawn_http_peer("/mcp", |rs_port| {
        as_port = free_port();
        let mut cmd = Command::new(peers.python());
        cmd.args([peers.get("MCP_PEER_PY_AUTH_SERVER"), &as_port.to_string(), &rs_port.to_string(), &secs.to_string()]);
        cmd
    });
    assert!(proc.listens_on(as_port), "the authorization server did not listen on {as_port}");
    AuthPeer { mcp: proc.url.clone(), _proc: proc, issuer: format!("http://127.0.0.1:{as_port}") }
}

fn stats(p: &AuthPeer) -> Value {
    http("GET", &format!("{}/admin/stats", p.issuer), None, None).json()
}

/// The person: opens the sign-in URL, fills in the login form, and lands on gosling's page.
fn sign_in_as_a_person(p: &AuthPeer, url: &str) -> (u16, String) {
    sign_in_as_a_person_with(p, url, || {})
}

/// `sign_in_as_a_person`, with `meanwhile` run between the login page and its submission.
fn sign_in_as_a_person_with(p: &AuthPeer, url: &str, meanwhile: impl FnOnce()) -> (u16, String) {
    let agent = browser();
    let (at, status, form) = follow(&agent, url);
    assert_eq!(status, 200, "the login page: {form}");
    assert!(at.starts_with(&format!("{}/login?", p.issuer)) && form.contains("password"), "{at}: {form}");
    let login = at.split("login=").nth(1).unwrap().to_string();
    meanwhile();
    let body = format!("login={login}&username=demo&password=demo");
    let resp = agent
        .post(&format!("{}/login", p.issuer))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .send(body.as_bytes())
        .expect("POST /login");
    assert_eq!(resp.status().as_u16(), 302, "the login form was refused");
    let back = resp.headers().get("location").and_then(|v| v.to_str().ok()).unwrap().to_string();
    assert!(back.starts_with("http://127.0.0.1:") && back.contains("/callback?"), "{back}");
    let (_, status, page) = follow(&agent, &back);
    (status, page)
}

fn ext(p: &AuthPeer) -> Value {
    remote(&p.mcp)
}

#[test]
fn the_python_sdk_authorization_server_signs_in_refreshes_reauthorizes_and_forgets() {
    let peers = require_peers!();
    let p = auth_peer(peers, 6);
    let s = Server::start();
    assert_eq!(s.post("/config/extensions", json!({"name": "remote", "enabled": true, "config": ext(&p)})).status, 200);

    // Not signed in: the URL to open.
    let (id, res) = session_with_config_extensions(&s);
    let msg = res["extension_results"][0]["error"].as_str().unwrap().to_string();
    assert!(msg.contains("needs sign-in"), "{res}");
    let url = sign_in_url(&msg);
    assert!(url.starts_with(&format!("{}/authorize?", p.issuer)), "{url}");

    // The person signs in; the token request (client_secret_basic, client_id in the body too)
    // is accepted, and a tool call works.
    let (status, page) = sign_in_as_a_person(&p, &url);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Signed in"), "{page}");
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": ext(&p)}));
    assert_eq!(add.status, 200, "{}", add.text());
    let call = whoami(&s, &id);
    assert_eq!(call.status, 200, "{}", call.text());
    assert!(call.text().contains("demo (signed in)"), "{}", call.text());

    // Tokens live 6 s: refreshed before they expire, every call answered.
    let refreshed = wait_for(Duration::from_secs(20), || {
        let call = whoami(&s, &id);
        assert_eq!(call.status, 200, "{}", call.text());
        (stats(&p)["refreshes"].as_i64() >= Some(1)).then_some(())
    });
    assert!(refreshed.is_some(), "no refresh: {}", stats(&p));

    // Revoked (tokens and refresh tokens): the call needs a new sign-in: 424 with the URL, as
    // /agent/add_extension answers.
    http("POST", &format!("{}/admin/revoke", p.issuer), None, Some(b"{}"));
    let call = whoami(&s, &id);
    assert_eq!(call.status, 424, "{}", call.text());
    let url = sign_in_url(call.json()["message"].as_str().unwrap());
    assert_eq!(sign_in_as_a_person(&p, &url).0, 200);
    let call = wait_for(Duration::from_secs(10), || {
        let c = whoami(&s, &id);
        (c.status == 200).then_some(c)
    });
    assert!(call.is_some(), "no call works after signing in again");
    // The client registered at the first sign-in was used again.
    let st = stats(&p);
    assert_eq!((st["registrations"].as_i64(), st["authorizations"].as_i64()), (Some(1), Some(2)), "{st}");

    // The web page's sign-out: the running extension drops its token at once; the next call
    // needs a new sign-in, as a new client (the registration was forgotten too).
    let out = s.post("/config/extensions/remote/sign_out", json!({}));
    assert_eq!(out.status, 200, "{}", out.text());
    assert!(out.json()["forgotten"].as_i64() >= Some(2), "{}", out.text());
    let call = whoami(&s, &id);
    assert_eq!(call.status, 424, "{}", call.text());
    let url = sign_in_url(call.json()["message"].as_str().unwrap());
    assert_eq!(sign_in_as_a_person(&p, &url).0, 200);
    let ok = wait_for(Duration::from_secs(10), || (whoami(&s, &id).status == 200).then_some(()));
    assert!(ok.is_some(), "no call works after signing in again");
    assert_eq!(stats(&p)["registrations"].as_i64(), Some(2));
    assert_eq!(s.post("/config/extensions/nothing/sign_out", json!({})).status, 404);

    // Forget from a terminal: tokens and registration gone from the secrets store.
    let home = s.kill();
    let out = gosling(&home).args(["auth", "remote", "--forget"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("forgot the sign-in of remote"));
    let secrets = std::fs::read_to_string(home.join("config/secrets.json")).unwrap_or_default();
    assert!(!secrets.contains("oauth"), "{secrets}");
    let again = gosling(&home).args(["auth", "remote", "--forget"]).output().unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing was stored"));
    let s = Server::start_in(home, ServerOpts::default());
    let (_, res) = session_with_config_extensions(&s);
    assert!(res["extension_results"][0]["error"].as_str().unwrap().contains("needs sign-in"), "{res}");
}

/// `gosling auth URL` for a server not in the config; `--sign-in follow` against a login page
/// says at once that a person is needed; a registration the server forgot is replaced once.
#[test]
fn gosling_auth_by_url_and_what_it_says_when_a_person_is_needed() {
    let peers = require_peers!();
    let p = auth_peer(peers, 3600);
    let home = TempDir::new("auth-url");

    // The refusal itself is the check: waiting for a person instead would end in the sign-in
    // wait's own words, not these.
    let out = gosling(&home).args(["auth", "--sign-in", "follow", &p.mcp]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("needs a person") && err.contains("without --sign-in follow"), "{err}");

    let sign_in = |home: &TempDir| {
        let mut auth = AuthCli::start(home, &[&p.mcp]);
        let url = auth.next_url();
        assert_eq!(sign_in_as_a_person(&p, &url).0, 200);
        let (out, _) = auth.finish();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(sign_in(&home).contains("signed in to"));
    // probe finds the token stored for that URL.
    let probe = gosling(&home).args(["probe", "--call", "whoami", &p.mcp]).output().unwrap();
    assert!(probe.status.success(), "{}", String::from_utf8_lossy(&probe.stderr));
    assert!(String::from_utf8_lossy(&probe.stdout).contains("demo (signed in)"));

    // The authorization server restarts (forgets its clients and tokens): the stored client is
    // refused at its authorization endpoint, so gosling registers again, once.
    http("POST", &format!("{}/admin/forget", p.issuer), None, Some(b"{}"));
    http("POST", &format!("{}/admin/revoke", p.issuer), None, Some(b"{}"));
    assert!(sign_in(&home).contains("signed in to"));
    let st = stats(&p);
    assert_eq!((st["registrations"].as_i64(), st["authorizations"].as_i64()), (Some(2), Some(2)), "{st}");

    // The server forgets the client while the person signs in: the token endpoint's refusal is
    // what the browser's page says, and gosling registers again and hands out a new URL.
    http("POST", &format!("{}/admin/revoke", p.issuer), None, Some(b"{}"));
    let mut auth = AuthCli::start(&home, &[&p.mcp]);
    let url = auth.next_url();
    let (status, page) = sign_in_as_a_person_with(&p, &url, || {
        http("POST", &format!("{}/admin/forget", p.issuer), None, Some(b"{}"));
    });
    assert_eq!(status, 500, "{page}");
    assert!(page.contains("invalid_client") && page.contains("token endpoint"), "{page}");
    let url = auth.next_url();
    assert_eq!(sign_in_as_a_person(&p, &url).0, 200);
    let (out, _) = auth.finish();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(stats(&p)["registrations"].as_i64(), Some(3));
}

/// fastmcp (scripts/peers/fastmcp_server.py) with its in-memory OAuth provider, which approves
/// at once: sign-in through the HTTP API with the test as the browser, a tool call, refresh
/// before expiry, re-authorization after revocation, forget; and its `ctx.elicit()` reaching
/// the person by default (a session) but not when pinned to 2026-07-28.
#[test]
fn fastmcp_with_its_in_memory_oauth_provider() {
    let peers = require_peers!();
    let fm = spawn_http_peer("/mcp", |port| {
        let mut cmd = Command::new(peers.get("MCP_PEER_FASTMCP_PYTHON"));
        cmd.args([peers.get("MCP_PEER_FASTMCP_SERVER"), &port.to_string(), "6"]);
        cmd
    });
    let base = format!("http://127.0.0.1:{}", fm.port);
    let clients = || http("GET", &format!("{base}/admin/stats"), None, None).json()["clients"].as_i64();
    let s = Server::start();
    let id = signed_in_session(&s, "remote", &remote(&fm.url));
    let call = |s: &Server| whoami(s, &id);
    let c = call(&s);
    assert_eq!(c.status, 200, "{}", c.text());
    assert!(c.text().contains("signed in (fastmcp)"), "{}", c.text());

    // Tokens live 6 s; calls go on past that (refreshed).
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(9) {
        let c = call(&s);
        assert_eq!(c.status, 200, "{}", c.text());
        std::thread::sleep(Duration::from_millis(500));
    }

    // Revoked: 424 with a new URL; after it, calls work, with the same registered client.
    http("POST", &format!("{base}/admin/revoke"), None, Some(b"{}"));
    let c = call(&s);
    assert_eq!(c.status, 424, "{}", c.text());
    let url = sign_in_url(c.json()["message"].as_str().unwrap());
    assert_eq!(follow(&browser(), &url).1, 200);
    let ok = wait_for(Duration::from_secs(10), || (call(&s).status == 200).then_some(()));
    assert!(ok.is_some(), "no call works after signing in again");
    assert_eq!(clients(), Some(1), "the registered client was used again");

    // ctx.elicit(): probe (the same secrets store) answers with the schema's default.
    let home = s.kill();
    let hello = |pin: &[&str]| {
        let out = gosling(&home)
            .args(["probe", "--sign-in", "follow"])
            .args(pin)
            .args(["--call", "hello", &fm.url])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert!(hello(&[]).contains("Hello Ada!"));
    assert!(hello(&["--protocol-version", "2026-07-28"]).contains("Hello Unknown!"));

    // Forget, then the next probe registers and signs in anew.
    let out = gosling(&home).args(["auth", "remote", "--forget"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("forgot the sign-in of remote"), "{out:?}");
    assert!(hello(&[]).contains("Hello Ada!"));
    assert_eq!(clients(), Some(2));
}

/// The TypeScript SDK's demo (its `simpleStreamableHttp` example with `--oauth`: a demo
/// authorization server that approves at once, no refresh tokens): sign-in through the HTTP
/// API with the test as the browser, a tool call, forget.
#[test]
fn the_typescript_sdk_oauth_demo() {
    let peers = require_peers!();
    let mut auth_port = 0;
    let mut demo = spawn_http_peer("/mcp", |port| {
        auth_port = free_port();
        let mut cmd = Command::new(peers.node());
        cmd.arg(peers.get("MCP_PEER_TS_OAUTH_DEMO"))
            .arg("--oauth")
            .env("MCP_PORT", port.to_string())
            .env("MCP_AUTH_PORT", auth_port.to_string());
        cmd
    });
    assert!(demo.listens_on(auth_port), "the demo authorization server did not listen on {auth_port}");
    let port = demo.port;
    // The demo names itself `localhost` in its metadata.
    let url = format!("http://localhost:{port}/mcp");
    let mut ext = remote(&url);
    ext["name"] = json!("demo");
    let s = Server::start();
    let id = signed_in_session(&s, "demo", &ext);
    let call =
        s.post("/agent/call_tool", json!({"session_id": id, "name": "demo__greet", "arguments": {"name": "Ada"}}));
    assert_eq!(call.status, 200, "{}", call.text());
    assert!(call.text().contains("Ada"), "{}", call.text());
    let home = s.kill();
    let out = gosling(&home).args(["auth", "demo", "--forget"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("forgot the sign-in of demo"), "{out:?}");
    let secrets = std::fs::read_to_string(home.join("config/secrets.json")).unwrap_or_default();
    assert!(!secrets.contains("oauth"), "{secrets}");
}

// The grants without a browser against a real authorization server: Authlib's (an OAuth 2.0
// library, pinned through fastmcp's venv; tests/fakes/oauth_authlib.py wires its token endpoint,
// grants and client authentication to a small MCP server). No pinned MCP SDK serves these
// grants (the TypeScript SDK's token endpoint refuses client_credentials; the Python SDK's and
// fastmcp's offer the browser flow only), and none serves token exchange (enterprise-managed
// authorization) or DPoP: those are covered by the conformance runner's scenarios.

struct AuthlibPeer {
    proc: PeerProc,
    /// The workload token the server wrote, as a platform would.
    token_file: std::path::PathBuf,
    _dir: TempDir,
}

fn authlib_peer(peers: &Peers) -> AuthlibPeer {
    let dir = TempDir::new("authlib");
    let token_file = dir.join("workload-token");
    let proc = spawn_http_peer("/mcp", |port| {
        let mut cmd = Command::new(peers.get("MCP_PEER_FASTMCP_PYTHON"));
        cmd.arg(manifest_dir().join("tests/fakes/oauth_authlib.py")).arg(port.to_string()).arg(&token_file);
        cmd
    });
    AuthlibPeer { proc, token_file, _dir: dir }
}

fn authlib_stats(p: &AuthlibPeer) -> Value {
    http("GET", &p.proc.url.replace("/mcp", "/admin/stats"), None, None).json()
}

#[test]
fn grants_without_a_browser_against_authlib() {
    let peers = require_peers!();
    let s = Server::start();
    let (id, _) = session_with_config_extensions(&s);
    let store = |k: &str, v: &str| {
        let r = s.post("/config/upsert", json!({"key": k, "value": v, "is_secret": true}));
        assert_eq!(r.status, 200, "{}", r.text());
    };
    store("BASIC_SECRET", "basic-secret");
    store("SVC_KEY", crate::oauth::SVC_JWT_KEY);
    // A server each: tokens are kept per server (and issuer), whichever extension got them.
    let (a, b, c) = (authlib_peer(peers), authlib_peer(peers), authlib_peer(peers));
    let grants = [
        (
            "secret",
            &a,
            json!({"grant": "client_credentials", "client_id": "svc-basic", "client_secret_key": "BASIC_SECRET"}),
        ),
        ("key", &b, json!({"grant": "client_credentials", "client_id": "svc-jwt", "client_assertion_key": "SVC_KEY"})),
        ("workload", &c, json!({"grant": "jwt_bearer", "token_file": c.token_file.display().to_string()})),
    ];
    for (name, p, oauth) in grants {
        let mut cfg = remote(&p.proc.url);
        cfg["name"] = json!(name);
        cfg["oauth"] = oauth;
        let add = s.post("/agent/add_extension", json!({"session_id": id, "config": cfg}));
        assert_eq!(add.status, 200, "{name}: {}", add.text());
        let call =
            s.post("/agent/call_tool", json!({"session_id": id, "name": format!("{name}__whoami"), "arguments": {}}));
        assert_eq!(call.status, 200, "{name}: {}", call.text());
        assert!(call.text().contains("signed in"), "{name}: {}", call.text());
    }
    let count = |p: &AuthlibPeer, k: &str| authlib_stats(p)[k].as_i64();
    assert_eq!(
        (count(&a, "client_secret_basic"), count(&b, "client_assertion_jwt"), count(&c, "jwt_bearer")),
        (Some(1), Some(1), Some(1)),
        "{} {} {}",
        authlib_stats(&a),
        authlib_stats(&b),
        authlib_stats(&c)
    );
    for p in [&a, &b, &c] {
        assert_eq!(authlib_stats(p)["refused"], json!([]), "{}", authlib_stats(p));
    }
}
