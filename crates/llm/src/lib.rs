//! LLM providers: one streamed chat completion at a time, over blocking ureq and our own SSE
//! decoder (`wire::sse`).
//!
//! Owns the neutral conversation types (`ChatRequest`, `Completion`), provider settings
//! (`Settings::resolve`: environment first, then the config store, with goose's variable
//! names), and the two wire formats: OpenAI-compatible chat completions (`openai.rs`: OpenAI,
//! Ollama, llama.cpp, vLLM, LM Studio) and Anthropic Messages (`anthropic.rs`). Retries of 429
//! and 5xx live in `retry.rs`.
//!
//! Does not know about goose messages, sessions, HTTP routes or tools' execution: the turn loop
//! (agent/) converts to and from these types. Never logs the API key, request bodies or
//! response text above `trace`, and never the key at all.
#![deny(unsafe_code)]

use std::cell::Cell;
use std::fmt;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gosling_config::Env;
use gosling_wire::sse;

pub mod anthropic;
pub mod catalog;
pub mod openai;
mod retry;

// ---------------------------------------------------------------------------------------------
// Neutral types

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    Text(String),
    /// A tool call the assistant made earlier in the conversation.
    ToolCall {
        id: String,
        name: String,
        arguments: serde_json::Value,
    },
    /// The result of a tool call, sent back in a user message. `content` holds MCP content
    /// blocks (`{"type":"text","text":…}`, `{"type":"image","data":…,"mimeType":…}`, …).
    ToolResult {
        id: String,
        content: Vec<serde_json::Value>,
        is_error: bool,
    },
    /// An image the person sent (base64 `data`), in a user message; sent only to providers
    /// that take images (`catalog::Provider::images`).
    Image {
        mime_type: String,
        data: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub role: Role,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema object (MCP's `inputSchema`).
    pub input_schema: serde_json::Value,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChatRequest {
    pub system: String,
    pub messages: Vec<ChatMessage>,
    /// Empty: no tools are offered.
    pub tools: Vec<ToolSpec>,
    /// A cap on the answer's tokens from the caller (an extension's sampling request):
    /// OpenAI-style providers get `max_tokens`; Anthropic's required one is lowered to it.
    pub max_tokens: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallOut {
    pub id: String,
    pub name: String,
    /// `Err` holds the raw text the model produced when it was not valid JSON, so the loop can
    /// send it back to the model as a tool error. Empty arguments become `Ok({})`.
    pub arguments: Result<serde_json::Value, BadArguments>,
}

/// Tool-call arguments the model wrote that are not JSON: the raw text, to show the model.
/// Part of what the model said, not an error of this layer (that is `Error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadArguments {
    pub raw: String,
}

impl std::fmt::Display for BadArguments {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the arguments are not valid JSON: {}", self.raw)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Completion {
    /// All streamed text, concatenated.
    pub text: String,
    /// In the order the model started them.
    pub tool_calls: Vec<ToolCallOut>,
    /// None when the server sent no usage.
    pub usage: Option<Usage>,
    /// The provider's own words: OpenAI `stop`/`tool_calls`/`length`, Anthropic
    /// `end_turn`/`tool_use`/`max_tokens`.
    pub stop_reason: Option<String>,
}

/// A piece of the completion, handed to the caller as soon as it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta<'a> {
    Text(&'a str),
}

pub trait Provider: Send + Sync {
    /// "openai", "ollama" or "anthropic" (the canonical name, after aliases).
    fn name(&self) -> &str;
    /// Streams one completion. `on_delta` returns false to abort (the client went away): the
    /// HTTP stream is dropped and `Error::Cancelled` returned. Text already passed to `on_delta`
    /// stays delivered even when an error follows.
    fn complete(&self, req: &ChatRequest, on_delta: &mut dyn FnMut(Delta) -> bool) -> Result<Completion, Error> {
        self.complete_cancellable(req, on_delta, &|| false)
    }

    /// As `complete`, and `cancelled` is polled about every 100 ms while the provider is silent
    /// (waiting for the headers, between chunks, during a retry's wait): when it returns true
    /// the call returns `Error::Cancelled` at once. Use it to stop within a second of a client
    /// hanging up even when the model sends nothing for a while.
    fn complete_cancellable(
        &self,
        req: &ChatRequest,
        on_delta: &mut dyn FnMut(Delta) -> bool,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Completion, Error>;
}

// ---------------------------------------------------------------------------------------------
// Errors

#[derive(Debug)]
pub enum Error {
    /// No provider, no model, or a hosted provider without its key. The message names the
    /// variables to set (environment or config store).
    NotConfigured(String),
    /// The provider answered an HTTP error (after retries for 429/5xx). `message` is already
    /// actionable: it says which variable to check.
    Http { status: u16, message: String },
    /// The prompt does not fit the model's context window (a 400 saying so). Shorten the
    /// conversation or pick a model with a larger context.
    ContextTooLong { message: String },
    /// Connection refused, DNS failure, TLS failure: the host is wrong or the server is down.
    Unreachable { host: String, detail: String },
    /// No response headers within the connect/response timeout.
    Timeout { host: String, after: Duration },
    /// The response stream sent no byte for `after` (GOSLING_LLM_STALL_SECS).
    Stalled { after: Duration },
    /// The stream broke the wire format: malformed JSON in a chunk, an answer that is not a
    /// stream.
    Protocol(String),
    /// The stream ended before the answer was complete, after `after_bytes` bytes: closed early
    /// (`source` `None`) or broken by a read error (`source`). Retried when nothing reached the
    /// caller yet (`retry_cut_streams`).
    StreamCut { after_bytes: usize, source: Option<Box<ureq::Error>> },
    /// The provider reported an error inside the stream (an `error` event or chunk).
    Remote(String),
    /// The response exceeded `Settings::max_response_bytes`.
    TooLarge { limit: usize },
    /// `on_delta` returned false.
    Cancelled,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotConfigured(m) => write!(f, "llm: {m}"),
            Error::Http { status: _, message } => write!(f, "llm: {message}"),
            Error::ContextTooLong { message } => {
                write!(f, "llm: the conversation is too long for the model's context window ({message}); start a new session or choose a model with a larger context")
            }
            Error::Unreachable { host, detail } => {
                write!(f, "llm: cannot reach {host}: {detail}; check that the server runs and the host setting (OPENAI_HOST, OLLAMA_HOST or ANTHROPIC_HOST) is right")
            }
            Error::Timeout { host, after } => write!(
                f,
                "llm: {host} sent no response within {after:?}; check the server or raise GOSLING_LLM_STALL_SECS"
            ),
            Error::Stalled { after } => {
                write!(f, "llm: the model's stream stalled (no data for {after:?}); retry, or raise GOSLING_LLM_STALL_SECS for slow local models")
            }
            Error::Protocol(m) => write!(f, "llm: {m}"),
            Error::StreamCut { after_bytes, source: None } => write!(
                f,
                "llm: stream ended before completion (after {after_bytes} bytes); the server closed the connection early, retry"
            ),
            Error::StreamCut { after_bytes, source: Some(e) } => {
                write!(f, "llm: stream ended before completion (after {after_bytes} bytes): {e}; retry")
            }
            Error::Remote(m) => write!(f, "llm: the provider reported an error mid-stream: {m}"),
            Error::TooLarge { limit } => {
                write!(f, "llm: the response exceeded {limit} bytes; raise GOSLING_LLM_MAX_RESPONSE_BYTES")
            }
            Error::Cancelled => write!(f, "llm: cancelled: the client went away"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::StreamCut { source: Some(e), .. } => Some(&**e),
            _ => None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Settings

/// Everything a provider needs. Built by `resolve` (or by hand in tests).
#[derive(Clone)]
pub struct Settings {
    /// Canonical: "openai", "ollama" or "anthropic".
    pub provider: String,
    pub model: String,
    /// Scheme, host, port and optional path prefix, e.g. `https://api.openai.com`.
    pub host: String,
    /// Appended to `host` with one `/` between, e.g. `v1/chat/completions`.
    pub base_path: String,
    /// Never logged; `Debug` prints only whether it is set.
    pub api_key: Option<String>,
    /// TCP connect limit.
    pub connect_timeout: Duration,
    /// Longest silence on the connection, before the headers or between stream bytes.
    pub stall_timeout: Duration,
    /// Requests per completion when the provider answers 429 or 5xx (1 = no retry).
    pub max_attempts: u32,
    /// Longest total time spent sleeping between attempts; a Retry-After beyond it ends retrying.
    pub max_retry_wait: Duration,
    /// Anthropic's required `max_tokens` (OpenAI: not sent).
    pub max_tokens: u32,
    /// Bound on the bytes read from one response.
    pub max_response_bytes: usize,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("host", &self.host)
            .field("base_path", &self.base_path)
            .field("api_key", &if self.api_key.is_some() { "<set>" } else { "<unset>" })
            .field("connect_timeout", &self.connect_timeout)
            .field("stall_timeout", &self.stall_timeout)
            .field("max_attempts", &self.max_attempts)
            .field("max_retry_wait", &self.max_retry_wait)
            .field("max_tokens", &self.max_tokens)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

pub const OPENAI_DEFAULT_HOST: &str = "https://api.openai.com";
pub const OPENAI_DEFAULT_PATH: &str = "v1/chat/completions";
pub const OLLAMA_DEFAULT_HOST: &str = "http://localhost:11434";
pub const ANTHROPIC_DEFAULT_HOST: &str = "https://api.anthropic.com";
pub const ANTHROPIC_PATH: &str = "v1/messages";

const HOW_TO_CONFIGURE: &str = "set GOOSE_PROVIDER (openai, ollama or anthropic) and GOOSE_MODEL, plus OPENAI_HOST/OPENAI_API_KEY for OpenAI-compatible servers, OLLAMA_HOST for Ollama, or ANTHROPIC_API_KEY for Anthropic (in the environment or the config store)";

/// The provider names we accept, mapped to the canonical one.
pub fn canonical_provider(name: &str) -> Option<&'static str> {
    match name.trim().to_ascii_lowercase().as_str() {
        "openai" | "openai_compatible" | "openai-compatible" | "llamacpp" | "llama.cpp" | "vllm" | "lmstudio"
        | "lm_studio" => Some("openai"),
        "ollama" => Some("ollama"),
        "anthropic" | "claude" => Some("anthropic"),
        _ => None,
    }
}

impl Settings {
    /// Settings from the environment first, then the config store (`stored` looks a key up in
    /// the plain config, then the secrets). `overrides` (provider, model) win over both; they
    /// come from a session's `update_provider`.
    pub fn resolve(
        env: &dyn Env,
        stored: &dyn Fn(&str) -> Option<String>,
        overrides: (Option<&str>, Option<&str>),
    ) -> Result<Settings, Error> {
        let get = |k: &str| env.get(k).or_else(|| stored(k)).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let chosen = |over: Option<&str>, key: &str| {
            over.filter(|s| !s.trim().is_empty()).map(str::to_string).or_else(|| get(key))
        };
        let provider_raw = chosen(overrides.0, "GOOSE_PROVIDER")
            .ok_or_else(|| Error::NotConfigured(format!("no LLM provider is configured; {HOW_TO_CONFIGURE}")))?;
        let provider = canonical_provider(&provider_raw).ok_or_else(|| {
            Error::NotConfigured(format!("GOOSE_PROVIDER={provider_raw:?} is not supported; use openai (any OpenAI-compatible server), ollama or anthropic"))
        })?;
        let model = chosen(overrides.1, "GOOSE_MODEL").ok_or_else(|| {
            Error::NotConfigured(format!("GOOSE_PROVIDER is {provider} but no model is set; set GOOSE_MODEL"))
        })?;
        let num = |k: &str, default: u64| -> Result<u64, Error> {
            get(k).map_or(Ok(default), |v| {
                v.parse().map_err(|_| Error::NotConfigured(format!("{k}={v:?} is not a whole number")))
            })
        };
        let (host, base_path, api_key) = match provider {
            "openai" => {
                let host = get("OPENAI_HOST").unwrap_or_else(|| OPENAI_DEFAULT_HOST.to_string());
                let key = get("OPENAI_API_KEY");
                if key.is_none() && host.trim_end_matches('/') == OPENAI_DEFAULT_HOST {
                    return Err(Error::NotConfigured(
                        "GOOSE_PROVIDER is openai with the default host api.openai.com but OPENAI_API_KEY is not set; set OPENAI_API_KEY, or OPENAI_HOST for a local OpenAI-compatible server".into(),
                    ));
                }
                (host, get("OPENAI_BASE_PATH").unwrap_or_else(|| OPENAI_DEFAULT_PATH.to_string()), key)
            }
            "ollama" => (ollama_host(get("OLLAMA_HOST").as_deref()), OPENAI_DEFAULT_PATH.to_string(), None),
            _ => {
                let host = get("ANTHROPIC_HOST").unwrap_or_else(|| ANTHROPIC_DEFAULT_HOST.to_string());
                let key = get("ANTHROPIC_API_KEY");
                if key.is_none() && host.trim_end_matches('/') == ANTHROPIC_DEFAULT_HOST {
                    return Err(Error::NotConfigured(
                        "GOOSE_PROVIDER is anthropic but ANTHROPIC_API_KEY is not set; set ANTHROPIC_API_KEY".into(),
                    ));
                }
                (host, ANTHROPIC_PATH.to_string(), key)
            }
        };
        if !(host.starts_with("http://") || host.starts_with("https://")) {
            return Err(Error::NotConfigured(format!(
                "the {provider} host {host:?} must start with http:// or https://"
            )));
        }
        Ok(Settings {
            provider: provider.to_string(),
            model,
            host,
            base_path,
            api_key,
            connect_timeout: Duration::from_secs(num("GOSLING_LLM_CONNECT_SECS", 10)?),
            stall_timeout: Duration::from_secs(num("GOSLING_LLM_STALL_SECS", 60)?.max(1)),
            max_attempts: num("GOSLING_LLM_MAX_ATTEMPTS", 3)?.clamp(1, 10) as u32,
            max_retry_wait: Duration::from_secs(num("GOSLING_LLM_MAX_RETRY_WAIT_SECS", 30)?),
            max_tokens: num("GOSLING_LLM_MAX_TOKENS", 4096)?.clamp(1, u32::MAX as u64) as u32,
            max_response_bytes: num("GOSLING_LLM_MAX_RESPONSE_BYTES", 64 << 20)? as usize,
        })
    }

    /// Settings with the defaults `resolve` uses, nothing read from anywhere (tests, tools).
    pub fn new(provider: &str, model: &str, host: &str) -> Settings {
        let provider = canonical_provider(provider).unwrap_or("openai");
        Settings {
            provider: provider.to_string(),
            model: model.to_string(),
            host: host.to_string(),
            base_path: if provider == "anthropic" { ANTHROPIC_PATH } else { OPENAI_DEFAULT_PATH }.to_string(),
            api_key: None,
            connect_timeout: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(60),
            max_attempts: 3,
            max_retry_wait: Duration::from_secs(30),
            max_tokens: 4096,
            max_response_bytes: 64 << 20,
        }
    }

    /// `host` + `/` + `base_path`.
    pub fn url(&self) -> String {
        let (host, path) = (self.host.trim_end_matches('/'), self.base_path.trim_start_matches('/'));
        if path.is_empty() {
            host.to_string()
        } else {
            format!("{host}/{path}")
        }
    }

    /// The variable that holds this provider's key, for messages.
    pub fn key_var(&self) -> &'static str {
        match self.provider.as_str() {
            "anthropic" => "ANTHROPIC_API_KEY",
            "ollama" => "OLLAMA_HOST",
            _ => "OPENAI_API_KEY",
        }
    }

    /// The variable that holds this provider's host, for messages.
    pub fn host_var(&self) -> &'static str {
        match self.provider.as_str() {
            "anthropic" => "ANTHROPIC_HOST",
            "ollama" => "OLLAMA_HOST",
            _ => "OPENAI_HOST/OPENAI_BASE_PATH",
        }
    }
}

/// goose accepts OLLAMA_HOST as `host`, `host:port` or a URL; the port defaults to 11434.
fn ollama_host(v: Option<&str>) -> String {
    let Some(v) = v else { return OLLAMA_DEFAULT_HOST.to_string() };
    let v = v.trim().trim_end_matches('/');
    let (scheme, rest) = v.split_once("://").unwrap_or(("http", v));
    let authority = rest.split('/').next().unwrap_or("");
    let has_port = match authority.rsplit_once(':') {
        Some((h, p)) => !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && !h.ends_with(':'),
        None => false,
    } && !authority.ends_with(']');
    if has_port || scheme == "https" {
        format!("{scheme}://{rest}")
    } else {
        let path = &rest[authority.len()..];
        format!("{scheme}://{authority}:11434{path}")
    }
}

/// The provider for these settings.
pub fn from_settings(s: &Settings) -> Result<Box<dyn Provider>, Error> {
    let format = match canonical_provider(&s.provider) {
        Some("anthropic") => Format::Anthropic,
        Some(_) => Format::OpenAi,
        None => {
            return Err(Error::NotConfigured(format!(
                "provider {:?} is not supported; use openai, ollama or anthropic",
                s.provider
            )))
        }
    };
    Ok(Box::new(Chat { settings: s.clone(), agent: agent_for(s), format }))
}

/// The two wire formats: OpenAI-compatible chat completions and Anthropic Messages.
#[derive(Clone, Copy)]
enum Format {
    OpenAi,
    Anthropic,
}

/// A provider: its settings, its connection pool and its wire format.
struct Chat {
    settings: Settings,
    agent: ureq::Agent,
    format: Format,
}

impl Provider for Chat {
    fn name(&self) -> &str {
        &self.settings.provider
    }

    fn complete_cancellable(
        &self,
        req: &ChatRequest,
        on_delta: &mut dyn FnMut(Delta) -> bool,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Completion, Error> {
        let s = &self.settings;
        let (body, headers) = match self.format {
            Format::OpenAi => (openai::request_body(&s.model, req), openai::headers(s)),
            Format::Anthropic => (anthropic::request_body(&s.model, s.max_tokens, req), anthropic::headers(s)),
        };
        let body = serde_json::to_vec(&body).map_err(|e| Error::Protocol(format!("cannot encode the request: {e}")))?;
        let call = Call { agent: &self.agent, settings: s, headers: &headers, body: &body, cancelled };
        retry_cut_streams(s, cancelled, |delivered| {
            let mut sink = Sink { on_delta: &mut *on_delta, delivered };
            match self.format {
                Format::OpenAi => openai::attempt(&call, &mut sink),
                Format::Anthropic => anthropic::attempt(&call, &mut sink),
            }
        })
    }
}

/// One request of a completion, as a wire format's `attempt` sends it.
pub(crate) struct Call<'a> {
    agent: &'a ureq::Agent,
    pub settings: &'a Settings,
    headers: &'a [(&'static str, String)],
    body: &'a [u8],
    cancelled: &'a dyn Fn() -> bool,
}

impl Call<'_> {
    /// Sends the request and hands each event of the answer to `handle` (see `exchange`).
    pub fn exchange(
        &self,
        handle: &mut dyn FnMut(&sse::Event) -> Result<Flow, Error>,
        complete_without_marker: &dyn Fn() -> bool,
    ) -> Result<(), Error> {
        let headers = self.headers.to_vec();
        exchange(
            self.agent,
            self.settings,
            headers,
            self.body.to_vec(),
            self.cancelled,
            handle,
            complete_without_marker,
        )
    }
}

/// Where an attempt's text goes: the caller's `on_delta`, and whether any reached it.
pub(crate) struct Sink<'a> {
    on_delta: &'a mut dyn FnMut(Delta) -> bool,
    /// Set once text reached `on_delta`: a cut after that is not retried.
    delivered: &'a Cell<bool>,
}

impl Sink<'_> {
    /// Appends streamed text to the completion and hands it to the caller; `Cancelled` when
    /// the caller stopped listening. Empty text is skipped.
    pub fn text(&mut self, out: &mut Completion, t: &str) -> Result<(), Error> {
        if t.is_empty() {
            return Ok(());
        }
        out.text.push_str(t);
        self.delivered.set(true);
        if (self.on_delta)(Delta::Text(t)) {
            Ok(())
        } else {
            Err(Error::Cancelled)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Shared streaming machinery

/// A blocking agent for one provider: per-read timeout = stall timeout (covers waiting for the
/// headers and silences inside the stream), HTTP errors returned as responses.
pub(crate) fn agent_for(s: &Settings) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(s.connect_timeout))
        .timeout_per_read(Some(s.stall_timeout))
        // Only the stall timeout bounds a healthy stream; a cap of hours stops a trickle.
        .timeout_global(Some(Duration::from_secs(6 * 3600)))
        .max_redirects(0)
        .build()
        .new_agent()
}

/// What a wire format's event handler tells `exchange`.
pub(crate) enum Flow {
    Continue,
    /// The stream's own end marker was seen (`[DONE]`, `message_stop`).
    Done,
}

/// Largest SSE line accepted (a single chunk of JSON).
const MAX_LINE: usize = 4 << 20;

/// How often the caller's `cancelled` is polled while the stream is silent.
const POLL: Duration = Duration::from_millis(100);

/// What the fetch thread hands to the caller's thread.
enum Msg {
    Bytes(Vec<u8>),
    End,
    Failed(Error),
}

/// Sets the flag when the caller's side stops listening, however it returns.
struct Abandon(Arc<AtomicBool>);

impl Drop for Abandon {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// One streamed exchange: POSTs `body` (with retries) and reads the answer on a fetch thread,
/// while this thread decodes SSE, hands each event to `handle` until it says `Done`, and polls
/// `cancelled` whenever the stream is silent. On return the fetch thread is told to stop; it
/// drops the connection at its next read (within the stall timeout at worst).
/// `complete_without_marker` is asked at EOF: true when what arrived is a whole answer even
/// without the end marker (some servers omit it).
fn exchange(
    agent: &ureq::Agent,
    s: &Settings,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    cancelled: &dyn Fn() -> bool,
    handle: &mut dyn FnMut(&sse::Event) -> Result<Flow, Error>,
    complete_without_marker: &dyn Fn() -> bool,
) -> Result<(), Error> {
    let (tx, rx) = crossbeam_channel::bounded::<Msg>(64);
    let abandoned = Arc::new(AtomicBool::new(false));
    let _abandon = Abandon(abandoned.clone());
    {
        let (agent, s, abandoned) = (agent.clone(), s.clone(), abandoned.clone());
        std::thread::Builder::new()
            .name("llm-fetch".into())
            .spawn(move || fetch(&agent, &s, &headers, &body, &abandoned, &tx))
            .map_err(|e| Error::Protocol(format!("cannot start the stream reader thread: {e}")))?;
    }
    let mut dec = sse::Decoder::new(MAX_LINE);
    let mut total = 0usize;
    loop {
        if cancelled() {
            return Err(Error::Cancelled);
        }
        let bytes = match rx.recv_timeout(POLL) {
            Ok(Msg::Bytes(b)) => b,
            Ok(Msg::Failed(e)) => return Err(e),
            Ok(Msg::End) => break,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                return Err(Error::Protocol("the stream reader thread stopped unexpectedly".into()))
            }
        };
        total += bytes.len();
        log::trace!(target: "llm::wire", "{} bytes", bytes.len());
        let events = dec.feed(&bytes).map_err(|e| Error::Protocol(format!("{e} in the {} stream", s.provider)))?;
        for ev in &events {
            if let Flow::Done = handle(ev)? {
                return Ok(());
            }
        }
    }
    // A final event without its blank line still counts, unless it was cut mid-JSON.
    let tail = dec.feed(b"\n\n").map_err(|e| Error::Protocol(e.to_string()))?;
    for ev in tail
        .iter()
        .filter(|ev| ev.data.trim() == "[DONE]" || serde_json::from_str::<serde_json::Value>(&ev.data).is_ok())
    {
        if let Flow::Done = handle(ev)? {
            return Ok(());
        }
    }
    if complete_without_marker() {
        return Ok(());
    }
    Err(Error::StreamCut { after_bytes: total, source: None })
}

/// Runs `attempt` again (up to `max_attempts` in all) when the stream was cut before any text
/// reached the caller — a tool-call-only answer or a cut before the first token — so nothing
/// the caller saw is repeated. A cut after text was delivered is returned as it is.
fn retry_cut_streams(
    s: &Settings,
    cancelled: &dyn Fn() -> bool,
    mut attempt: impl FnMut(&Cell<bool>) -> Result<Completion, Error>,
) -> Result<Completion, Error> {
    let mut n = 1;
    loop {
        let delivered = Cell::new(false);
        match attempt(&delivered) {
            Err(e @ Error::StreamCut { .. }) if !delivered.get() && n < s.max_attempts && !cancelled() => {
                log::warn!(
                    "llm: the {} stream was cut before any text ({e}); retrying (attempt {n} of {})",
                    s.provider,
                    s.max_attempts
                );
                std::thread::sleep(Duration::from_millis(250 * n as u64));
                n += 1;
            }
            r => return r,
        }
    }
}

/// The fetch thread: request, then raw body bytes into `tx` until EOF, an error, or the
/// caller's side going away (the body is then dropped, which closes the connection).
fn fetch(
    agent: &ureq::Agent,
    s: &Settings,
    headers: &[(&'static str, String)],
    body: &[u8],
    abandoned: &AtomicBool,
    tx: &crossbeam_channel::Sender<Msg>,
) {
    let resp = match retry::send(agent, s, headers, body, abandoned) {
        Ok(b) => b,
        Err(e) => {
            let _ = tx.send(Msg::Failed(e));
            return;
        }
    };
    let mut reader = resp.into_with_config().limit(s.max_response_bytes as u64).reader();
    let mut total = 0usize;
    loop {
        if abandoned.load(Ordering::SeqCst) {
            return;
        }
        let mut buf = vec![0u8; 16 * 1024];
        let msg = match reader.read(&mut buf) {
            Ok(0) => Msg::End,
            Ok(n) => {
                total += n;
                buf.truncate(n);
                Msg::Bytes(buf)
            }
            Err(e) => Msg::Failed(read_error(e, s, total)),
        };
        let last = !matches!(msg, Msg::Bytes(_));
        if tx.send(msg).is_err() || last {
            return;
        }
    }
}

fn read_error(e: std::io::Error, s: &Settings, total: usize) -> Error {
    match ureq::Error::from(e) {
        ureq::Error::Timeout(_) => Error::Stalled { after: s.stall_timeout },
        ureq::Error::BodyExceedsLimit(_) => Error::TooLarge { limit: s.max_response_bytes },
        ureq::Error::Io(io)
            if io.kind() == std::io::ErrorKind::TimedOut || io.kind() == std::io::ErrorKind::WouldBlock =>
        {
            Error::Stalled { after: s.stall_timeout }
        }
        other => Error::StreamCut { after_bytes: total, source: Some(Box::new(other)) },
    }
}

/// Parses one chunk's JSON, naming the chunk (shortened) when it is malformed.
pub(crate) fn parse_chunk(provider: &str, data: &str) -> Result<serde_json::Value, Error> {
    serde_json::from_str(data).map_err(|e| {
        Error::Protocol(format!("malformed JSON in a chunk of the {provider} stream ({e}): {}", clip(data, 200)))
    })
}

/// At most `max` bytes of `s`, on a char boundary, with `…` when cut.
pub fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Tool-call arguments as the model wrote them: empty → `{}`, invalid JSON → `Err(raw)`.
pub(crate) fn parse_arguments(raw: &str) -> Result<serde_json::Value, BadArguments> {
    if raw.trim().is_empty() {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    serde_json::from_str(raw).map_err(|_| BadArguments { raw: raw.to_string() })
}

/// The text of MCP content blocks for wire formats that take only text: text blocks as they
/// are, embedded text resources by their text, anything else as compact JSON.
pub(crate) fn content_as_text(content: &[serde_json::Value]) -> String {
    let mut out = Vec::new();
    for c in content {
        match c.get("type").and_then(|t| t.as_str()) {
            Some("text") => out.push(c.get("text").and_then(|t| t.as_str()).unwrap_or("").to_string()),
            Some("resource") if c.pointer("/resource/text").is_some() => {
                out.push(c.pointer("/resource/text").and_then(|t| t.as_str()).unwrap_or("").to_string())
            }
            Some("image") => out.push(format!("[image {}]", c.get("mimeType").and_then(|t| t.as_str()).unwrap_or(""))),
            _ => out.push(c.to_string()),
        }
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// An environment read from a map instead of the process's.
    struct MapEnv(HashMap<&'static str, &'static str>);

    impl gosling_config::Env for MapEnv {
        fn get(&self, key: &str) -> Option<String> {
            self.0.get(key).map(|s| s.to_string())
        }
    }
    /// The person's image goes to OpenAI as an `image_url` data URL after the text, to
    /// Anthropic as a base64 image block.
    #[test]
    fn a_persons_image_is_sent_in_each_providers_form() {
        let req = ChatRequest {
            system: String::new(),
            messages: vec![ChatMessage {
                role: Role::User,
                parts: vec![
                    Part::Text("what is this?".into()),
                    Part::Image { mime_type: "image/png".into(), data: "iVBORw0=".into() },
                ],
            }],
            tools: Vec::new(),
            max_tokens: None,
        };
        let o = openai::request_body("m", &req);
        assert_eq!(
            o["messages"][0],
            serde_json::json!({"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0="}}]})
        );
        let a = anthropic::request_body("m", 100, &req);
        assert_eq!(
            a["messages"][0]["content"][1],
            serde_json::json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0="}})
        );
    }

    /// The retry of a cut stream is decided on the variant: a `StreamCut` before any text is
    /// tried again, one after text is not, and no other error is, whatever its words.
    #[test]
    fn only_a_stream_cut_before_any_text_is_retried() {
        let mut s = Settings::new("openai", "m", "http://h:1");
        s.max_attempts = 3;
        let cut = || Error::StreamCut { after_bytes: 10, source: None };
        let mut tries = 0;
        let r = retry_cut_streams(&s, &|| false, |_| {
            tries += 1;
            if tries < 3 {
                Err(cut())
            } else {
                Ok(Completion::default())
            }
        });
        assert!(r.is_ok() && tries == 3, "{r:?} after {tries}");
        tries = 0;
        let r = retry_cut_streams(&s, &|| false, |delivered| {
            tries += 1;
            delivered.set(true);
            Err(cut())
        });
        assert!(matches!(r, Err(Error::StreamCut { .. })) && tries == 1, "text was delivered: not retried");
        tries = 0;
        let r = retry_cut_streams(&s, &|| false, |_| {
            tries += 1;
            Err(Error::Protocol("stream ended before completion, in words only".into()))
        });
        assert!(matches!(r, Err(Error::Protocol(_))) && tries == 1, "words decide nothing");
        let e = Error::StreamCut { after_bytes: 3, source: Some(Box::new(ureq::Error::ConnectionFailed)) };
        assert!(std::error::Error::source(&e).is_some(), "the read error is the source");
        assert!(e.to_string().starts_with("llm: stream ended before completion (after 3 bytes): "), "{e}");
    }

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn nothing_configured_names_the_settings() {
        let e = Settings::resolve(&MapEnv(HashMap::new()), &none, (None, None)).unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, Error::NotConfigured(_)));
        for k in ["GOOSE_PROVIDER", "GOOSE_MODEL", "OPENAI_HOST", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_HOST"]
        {
            assert!(m.contains(k), "{m} should name {k}");
        }
        assert!(m.starts_with("llm: "));
    }

    #[test]
    fn env_wins_over_store_and_overrides_win_over_both() {
        let env = MapEnv(HashMap::from([("GOOSE_PROVIDER", "openai"), ("OPENAI_HOST", "http://127.0.0.1:9/")]));
        let store = |k: &str| match k {
            "GOOSE_PROVIDER" => Some("anthropic".to_string()),
            "GOOSE_MODEL" => Some("m-from-store".to_string()),
            "OPENAI_API_KEY" => Some("sk-secret-value".to_string()),
            _ => None,
        };
        let s = Settings::resolve(&env, &store, (None, None)).unwrap();
        assert_eq!((s.provider.as_str(), s.model.as_str()), ("openai", "m-from-store"));
        assert_eq!(s.url(), "http://127.0.0.1:9/v1/chat/completions");
        assert_eq!(s.api_key.as_deref(), Some("sk-secret-value"));
        assert!(!format!("{s:?}").contains("sk-secret"), "Debug must not print the key");
        let s = Settings::resolve(&env, &store, (Some("ollama"), Some("llama3.2"))).unwrap();
        assert_eq!(
            (s.provider.as_str(), s.model.as_str(), s.url().as_str()),
            ("ollama", "llama3.2", "http://localhost:11434/v1/chat/completions")
        );
    }

    #[test]
    fn hosted_providers_need_their_key_local_ones_do_not() {
        let env = MapEnv(HashMap::from([("GOOSE_PROVIDER", "openai"), ("GOOSE_MODEL", "gpt-4o")]));
        assert!(Settings::resolve(&env, &none, (None, None)).unwrap_err().to_string().contains("OPENAI_API_KEY"));
        let env = MapEnv(HashMap::from([("GOOSE_PROVIDER", "anthropic"), ("GOOSE_MODEL", "c")]));
        assert!(Settings::resolve(&env, &none, (None, None)).unwrap_err().to_string().contains("ANTHROPIC_API_KEY"));
        let env = MapEnv(HashMap::from([
            ("GOOSE_PROVIDER", "anthropic"),
            ("GOOSE_MODEL", "c"),
            ("ANTHROPIC_HOST", "http://127.0.0.1:1/anthropic"),
        ]));
        assert_eq!(
            Settings::resolve(&env, &none, (None, None)).unwrap().url(),
            "http://127.0.0.1:1/anthropic/v1/messages"
        );
        let env = MapEnv(HashMap::from([("GOOSE_PROVIDER", "nope"), ("GOOSE_MODEL", "c")]));
        assert!(Settings::resolve(&env, &none, (None, None)).unwrap_err().to_string().contains("nope"));
        let env = MapEnv(HashMap::from([("GOOSE_PROVIDER", "ollama")]));
        assert!(Settings::resolve(&env, &none, (None, None)).unwrap_err().to_string().contains("GOOSE_MODEL"));
    }

    #[test]
    fn ollama_host_forms() {
        assert_eq!(ollama_host(None), "http://localhost:11434");
        assert_eq!(ollama_host(Some("gpu-box")), "http://gpu-box:11434");
        assert_eq!(ollama_host(Some("gpu-box:8080")), "http://gpu-box:8080");
        assert_eq!(ollama_host(Some("http://10.0.0.2/")), "http://10.0.0.2:11434");
        assert_eq!(ollama_host(Some("https://ollama.example.com")), "https://ollama.example.com");
        assert_eq!(ollama_host(Some("http://127.0.0.1:5/x")), "http://127.0.0.1:5/x");
    }

    #[test]
    fn arguments_and_content() {
        assert_eq!(parse_arguments(""), Ok(serde_json::json!({})));
        assert_eq!(parse_arguments("{\"a\":1}"), Ok(serde_json::json!({"a":1})));
        assert_eq!(parse_arguments("{\"a\":"), Err(BadArguments { raw: "{\"a\":".to_string() }));
        let c = vec![
            serde_json::json!({"type":"text","text":"a"}),
            serde_json::json!({"type":"resource","resource":{"uri":"u","text":"b"}}),
        ];
        assert_eq!(content_as_text(&c), "a\nb");
        assert_eq!(clip("héllo", 2), "h…");
    }
}
