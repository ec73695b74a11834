//! Issue 29, everyday use, server half: session titles (first message at once, the model's
//! after the first exchange, never over a name the person set; `PUT /sessions/{id}/name`), a
//! stopped answer saved as far as it got and marked, a failed turn's error kept as shown live,
//! and the settings in force with what the environment overrides. Real binary, llmock as the
//! OpenAI provider (scripted through its /_llmock control API).

use crate::llmock::Llmock;
use crate::support::{http, wait_for, Resp, Server, ServerOpts, SECRET};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn server(mock: &Llmock, extra: &[(&str, &str)]) -> Server {
    let mut env: Vec<(String, String)> = [
        ("GOOSE_PROVIDER", "openai"),
        ("GOOSE_MODEL", "any"),
        ("OPENAI_API_KEY", "sk-llmock"),
        ("GOSLING_SESSION_TITLES", "model"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    env.push(("OPENAI_HOST".into(), mock.openai_host()));
    env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Server::start_with(ServerOpts { env, ..Default::default() })
}

/// Waits until llmock has used every scripted behaviour.
fn script_used(mock: &Llmock) {
    let url = format!("{}/_llmock/scenario", mock.openai_host());
    let done = wait_for(Duration::from_secs(30), || {
        let r = http("GET", &url, None, None);
        (r.json()["pending"].as_array().map_or(0, Vec::len) == 0).then_some(())
    });
    assert!(done.is_some(), "llmock still holds scripted behaviours: {}", http("GET", &url, None, None).text());
}

fn call(s: &Server, method: &str, path: &str, body: Value) -> Resp {
    http(method, &s.url(path), Some(SECRET), Some(body.to_string().as_bytes()))
}

fn new_session(s: &Server) -> String {
    let dir = s.home.join("work");
    std::fs::create_dir_all(&dir).unwrap();
    let r = call(s, "POST", "/agent/start", json!({ "working_dir": dir }));
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["id"].as_str().unwrap().to_string()
}

fn uuid(n: u64) -> String {
    format!("0196b3f2-7c1a-7d2e-9f00-{n:012x}")
}

fn send(s: &Server, sid: &str, n: u64, text: &str) -> String {
    let rid = uuid(n);
    let user = json!({ "id": format!("u-{n}"), "role": "user", "created": 1735725600,
        "content": [{ "type": "text", "text": text }], "metadata": { "userVisible": true, "agentVisible": true } });
    let r = call(s, "POST", &format!("/sessions/{sid}/reply"), json!({ "request_id": rid, "user_message": user }));
    assert_eq!(r.status, 200, "{}", r.text());
    rid
}

fn session(s: &Server, sid: &str) -> Value {
    let r = http("GET", &s.url(&format!("/sessions/{sid}")), Some(SECRET), None);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

/// `GET /sessions/{id}/events` as raw text, read until `until` holds or the deadline passes.
struct Events {
    conn: TcpStream,
    text: String,
}

impl Events {
    fn open(s: &Server, sid: &str) -> Events {
        let mut conn = TcpStream::connect(&s.addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        write!(conn, "GET /sessions/{sid}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Secret-Key: {SECRET}\r\n\r\n")
            .unwrap();
        Events { conn, text: String::new() }
    }

    /// The Error event request `rid` got, as shown live.
    fn error_of(&self, rid: &str) -> Value {
        self.text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .find(|v| v["type"] == "Error" && v["chat_request_id"] == rid)
            .unwrap_or_else(|| panic!("no Error event: {}", self.text))
    }

    fn until(&mut self, what: &str, f: impl Fn(&str) -> bool) {
        let end = Instant::now() + Duration::from_secs(30);
        let mut buf = [0u8; 8192];
        while !f(&self.text) {
            assert!(Instant::now() < end, "the event stream never showed {what}: {}", self.text);
            if let Ok(n) = self.conn.read(&mut buf) {
                assert!(n > 0, "the event stream ended before {what}: {}", self.text);
                self.text.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        }
    }
}

fn finished(rid: &str) -> impl Fn(&str) -> bool + '_ {
    move |t: &str| t.lines().any(|l| l.contains("\"Finish\"") && l.contains(rid))
}

#[test]
fn sessions_are_titled_by_the_model_after_the_first_exchange_and_a_name_set_by_hand_stays() {
    let Some(mock) = Llmock::start(&[]) else { return };
    let s = server(&mock, &[]);
    // The answer, then the title the model is asked for once the exchange is over.
    mock.script(json!([{ "type": "reply", "text": "Paris is lovely in May." },
        { "type": "reply", "text": "Title: \"Planning a Paris trip\"" }]));
    let sid = new_session(&s);
    let mut ev = Events::open(&s, &sid);
    let rid = send(&s, &sid, 1, "Help me plan a trip to Paris\nin May, for two.");
    ev.until("Finish", finished(&rid));
    let titled = wait_for(Duration::from_secs(30), || {
        let v = session(&s, &sid);
        (v["name"] == "Planning a Paris trip").then_some(v)
    });
    let v = titled.unwrap_or_else(|| panic!("no model title: {}", session(&s, &sid)));
    assert_eq!(v["user_set_name"], false);
    let listed = http("GET", &s.url("/sessions"), Some(SECRET), None).json();
    let row = listed["sessions"].as_array().unwrap().iter().find(|x| x["id"] == sid.as_str()).unwrap().clone();
    assert_eq!(row["name"], "Planning a Paris trip");

    // Renamed by the person: kept, and marked as theirs.
    let path = format!("/sessions/{sid}/name");
    assert_eq!(call(&s, "PUT", &path, json!({ "name": "  Our May trip " })).status, 200);
    let v = session(&s, &sid);
    assert_eq!((v["name"].as_str(), v["user_set_name"].as_bool()), (Some("Our May trip"), Some(true)));
    // Bad names say what to fix; an unknown session is 404; the key is required.
    let empty = call(&s, "PUT", &path, json!({ "name": "   " }));
    assert_eq!(empty.status, 400);
    assert!(empty.json()["message"].as_str().unwrap().contains("must not be empty"), "{}", empty.text());
    let long = call(&s, "PUT", &path, json!({ "name": "n".repeat(201) }));
    assert_eq!(long.status, 400);
    assert!(long.json()["message"].as_str().unwrap().contains("the most is 200"), "{}", long.text());
    assert_eq!(call(&s, "PUT", &path, json!({ "title": "x" })).status, 422, "a body without `name`, as goose answers");
    assert_eq!(call(&s, "PUT", "/sessions/20000101_999/name", json!({ "name": "x" })).status, 404);
    let anon = http("PUT", &s.url(&path), None, Some(json!({ "name": "x" }).to_string().as_bytes()));
    assert_eq!(anon.status, 401);
    assert_eq!(session(&s, &sid)["name"], "Our May trip");

    // A session named before its first message keeps that name: the first message does not
    // replace it, and the model is not asked for a title at all.
    let named = new_session(&s);
    assert_eq!(call(&s, "PUT", &format!("/sessions/{named}/name"), json!({ "name": "Mine" })).status, 200);
    mock.script(json!([{ "type": "reply", "text": "Sure." }, { "type": "reply", "text": "Model title" }]));
    let mut ev = Events::open(&s, &named);
    let rid = send(&s, &named, 2, "Rename me, if you dare");
    ev.until("Finish", finished(&rid));
    let url = format!("{}/_llmock/scenario", mock.openai_host());
    let pending = http("GET", &url, None, None).json();
    assert_eq!(pending["pending"][0]["text"], "Model title", "no title request for a named session: {pending}");
    // No title request comes later either: the next turn gets the scripted reply a title
    // request would have taken, and the name stays.
    let rid = send(&s, &named, 4, "And another thing");
    ev.until("the second Finish", finished(&rid));
    let v = session(&s, &named);
    assert!(v["conversation"].to_string().contains("Model title"), "the second turn's answer: {v}");
    assert_eq!(v["name"], "Mine");
}

#[test]
fn without_a_usable_model_title_the_first_message_names_the_session() {
    let Some(mock) = Llmock::start(&[]) else { return };
    let s = server(&mock, &[]);
    // The model's answer to the title request holds no title (just quotes): the first line of
    // the first message stays.
    mock.script(json!([{ "type": "reply", "text": "Done." }, { "type": "reply", "text": "\"\"" }]));
    let sid = new_session(&s);
    let mut ev = Events::open(&s, &sid);
    let rid = send(&s, &sid, 3, "\n  Summarise the release notes  \nof version 2");
    ev.until("Finish", finished(&rid));
    script_used(&mock);
    // The title thread says when it has read the model's answer and kept the name.
    let kept = wait_for(Duration::from_secs(30), || {
        s.stderr().contains("holds no usable title; the first message names the session").then_some(())
    });
    assert!(kept.is_some(), "the title thread never finished: {}", s.stderr());
    let v = session(&s, &sid);
    assert_eq!(v["name"], "Summarise the release notes");
    assert_eq!(v["user_set_name"], false);
}

#[test]
fn a_stopped_answer_is_saved_as_far_as_it_got_marked_stopped_in_order() {
    let Some(mock) = Llmock::start(&[]) else { return };
    let s = server(&mock, &[("GOSLING_SESSION_TITLES", "first_message")]);
    let long = (0..60).map(|i| format!("word{i}")).collect::<Vec<_>>().join(" ");
    mock.script(json!([{ "type": "reply", "text": long },
        { "type": "stream_fault", "kind": "stall", "after_chunks": 4, "stall_seconds": 30 }]));
    let sid = new_session(&s);
    let mut ev = Events::open(&s, &sid);
    let rid = send(&s, &sid, 4, "Tell me a long story");
    ev.until("some streamed text", |t| t.contains("word0"));
    let r = call(&s, "POST", &format!("/sessions/{sid}/cancel"), json!({ "request_id": rid }));
    assert_eq!(r.status, 200);
    ev.until("Finish", finished(&rid));
    assert!(ev.text.contains("\"goslingStopped\":true"), "watchers get the stopped mark: {}", ev.text);

    // Reloaded: the user's message, then the answer as far as it got, marked stopped.
    let conv = session(&s, &sid)["conversation"].as_array().unwrap().clone();
    assert_eq!(conv.len(), 2, "{conv:#?}");
    assert_eq!(conv[0]["role"], "user");
    assert_eq!(conv[1]["role"], "assistant");
    assert_eq!(conv[1]["metadata"]["goslingStopped"], true);
    let partial = conv[1]["content"][0]["text"].as_str().unwrap();
    assert!(!partial.is_empty() && long.starts_with(partial) && partial.len() < long.len(), "{partial:?}");

    // The next exchange follows it, in order; a turn that fails keeps its error as shown live.
    mock.script(json!([{ "type": "reply", "text": "A shorter one." }]));
    let rid = send(&s, &sid, 5, "A short one then");
    ev.until("the second Finish", finished(&rid));
    mock.script(json!([{ "type": "fail", "status": 400, "message": "model says no", "times": 1 }]));
    let rid = send(&s, &sid, 6, "And now fail");
    ev.until("the third Finish", finished(&rid));
    let live_error = ev.error_of(&rid);
    let conv = session(&s, &sid)["conversation"].as_array().unwrap().clone();
    let roles: Vec<_> = conv.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user", "assistant"], "{conv:#?}");
    assert_eq!(conv[3]["content"][0]["text"], "A shorter one.");
    assert!(conv[3]["metadata"].get("goslingStopped").is_none());
    assert_eq!(conv[5]["metadata"]["goslingError"], true);
    assert_eq!(conv[5]["metadata"]["agentVisible"], false, "the model never reads the error");
    assert_eq!(conv[5]["content"][0]["msg"], live_error["error"], "the saved error is the one shown live");
}

/// A message sent while no model is usable (here: no API key) is answered live with an error;
/// after a reload the conversation shows the same two things, in order, and the model will not
/// read the error.
#[test]
fn a_message_no_model_could_answer_keeps_its_error_after_a_reload() {
    let env = [("GOOSE_PROVIDER", "openai"), ("GOOSE_MODEL", "any")];
    let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let s = Server::start_with(ServerOpts { env, ..Default::default() });
    let sid = new_session(&s);
    let mut ev = Events::open(&s, &sid);
    let rid = send(&s, &sid, 8, "Is anyone there?");
    ev.until("Finish", finished(&rid));
    let live_error = ev.error_of(&rid);
    assert!(live_error["error"].as_str().unwrap().contains("OPENAI_API_KEY"), "{live_error}");
    let conv = session(&s, &sid)["conversation"].as_array().unwrap().clone();
    let roles: Vec<_> = conv.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant"], "{conv:#?}");
    assert_eq!(conv[0]["content"][0]["text"], "Is anyone there?");
    assert_eq!(conv[1]["metadata"]["goslingError"], true);
    assert_eq!(conv[1]["metadata"]["agentVisible"], false, "the model never reads the error");
    assert_eq!(conv[1]["content"][0]["msg"], live_error["error"], "the saved error is the one shown live");
}

#[test]
fn config_says_which_settings_are_in_force_and_which_the_environment_overrides() {
    let Some(mock) = Llmock::start(&[]) else { return };
    let s = server(&mock, &[]);
    // Stored values: GOOSE_MODEL is also in the environment (it wins), GOOSE_MODE is not.
    for (k, v) in [("GOOSE_MODEL", "stored-model"), ("GOOSE_MODE", "approve")] {
        assert_eq!(call(&s, "POST", "/config/upsert", json!({ "key": k, "value": v, "is_secret": false })).status, 200);
    }
    let c = http("GET", &s.url("/config"), Some(SECRET), None).json();
    let f = &c["in_force"];
    assert_eq!(f["values"]["GOOSE_MODEL"], "any", "{c}");
    assert_eq!(f["values"]["GOOSE_MODE"], "approve");
    assert_eq!(f["values"]["GOOSE_PROVIDER"], "openai");
    let env: Vec<&str> = f["from_environment"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(env.contains(&"GOOSE_MODEL") && env.contains(&"OPENAI_API_KEY") && !env.contains(&"GOOSE_MODE"), "{env:?}");
    assert_eq!(f["secrets_set"]["OPENAI_API_KEY"], true);
    assert!(!c.to_string().contains("sk-llmock"), "no secret value is shown: {c}");
    assert_eq!(c["config"]["GOOSE_MODEL"], "stored-model", "the stored value is still shown as stored");
}
