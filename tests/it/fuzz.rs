//! Deterministic fuzzing of every route's request body (a seeded xorshift, no crate): 10,000
//! mutated JSON bodies against one real server. Every answer must be a clean 2xx/4xx with a
//! JSON error body for 4xx, and the server must still serve afterwards. (JSON-RPC framing, the
//! SSE decoder and deep links are fuzzed by unit tests next to their code.)

use crate::support::*;

use gosling::util::XorShift;

/// Valid bodies; none of them can start a process (unknown sessions, sse configs, dry runs).
const SEEDS: [(&str, &str); 17] = [
    (
        "/config/extensions",
        r#"{"name":"f","enabled":false,"config":{"type":"sse","name":"f","uri":"http://127.0.0.1:9/sse"}}"#,
    ),
    (
        "/config/extensions",
        r#"{"name":"g","enabled":false,"config":{"type":"stdio","name":"g","cmd":"true-mcp","args":[],"envs":{"A":"b"},"timeout":5}}"#,
    ),
    ("/config/upsert", r#"{"key":"FUZZ","value":{"a":[1,2]},"is_secret":false}"#),
    ("/config/read", r#"{"key":"FUZZ","is_secret":false}"#),
    ("/config/remove", r#"{"key":"FUZZ","is_secret":true}"#),
    ("/agent/resume", r#"{"session_id":"nope","load_model_and_extensions":false}"#),
    ("/agent/restart", r#"{"session_id":"nope"}"#),
    ("/agent/stop", r#"{"session_id":"nope"}"#),
    ("/agent/update_working_dir", r#"{"session_id":"nope","working_dir":"/tmp"}"#),
    ("/agent/add_extension", r#"{"session_id":"nope","config":{"type":"sse","name":"x"}}"#),
    ("/agent/remove_extension", r#"{"session_id":"nope","name":"x"}"#),
    ("/agent/read_resource", r#"{"session_id":"nope","extension_name":"x","uri":"a://b"}"#),
    ("/agent/call_tool", r#"{"session_id":"nope","name":"x__y","arguments":{"a":1}}"#),
    ("/agent/update_provider", r#"{"session_id":"nope","provider":"openai","model":"m"}"#),
    ("/extensions/install", r#"{"link":"goose://extension?cmd=npx&arg=-y&arg=pkg&name=x&env=K%3Dv","dry_run":true}"#),
    ("/action-required/tool-confirmation", r#"{"id":"t","action":"deny_once","sessionId":"s"}"#),
    (
        "/reply",
        r#"{"session_id":"nope","user_message":{"role":"user","created":0,"content":[{"type":"text","text":"hi"}],"metadata":{"userVisible":true,"agentVisible":true}}}"#,
    ),
];

#[test]
fn ten_thousand_mutated_bodies_get_clean_answers() {
    let s = Server::start();
    let mut rng = XorShift(0xA076_1D64_78BD_642F);
    let mut by_status = std::collections::BTreeMap::new();
    for i in 0..10_000 {
        let (path, seed) = SEEDS[i % SEEDS.len()];
        let body = rng.mutate(seed.as_bytes(), b"{}[]\":,0123456789-.truefalsnul\\ \xc3\xa9xyz", 4);
        let r = http("POST", &s.url(path), Some(SECRET), Some(&body));
        *by_status.entry(r.status).or_insert(0) += 1;
        assert!(r.status < 500, "{path} answered {} to {:?}: {}", r.status, String::from_utf8_lossy(&body), r.text());
        if r.status >= 400 {
            let msg = r.json()["message"].as_str().map(str::to_string);
            assert!(msg.is_some_and(|m| !m.is_empty()), "{path} {}: no message", r.status);
        }
    }
    assert!(by_status.keys().any(|s| *s < 300) && by_status.keys().any(|s| *s >= 400), "{by_status:?}");
    assert_eq!(http("GET", &s.url("/status"), None, None).status, 200);
    assert_eq!(s.get("/config/extensions").status, 200, "the store still loads");
}
