//! `llmock` (scripts/peers): a third-party fake LLM serving OpenAI at `/v1/chat/completions`
//! and Anthropic at `/anthropic/v1/messages`. With its default `--tool-mode auto` it calls an
//! offered tool, then answers in text once a tool result comes back.
//!
//! `Llmock::start(extra_args)` runs it on a free loopback port and waits until it answers;
//! the process group is killed on drop.

#![allow(dead_code)] // other test modules use their own subset

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::{agent, http, peers, wait_for};
use serde_json::{json, Value};

pub struct Llmock {
    pub port: u16,
    child: Child,
}

impl Llmock {
    /// None only under `GOSLING_SKIP_PEERS=1` (the caller skips); a missing install fails in
    /// `peers()`. Panics when llmock does not come up.
    pub fn start(args: &[&str]) -> Option<Llmock> {
        let Some(peers) = peers() else {
            crate::support::say_skipped("needs llmock from the test peers");
            return None;
        };
        let bin = peers.get("LLMOCK").to_string();
        // A free port: bind :0, read it, release it. Races are unlikely on loopback and show
        // as a clear start failure below.
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free loopback port").port();
        let mut cmd = Command::new(&bin);
        cmd.args(["serve", "--host", "127.0.0.1", "-p", &port.to_string(), "--log-level", "warning"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = gosling::sys::spawn_tied(cmd).unwrap_or_else(|e| panic!("cannot start llmock ({bin}): {e}"));
        let mock = Llmock { port, child };
        let url = format!("http://127.0.0.1:{port}/");
        let up = wait_for(Duration::from_secs(60), || agent().get(&url).call().ok().map(|_| ()));
        assert!(up.is_some(), "llmock did not answer on port {port} within 60 s");
        Some(mock)
    }

    /// Base URL for OpenAI-compatible settings (OPENAI_HOST).
    pub fn openai_host(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Queues behaviours for the next requests (`POST /_llmock/scenario`), e.g.
    /// `[{"type": "reply", "text": "…"}]`.
    pub fn script(&self, behaviors: Value) {
        let url = format!("{}/_llmock/scenario", self.openai_host());
        let r = http("POST", &url, None, Some(json!({ "behaviors": behaviors }).to_string().as_bytes()));
        assert_eq!(r.status, 201, "llmock takes the scenario: {}", r.text());
    }

    /// How many model requests llmock has received (`GET /_llmock/requests`).
    pub fn request_count(&self) -> u64 {
        let r = http("GET", &format!("{}/_llmock/requests", self.openai_host()), None, None).json();
        r["count"].as_u64().unwrap_or_else(|| panic!("llmock's request log has no count: {r}"))
    }

    /// Base URL for Anthropic settings (ANTHROPIC_HOST); the path v1/messages follows.
    pub fn anthropic_host(&self) -> String {
        format!("http://127.0.0.1:{}/anthropic", self.port)
    }
}

impl Drop for Llmock {
    fn drop(&mut self) {
        let _ = gosling::sys::kill_group(self.child.id());
        let _ = self.child.wait();
    }
}
