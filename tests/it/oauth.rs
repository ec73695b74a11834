// Sign-in (OAuth) end to end: a Streamable HTTP MCP server behind its own authorization server
// (tests/fakes/oauth_mcp.py, which approves at once), reached through the HTTP API, `gosling
// auth` and `gosling probe`. The test plays the browser: it opens the URL gosling hands out
// and follows the redirects to gosling's loopback listener.

use crate::sign_in::{browse, remote, session_with_config_extensions, sign_in_url, signed_in_session, whoami, AuthCli};
use crate::support::*;
use serde_json::{json, Value};
use std::process::Command;
use std::time::Duration;

fn fake(args: &[&str]) -> PeerProc {
    spawn_http_peer("/mcp", |port| {
        let mut cmd = Command::new("python3");
        cmd.arg(manifest_dir().join("tests/fakes/oauth_mcp.py")).arg(port.to_string()).args(args);
        cmd
    })
}

fn base(fake: &PeerProc) -> String {
    fake.url.trim_end_matches("/mcp").to_string()
}

fn stats(fake: &PeerProc) -> Value {
    http("GET", &format!("{}/admin/stats", base(fake)), None, None).json()
}

fn ext(fake: &PeerProc) -> Value {
    remote(&fake.url)
}

fn trace_server(home: TempDir) -> Server {
    Server::start_in(home, ServerOpts { env: vec![("RUST_LOG".into(), "trace".into())], ..Default::default() })
}

#[test]
fn sign_in_over_http_then_refresh_and_restart_without_a_second_sign_in() {
    let fake = fake(&[]);
    let s = trace_server(TempDir::new("oauth"));
    assert_eq!(
        s.post("/config/extensions", json!({"name": "remote", "enabled": true, "config": ext(&fake)})).status,
        200
    );

    // Not signed in: the extension result says so and carries the URL to open.
    let (id, res) = session_with_config_extensions(&s);
    let r = &res["extension_results"][0];
    assert_eq!(r["success"], false, "{res}");
    let msg = r["error"].as_str().unwrap();
    assert!(msg.contains("needs sign-in") && msg.contains("gosling auth"), "{msg}");
    let url = sign_in_url(msg);
    assert!(url.starts_with(&format!("{}/authorize?", base(&fake))), "{url}");
    assert!(url.contains("code_challenge_method=S256") && url.contains("resource="), "{url}");
    // Another session meanwhile gets the same sign-in, not a second one.
    let (_, again) = session_with_config_extensions(&s);
    assert_eq!(sign_in_url(again["extension_results"][0]["error"].as_str().unwrap()), url);
    // Adding it to a session answers 424 (a dependency needs the person), with the same URL.
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": ext(&fake)}));
    assert_eq!(add.status, 424, "{}", add.text());
    assert_eq!(sign_in_url(add.json()["message"].as_str().unwrap()), url);

    // The browser signs in; the loopback page answers once the tokens are stored.
    let (status, page) = browse(&url);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Signed in"), "{page}");
    let st = stats(&fake);
    assert_eq!((st["registrations"].as_i64(), st["authorizations"].as_i64()), (Some(1), Some(1)), "{st}");

    // Now the extension comes up, and its tools work.
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": ext(&fake)}));
    assert_eq!(add.status, 200, "{}", add.text());
    let call = whoami(&s, &id);
    assert_eq!(call.status, 200, "{}", call.text());
    assert!(call.text().contains("signed in"), "{}", call.text());

    // The server expires every token: the next call gets a 401, refreshes once and goes on.
    http("POST", &format!("{}/admin/expire", base(&fake)), None, Some(b"{}"));
    let call = whoami(&s, &id);
    assert_eq!(call.status, 200, "{}", call.text());
    let st = stats(&fake);
    assert_eq!((st["refresh_token"].as_i64(), st["authorizations"].as_i64()), (Some(1), Some(1)), "{st}");

    // The tokens live in secrets.json (0600), nowhere else in the config.
    let config_dir = s.home.join("config");
    let secrets = std::fs::read_to_string(config_dir.join("secrets.json")).unwrap();
    assert!(secrets.contains("oauth:"), "{secrets}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(config_dir.join("secrets.json")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    // Restarted, gosling uses the stored (refreshed) token: no second sign-in.
    let log1 = s.stderr();
    let home = s.kill();
    let s = trace_server(home);
    let (id, res) = session_with_config_extensions(&s);
    assert_eq!(res["extension_results"][0]["success"], true, "{res}");
    let call = whoami(&s, &id);
    assert_eq!(call.status, 200, "{}", call.text());
    let st = stats(&fake);
    assert_eq!((st["authorizations"].as_i64(), st["registrations"].as_i64()), (Some(1), Some(1)), "{st}");

    // No token or refresh token in any log (trace level), session file or config.json.
    let log2 = s.stderr();
    // (The Streamable HTTP transport writes no trace lines of its own; the flow is logged.)
    assert!(log1.contains("signed in with") && log1.contains("refreshed the access token"), "{log1}");
    let home = s.kill();
    let mut files = vec![
        ("first log", log1),
        ("second log", log2),
        ("config.json", std::fs::read_to_string(home.join("config/config.json")).unwrap_or_default()),
    ];
    for e in std::fs::read_dir(home.join("state/sessions")).unwrap().flatten() {
        files.push(("a session file", std::fs::read_to_string(e.path()).unwrap_or_default()));
    }
    let tokens: Vec<String> =
        st["tokens"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_string()).collect();
    assert!(tokens.len() >= 4, "{st}");
    for (what, text) in &files {
        for t in &tokens {
            assert!(!text.contains(t.as_str()), "a token appears in {what}");
        }
    }
}

#[test]
fn a_token_is_refreshed_before_it_expires() {
    // The first token lives 1 s: the next request after that refreshes it first, without
    // waiting for the server's 401.
    let fake = fake(&["1"]);
    let s = Server::start();
    let id = signed_in_session(&s, "remote", &ext(&fake));
    let unauthorized_before = stats(&fake)["mcp_unauthorized"].as_i64().unwrap();
    let refreshed = wait_for(Duration::from_secs(15), || {
        assert_eq!(whoami(&s, &id).status, 200);
        (stats(&fake)["refresh_token"].as_i64() == Some(1)).then_some(())
    });
    assert!(refreshed.is_some(), "no refresh within 15 s: {}", stats(&fake));
    assert_eq!(stats(&fake)["mcp_unauthorized"].as_i64().unwrap(), unauthorized_before, "refreshed before a 401");
}

#[test]
fn gosling_auth_signs_in_from_a_terminal_and_probe_reuses_the_token() {
    let fake = fake(&[]);
    let home = TempDir::new("auth-cli");
    std::fs::create_dir_all(home.join("config")).unwrap();
    let mut entry = ext(&fake);
    entry["enabled"] = json!(true);
    std::fs::write(home.join("config/config.json"), json!({"extensions": {"remote": entry}}).to_string()).unwrap();
    let mut auth = AuthCli::start(&home, &["remote"]);
    // The URL is printed (no desktop here to open it); the test opens it.
    let url = auth.next_url();
    assert_eq!(browse(&url).0, 200);
    let (out, rest) = auth.finish();
    assert!(out.status.success(), "{}{rest}", String::from_utf8_lossy(&out.stdout));
    assert!(rest.contains("ssh -L"), "the SSH hint: {rest}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("signed in to remote"));

    // probe finds the token in the same secrets store: no second authorization.
    let probe = gosling(&home).args(["probe", "--sign-in", "follow", &fake.url]).output().unwrap();
    assert!(probe.status.success(), "{}", String::from_utf8_lossy(&probe.stderr));
    assert!(String::from_utf8_lossy(&probe.stdout).contains("whoami"));
    assert_eq!(stats(&fake)["authorizations"].as_i64(), Some(1));
}

#[test]
fn refusals_say_what_to_configure() {
    // An authorization server without dynamic registration, and no client configured.
    let fake = fake(&["3600", "nodcr"]);
    let home = TempDir::new("auth-nodcr");
    let probe = gosling(&home).args(["probe", "--sign-in", "follow", &fake.url]).output().unwrap();
    assert!(!probe.status.success());
    let err = String::from_utf8_lossy(&probe.stderr);
    assert!(err.contains("dynamic client registration") && err.contains("oauth.client_id"), "{err}");

    // A client secret named in the config but not stored.
    let s = Server::start();
    let (id, _) = session_with_config_extensions(&s);
    let mut cfg = ext(&fake);
    cfg["oauth"] = json!({"client_id": "mine", "client_secret_key": "REMOTE_CLIENT_SECRET"});
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": cfg}));
    assert_eq!(add.status, 400, "the client can fix it: store the secret");
    assert!(
        add.text().contains("oauth.client_secret_key") && add.text().contains("REMOTE_CLIENT_SECRET"),
        "{}",
        add.text()
    );

    // gosling auth for something that cannot sign in.
    let out = gosling(&home).args(["auth", "nothing"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no extension \"nothing\""));
}

// Without a person at a browser (docs/install.md, "Signing in without a browser"): the
// extension's `oauth.grant` names client credentials (secret or private-key JWT), a workload's
// JWT-bearer grant or enterprise-managed authorization, and the fake's authorization server
// (and identity provider) issues a token for it. No authorization request, no registration.
// (No pinned real authorization server offers these grants: the TypeScript SDK's refuses
// `client_credentials`, the Python SDK's and fastmcp's offer only the browser flow; the
// conformance runner's scenarios cover them with its own servers, `conformance.rs`.)

#[test]
fn client_credentials_from_the_extension_config_need_no_browser() {
    let first = fake(&[]);
    let s = Server::start();
    let stored = s.post("/config/upsert", json!({"key": "SVC_SECRET", "value": "svc-secret", "is_secret": true}));
    assert_eq!(stored.status, 200, "{}", stored.text());
    let mut cfg = ext(&first);
    cfg["oauth"] = json!({"grant": "client_credentials", "client_id": "svc", "client_secret_key": "SVC_SECRET"});
    let (id, _) = session_with_config_extensions(&s);
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": cfg}));
    assert_eq!(add.status, 200, "{}", add.text());
    let call = whoami(&s, &id);
    assert_eq!(call.status, 200, "{}", call.text());
    assert!(call.text().contains("signed in"), "{}", call.text());
    let st = stats(&first);
    assert_eq!(
        (st["client_credentials"].as_i64(), st["authorizations"].as_i64(), st["registrations"].as_i64()),
        (Some(1), Some(0), Some(0)),
        "{st}"
    );

    // A wrong secret: refused once, said with the token endpoint's answer, no other grant tried.
    let stored = s.post("/config/upsert", json!({"key": "SVC_SECRET", "value": "wrong", "is_secret": true}));
    assert_eq!(stored.status, 200);
    let fake2 = fake(&[]);
    let mut cfg = ext(&fake2);
    cfg["name"] = json!("remote2");
    cfg["oauth"] = json!({"grant": "client_credentials", "client_id": "svc", "client_secret_key": "SVC_SECRET"});
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": cfg}));
    assert_ne!(add.status, 200, "{}", add.text());
    assert!(add.text().contains("invalid_client"), "{}", add.text());
    let st = stats(&fake2);
    assert_eq!((st["refused"].as_array().map(Vec::len), st["authorizations"].as_i64()), (Some(1), Some(0)), "{st}");

    // A grant the config cannot use is refused by field, with what to set.
    let mut cfg = ext(&fake2);
    cfg["name"] = json!("remote3");
    cfg["oauth"] = json!({"grant": "client_credentials", "client_id": "svc"});
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": cfg}));
    assert_eq!(add.status, 400, "{}", add.text());
    assert!(add.text().contains("client_assertion_key"), "{}", add.text());
}

#[test]
fn a_workload_token_file_signs_in_with_gosling_auth() {
    let first = fake(&[]);
    let home = TempDir::new("auth-wif");
    std::fs::create_dir_all(home.join("config")).unwrap();
    let token = home.join("workload-token");
    std::fs::write(&token, "workload.jwt.token\n").unwrap();
    let mut entry = ext(&first);
    entry["enabled"] = json!(true);
    entry["oauth"] = json!({"grant": "jwt_bearer", "token_file": token.display().to_string()});
    std::fs::write(home.join("config/config.json"), json!({"extensions": {"remote": entry.clone()}}).to_string())
        .unwrap();
    let out = gosling(&home).args(["auth", "remote"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("signed in to remote"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let st = stats(&first);
    assert_eq!((st["jwt_bearer"].as_i64(), st["authorizations"].as_i64()), (Some(1), Some(0)), "{st}");

    // A link in place of the file is not followed: the error says to name the file itself.
    let link = home.join("token-link");
    std::os::unix::fs::symlink(&token, &link).unwrap();
    let fake2 = fake(&[]);
    let mut entry = ext(&fake2);
    entry["enabled"] = json!(true);
    entry["oauth"] = json!({"grant": "jwt_bearer", "token_file": link.display().to_string()});
    std::fs::write(home.join("config/config.json"), json!({"extensions": {"remote": entry}}).to_string()).unwrap();
    let out = gosling(&home).args(["auth", "remote"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("symbolic link") && err.contains("oauth.token_file"), "{err}");
    assert_eq!(stats(&fake2)["jwt_bearer"].as_i64(), Some(0));
}

/// A P-256 test key (PKCS#8 PEM) whose public half `tests/fakes/oauth_mcp.py` (and
/// `oauth_authlib.py`) know as the
/// client `svc-jwt`'s. A fixture, not a secret.
pub(crate) const SVC_JWT_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgLH02H2XLcGCPtEhr
U5lDVQwsXK6tYri+gtF85i2YkHyhRANCAASkg3CERC2VyuE/MvlPhJumcH/DvNjP
CjPmvHaiW3KiKtCzDF1TOuY61qUBcs4xb+5xIY66s/HQziHh4mEQ5Y4e
-----END PRIVATE KEY-----
";

#[test]
fn a_private_key_and_an_enterprise_identity_provider_from_the_extension_config() {
    let s = Server::start();
    let (id, _) = session_with_config_extensions(&s);
    let store = |k: &str, v: &str| {
        let r = s.post("/config/upsert", json!({"key": k, "value": v, "is_secret": true}));
        assert_eq!(r.status, 200, "{}", r.text());
    };

    // Client credentials, the client authenticated by a JWT its stored key signs (the fake
    // verifies the ES256 signature, iss, sub, aud and exp).
    let first = fake(&[]);
    store("SVC_KEY", SVC_JWT_KEY);
    let mut cfg = ext(&first);
    cfg["oauth"] = json!({"grant": "client_credentials", "client_id": "svc-jwt", "client_assertion_key": "SVC_KEY"});
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": cfg}));
    assert_eq!(add.status, 200, "{}", add.text());
    assert_eq!(whoami(&s, &id).status, 200);
    let st = stats(&first);
    assert_eq!((st["private_key_jwt"].as_i64(), st["authorizations"].as_i64()), (Some(1), Some(0)), "{st}");

    // Enterprise-managed: the stored ID token exchanged at the identity provider, the grant it
    // gives presented as the configured client.
    let second = fake(&[]);
    store("AS_SECRET", "svc-secret");
    store("IDP_ID_TOKEN", "id-token-of-alice");
    let mut cfg = ext(&second);
    cfg["name"] = json!("remote2");
    cfg["oauth"] = json!({"grant": "enterprise_managed", "client_id": "svc", "client_secret_key": "AS_SECRET",
        "idp": {"token_endpoint": format!("{}/idp/token", base(&second)), "client_id": "gosling-at-idp",
                "id_token_key": "IDP_ID_TOKEN"}});
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": cfg}));
    assert_eq!(add.status, 200, "{}", add.text());
    let call = s.post("/agent/call_tool", json!({"session_id": id, "name": "remote2__whoami", "arguments": {}}));
    assert_eq!(call.status, 200, "{}", call.text());
    let st = stats(&second);
    assert_eq!(
        (st["token_exchange"].as_i64(), st["enterprise"].as_i64(), st["authorizations"].as_i64()),
        (Some(1), Some(1), Some(0)),
        "{st}"
    );

    // A stored key that is not a PKCS#8 P-256 key: refused before anything is sent, saying how.
    store("BAD_KEY", "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n");
    let third = fake(&[]);
    let mut cfg = ext(&third);
    cfg["name"] = json!("remote3");
    cfg["oauth"] = json!({"grant": "client_credentials", "client_id": "svc-jwt", "client_assertion_key": "BAD_KEY"});
    let add = s.post("/agent/add_extension", json!({"session_id": id, "config": cfg}));
    assert_eq!(add.status, 400, "{}", add.text());
    assert!(
        add.text().contains("oauth.client_assertion_key") && add.text().contains("openssl pkcs8"),
        "{}",
        add.text()
    );
    assert!(!add.text().contains("AAAA"), "the key is never repeated: {}", add.text());
}

#[test]
fn a_refused_code_shows_the_authorization_servers_words_escaped_and_without_the_code() {
    // The token endpoint refuses the code with `invalid_grant` and a description that repeats
    // the code and holds a terminal escape (tests/fakes/oauth_mcp.py `refusecode`).
    let fake = fake(&["3600", "refusecode"]);
    let home = TempDir::new("auth-refused");
    std::fs::create_dir_all(home.join("config")).unwrap();
    let mut entry = ext(&fake);
    entry["enabled"] = json!(true);
    std::fs::write(home.join("config/config.json"), json!({"extensions": {"remote": entry}}).to_string()).unwrap();
    let mut auth = AuthCli::start(&home, &["remote"]);
    let url = auth.next_url();
    let (_, page) = browse(&url);
    let (out, rest) = auth.finish();
    assert!(!out.status.success(), "{rest}");
    let said = format!("{}{rest}", auth_text(&out));
    assert!(
        said.contains("invalid_grant (the authorization server says: \"authorization code [redacted] expired"),
        "{said}"
    );
    assert!(said.contains("\\u{1b}[2J; sign in again"), "the escape is shown escaped: {said}");
    assert!(!said.contains('\u{1b}') && !page.contains('\u{1b}'), "a raw terminal escape: {said}");
}

fn auth_text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The web page offers "Sign out" only where a sign-in is stored: `GET /config/extensions`
/// names those extensions (`signed_in`), never their tokens; none before a sign-in, none after
/// the sign-out.
#[test]
fn the_extension_list_says_which_remote_extensions_have_a_stored_sign_in() {
    let fake = fake(&[]);
    let s = Server::start();
    let listed = |s: &Server| {
        let r = s.get("/config/extensions");
        assert_eq!(r.status, 200, "{}", r.text());
        r.json()
    };
    let mut never = ext(&fake);
    never["name"] = json!("never");
    let add = s.post("/config/extensions", json!({"name": "never", "enabled": false, "config": never}));
    assert_eq!(add.status, 200, "{}", add.text());
    assert_eq!(listed(&s)["signed_in"], json!([]), "a remote extension that never signed in");
    let id = signed_in_session(&s, "remote", &ext(&fake));
    assert_eq!(whoami(&s, &id).status, 200);
    let l = listed(&s);
    // "never" points at the same server: the sign-in is the server's, so both show it.
    let names: Vec<&str> = l["signed_in"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(names.contains(&"remote"), "{l}");
    for tok in stats(&fake)["tokens"].as_array().unwrap() {
        assert!(!l.to_string().contains(tok.as_str().unwrap()), "a token in the list: {l}");
    }
    let out = s.post("/config/extensions/remote/sign_out", json!({}));
    assert_eq!(out.status, 200, "{}", out.text());
    assert_eq!(listed(&s)["signed_in"], json!([]), "signed out");
}
