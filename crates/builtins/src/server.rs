//! A small synchronous MCP server over stdin/stdout for the builtin extensions.
//!
//! Framing is newline-delimited JSON-RPC (`wire::jsonrpc`). stdout carries only protocol
//! lines; logs go to stderr. Messages go through the one JSON-RPC peer (`wire::peer`, MCP
//! flavour seen from a server). The reading thread answers `initialize`, `ping` and
//! `tools/list` itself; each `tools/call` runs on its own worker thread (at most
//! `MAX_IN_FLIGHT` at once: the peer's in-flight bound) so a long shell command does not block
//! pings, and `notifications/cancelled` sets that call's `Cancel` flag (the peer then does not
//! send the call's answer, as MCP asks). stdin EOF cancels what is still running and returns.
//! Lines are bounded (`MAX_LINE`); an over-long or unparseable line is answered with -32700
//! and the server keeps serving.
//!
//! It does not implement resources, prompts, logging or any server→client request: the
//! builtins only have tools.

use super::error::Error;
use super::names::KNOWN;
use gosling_util::lock;
use gosling_wire::jsonrpc::{self, ErrorObject, Id, Message};
use gosling_wire::mcp_version;
use gosling_wire::peer::{self, Answer, Busy, Handler, Incoming, Peer};
use serde_json::{json, Map, Value};
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The cancellation flag of one running tool call: set by the client (`notifications/cancelled`:
/// the call is then not answered) or by shutdown (stdin EOF, SIGTERM: the call is answered if
/// stdout still works). The peer's.
pub use gosling_wire::peer::Cancel;

/// Longest accepted input line (a `text_editor` write carries a whole file).
pub const MAX_LINE: usize = 8 << 20;

/// Tool calls running at once; beyond it a call is refused with a JSON-RPC error. Set above
/// the agent's own request cap (GOSLING_MAX_REQUESTS, 64 by default), so calls through
/// gosling are never refused here; it bounds a client that floods stdin directly.
pub const MAX_IN_FLIGHT: usize = 256;

/// How long stdin EOF lets running calls finish before cancelling them (so
/// `printf ... | gosling mcp developer` still gets its answers).
const EOF_GRACE: Duration = Duration::from_secs(2);

/// How long shutdown waits for cancelled calls to wind down.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// The result of one tool call: MCP `CallToolResult` with one text item. A failure the
/// model can fix (bad path, not found, timeout) is `is_error: true`, never a JSON-RPC error.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub text: String,
    pub is_error: bool,
}

impl ToolOutcome {
    pub fn ok(text: impl Into<String>) -> ToolOutcome {
        ToolOutcome { text: text.into(), is_error: false }
    }
    pub fn error(text: impl Into<String>) -> ToolOutcome {
        ToolOutcome { text: text.into(), is_error: true }
    }
    /// The MCP `CallToolResult` JSON.
    pub fn to_result(&self) -> Value {
        json!({"content": [{"type": "text", "text": self.text}], "isError": self.is_error})
    }
}

impl<E: Into<String>> From<Result<String, E>> for ToolOutcome {
    fn from(r: Result<String, E>) -> ToolOutcome {
        r.map_or_else(ToolOutcome::error, ToolOutcome::ok)
    }
}

/// A builtin's tool list from its JSON text (a constant of the builtin; each builtin's unit test
/// `the_tool_list_is_json_with_an_object_schema_per_tool` parses it).
pub fn tool_list(text: &str) -> Vec<Value> {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("a builtin's tool list is not valid JSON: {e}"))
}

/// One builtin extension: its tools and how to run them.
pub trait Builtin: Send + Sync + 'static {
    /// The builtin's name as in `gosling mcp NAME` (serverInfo is `gosling-NAME`).
    fn name(&self) -> &'static str;
    /// The `instructions` of the initialize result: what the tools are for.
    fn instructions(&self) -> String;
    /// MCP Tool objects (`name`, `description`, `inputSchema`, `annotations`).
    fn tools(&self) -> Vec<Value>;
    /// Runs `tool` (one of `tools()`) with its arguments; checks `cancel` while it waits.
    fn call(&self, tool: &str, args: &Map<String, Value>, cancel: &Cancel) -> ToolOutcome;
}

/// How the runtime starts builtin `name` as a stdio extension: `exe` (this binary) with
/// `["mcp", NAME]`, its notes under `state_dir`. The one place that knows this argv.
pub fn launch(name: &str, exe: &Path, state_dir: &Path) -> Result<Launch, Error> {
    if !KNOWN.contains(&name) {
        return Err(Error::Unknown { name: name.to_string() });
    }
    Ok(Launch {
        program: exe.to_path_buf(),
        args: vec!["mcp".to_string(), name.to_string()],
        env: vec![("GOSLING_STATE_DIR".to_string(), state_dir.display().to_string())],
    })
}

/// A builtin's command line, for the runtime's stdio spawn.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// Serves `builtin` (called `name`) on this process's stdin/stdout until stdin reaches EOF.
/// SIGTERM/SIGINT cancel running calls (killing their shell commands) and exit.
pub fn serve_stdio(name: &str, builtin: Arc<dyn Builtin>) -> Result<(), Error> {
    log::debug!("builtin {name}: serving MCP on stdio");
    run(builtin, io::stdin().lock(), Box::new(io::stdout()), true)
}

/// Serves `builtin` over any line stream (tests and in-process use).
pub fn serve_io(builtin: Arc<dyn Builtin>, input: impl BufRead, output: Box<dyn Write + Send>) -> Result<(), Error> {
    run(builtin, input, output, false)
}

/// stdout as the peer's way out: one line per message, flushed. A failed write means the client
/// is gone (said once).
struct Out {
    name: &'static str,
    out: Mutex<Box<dyn Write + Send>>,
    closed: AtomicBool,
}

/// The client is gone (stdout failed).
#[derive(Debug, Clone)]
struct Gone;

impl peer::Outbound for Out {
    type Error = Gone;
    fn send(&self, msg: &Message) -> Result<(), Gone> {
        let mut line = msg.encode();
        line.push('\n');
        let mut out = lock(&self.out);
        match out.write_all(line.as_bytes()).and_then(|_| out.flush()) {
            Ok(()) => Ok(()),
            Err(e) => {
                if !self.closed.swap(true, Ordering::SeqCst) {
                    log::warn!("builtin {}: cannot write to stdout ({e}); the client is gone", self.name);
                }
                Err(Gone)
            }
        }
    }
    fn gone(&self) -> Gone {
        Gone
    }
}

struct Shared {
    builtin: Arc<dyn Builtin>,
    /// The builtin's tools, as `tools/list` answers, and their names.
    tools: Vec<Value>,
    tool_names: Vec<String>,
    peer: Arc<Peer<Out>>,
}

impl Shared {
    fn send(&self, msg: &Message) {
        let _ = self.peer.send(msg);
    }

    fn reply_error(&self, id: Option<Id>, code: i64, message: String) {
        self.send(&Message::Error { id, error: ErrorObject::new(code, message) });
    }

    fn out_closed(&self) -> bool {
        self.peer.outbound().closed.load(Ordering::SeqCst)
    }

    /// Waits up to `limit` until no call is running; true when none is.
    fn drain(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if self.peer.inbound_count() == 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Lets running calls finish for `EOF_GRACE`, then cancels the rest (killing their
    /// commands) and waits for them to answer.
    fn shut_down(&self) {
        if self.drain(EOF_GRACE) {
            return;
        }
        self.peer.cancel_inbound();
        if !self.drain(DRAIN_TIMEOUT) {
            log::warn!("builtin {}: calls still running after {DRAIN_TIMEOUT:?}; exiting anyway", self.builtin.name());
        }
    }
}

fn run(
    builtin: Arc<dyn Builtin>,
    mut input: impl BufRead,
    output: Box<dyn Write + Send>,
    watch_signals: bool,
) -> Result<(), Error> {
    let tools = builtin.tools();
    let out = Out { name: builtin.name(), out: Mutex::new(output), closed: AtomicBool::new(false) };
    let shared = Arc::new(Shared {
        tool_names: tools.iter().filter_map(|t| t["name"].as_str().map(String::from)).collect(),
        tools,
        peer: Peer::new(peer::MCP_SERVER, format!("builtin {}", builtin.name()), out, MAX_IN_FLIGHT),
        builtin,
    });
    if watch_signals {
        gosling_sys::install_shutdown_handler();
        let s = shared.clone();
        std::thread::Builder::new()
            .name("builtin-signals".into())
            .spawn(move || {
                // Asleep until SIGTERM/SIGINT: no timer ticks while the builtin is idle.
                // wait: the signal is the only event this thread exists for
                while !gosling_sys::wait_shutdown(None) {}
                log::info!("builtin {}: terminated; cancelling running calls", s.builtin.name());
                s.peer.cancel_inbound();
                s.drain(DRAIN_TIMEOUT);
                std::process::exit(0);
            })
            .map_err(Error::SignalThread)?;
    }
    let mut buf = Vec::with_capacity(4096);
    loop {
        // wait: the runtime's pipe; EOF when it closes
        let line = read_line(&mut input, &mut buf, MAX_LINE).unwrap_or_else(|e| {
            log::warn!("builtin {}: reading stdin failed: {e}", shared.builtin.name());
            Line::Eof
        });
        match line {
            Line::Eof => break,
            Line::TooLong => {
                log::warn!("builtin {}: dropped an input line longer than {MAX_LINE} bytes", shared.builtin.name());
                let message = format!("line longer than {MAX_LINE} bytes; send smaller messages");
                shared.reply_error(None, jsonrpc::PARSE_ERROR, message);
            }
            Line::Data => {
                if !buf.iter().all(u8::is_ascii_whitespace) {
                    handle_line(&shared, &buf);
                }
            }
        }
        if shared.out_closed() {
            break;
        }
    }
    log::debug!("builtin {}: stdin closed; stopping", shared.builtin.name());
    shared.shut_down();
    Ok(())
}

fn handle_line(shared: &Arc<Shared>, bytes: &[u8]) {
    let name = shared.builtin.name();
    let msg = match Message::parse(bytes) {
        Ok(m) => m,
        Err(gosling_wire::Error::NotJson(e)) => {
            log::warn!("builtin {name}: unparseable input line: {e}");
            return shared.reply_error(None, jsonrpc::PARSE_ERROR, format!("parse error: not JSON ({e})"));
        }
        Err(e) => {
            log::warn!("builtin {name}: {e}");
            // Answer with the id when it is readable, as JSON-RPC asks.
            let id = serde_json::from_slice::<Value>(bytes).ok().and_then(|v| v.get("id").and_then(Id::from_value));
            return shared.reply_error(id, jsonrpc::INVALID_REQUEST, format!("invalid request: {e}"));
        }
    };
    if let Some(answer) = shared.peer.receive(msg, &Router(shared)) {
        shared.send(&answer);
    }
}

/// The server's side of the peer: the client's requests and notifications.
struct Router<'a>(&'a Arc<Shared>);

impl Handler<Out> for Router<'_> {
    fn request(&self, req: Incoming<'_, Out>) -> Answer {
        let shared = self.0;
        let name = shared.builtin.name();
        match req.method.as_str() {
            "initialize" => {
                let asked = req.params.as_ref().and_then(|p| p.get("protocolVersion")).and_then(Value::as_str);
                let version = asked
                    .filter(|v| mcp_version::is_known(v) && !mcp_version::is_modern(v))
                    .unwrap_or(mcp_version::PREFERRED);
                Answer::Now(Ok(json!({
                    "protocolVersion": version,
                    "capabilities": {"tools": {"listChanged": false}},
                    "serverInfo": {"name": format!("gosling-{name}"), "version": env!("CARGO_PKG_VERSION")},
                    "instructions": shared.builtin.instructions(),
                })))
            }
            "ping" => Answer::Now(Ok(json!({}))),
            "tools/list" => Answer::Now(Ok(json!({"tools": shared.tools}))),
            "tools/call" => match start_call(shared, &req) {
                Ok(()) => Answer::Later,
                Err((code, message)) => Answer::Now(Err(ErrorObject::new(code, message))),
            },
            method => Answer::Now(Err(ErrorObject::new(
                jsonrpc::METHOD_NOT_FOUND,
                format!("method {method:?} not found; gosling-{name} serves tools only"),
            ))),
        }
    }

    /// `notifications/initialized` and anything else need no action (the peer handles
    /// `notifications/cancelled`).
    fn notification(&self, method: &str, _params: Option<Value>) {
        log::debug!("builtin {}: notification {method}", self.0.builtin.name());
    }
}

/// Checks a `tools/call` and runs it on its own worker thread, which answers it; the
/// JSON-RPC error (code, message) when it cannot run.
fn start_call(shared: &Arc<Shared>, req: &Incoming<'_, Out>) -> Result<(), (i64, String)> {
    let name = shared.builtin.name();
    let invalid = |message: String| (jsonrpc::INVALID_PARAMS, message);
    let params = req.params.as_ref().unwrap_or(&Value::Null);
    let Some(tool) = params.get("name").and_then(Value::as_str) else {
        return Err(invalid("tools/call needs `params.name` (a string)".into()));
    };
    if !shared.tool_names.iter().any(|t| t == tool) {
        return Err(invalid(format!("unknown tool {tool:?}; gosling-{name} has: {}", shared.tool_names.join(", "))));
    }
    let args = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(_) => return Err(invalid("tools/call `params.arguments` must be an object".into())),
    };
    let id = &req.id;
    let responder = req.defer().map_err(|busy| match busy {
        Busy::DuplicateId => (jsonrpc::INVALID_REQUEST, format!("request id {id} is already in use by a running call")),
        Busy::Full { max } => {
            (jsonrpc::INTERNAL_ERROR, format!("{max} tool calls are already running; wait for one to finish"))
        }
    })?;
    let s = shared.clone();
    let tool = tool.to_string();
    let spawned = std::thread::Builder::new().name(format!("builtin-call-{id}")).spawn(move || {
        let cancel = responder.cancel().clone();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.builtin.call(&tool, &args, &cancel)))
            .unwrap_or_else(|_| {
                ToolOutcome::error(format!(
                    "{}: internal error while running {tool}; see the server's stderr",
                    s.builtin.name()
                ))
            });
        // Not sent when the client cancelled the call; the slot is given back only after the
        // answer is written (shutdown waits for no call in flight before the process exits).
        responder.respond(Ok(outcome.to_result()));
    });
    spawned.map(drop).map_err(|e| {
        log::error!("builtin {name}: cannot start a worker thread: {e}");
        (jsonrpc::INTERNAL_ERROR, format!("cannot start a worker thread: {e}; retry later"))
    })
}

enum Line {
    Data,
    TooLong,
    Eof,
}

/// Reads one `\n`-terminated line into `buf` (without the `\n`), never holding more than
/// `max` bytes: a longer line is consumed and reported as `TooLong`.
fn read_line(r: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    let mut saw_any = false;
    loop {
        let avail = match r.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            return Ok(match (saw_any, too_long) {
                (false, _) => Line::Eof,
                (true, true) => Line::TooLong,
                (true, false) => Line::Data,
            });
        }
        saw_any = true;
        let (chunk, consumed, ended) = match avail.iter().position(|&b| b == b'\n') {
            Some(i) => (&avail[..i], i + 1, true),
            None => (avail, avail.len(), false),
        };
        if !too_long {
            if buf.len() + chunk.len() > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        r.consume(consumed);
        if ended {
            return Ok(if too_long { Line::TooLong } else { Line::Data });
        }
    }
}

/// The builtins' working directory: `GOOSE_WORKING_DIR` when set and not empty, else the
/// process's current directory.
pub fn working_dir_from_env() -> io::Result<PathBuf> {
    match gosling_config::settings::goose_working_dir(&gosling_config::ProcessEnv) {
        Some(d) => Ok(d),
        None => std::env::current_dir(),
    }
}

// Argument helpers shared by the builtins. Messages name the argument and its type so
// the model can fix its call.

/// A required string argument.
pub fn str_arg<'a>(args: &'a Map<String, Value>, key: &str) -> Result<&'a str, Error> {
    opt_str_arg(args, key)?.ok_or_else(|| Error::Missing { key: key.into(), kind: "a string" })
}

/// An optional string argument.
pub fn opt_str_arg<'a>(args: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>, Error> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(Error::WrongType { key: key.into(), kind: "a string" }),
    }
}

/// An optional non-negative integer argument (a whole-number float or numeric string is accepted).
pub fn opt_u64_arg(args: &Map<String, Value>, key: &str) -> Result<Option<u64>, Error> {
    let wrong = || Error::WrongType { key: key.into(), kind: "a non-negative whole number" };
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 1e15).map(|f| f as u64))
            .map(Some)
            .ok_or_else(wrong),
        Some(Value::String(s)) => s.trim().parse().map(Some).map_err(|_| wrong()),
        Some(_) => Err(wrong()),
    }
}

/// An optional boolean argument (`"true"`/`"false"` strings are accepted).
pub fn opt_bool_arg(args: &Map<String, Value>, key: &str) -> Result<Option<bool>, Error> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) if s == "true" => Ok(Some(true)),
        Some(Value::String(s)) if s == "false" => Ok(Some(false)),
        Some(_) => Err(Error::WrongType { key: key.into(), kind: "true or false" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    struct Echo;
    impl Builtin for Echo {
        fn name(&self) -> &'static str {
            "echo"
        }
        fn instructions(&self) -> String {
            "echoes".into()
        }
        fn tools(&self) -> Vec<Value> {
            vec![json!({"name": "echo", "inputSchema": {"type": "object"}})]
        }
        fn call(&self, _tool: &str, args: &Map<String, Value>, _cancel: &Cancel) -> ToolOutcome {
            str_arg(args, "text").map(String::from).into()
        }
    }

    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);
    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn exchange(input: &str) -> Vec<Value> {
        let sink = Sink::default();
        serve_io(Arc::new(Echo), Cursor::new(input.as_bytes().to_vec()), Box::new(sink.clone())).unwrap();
        let out = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    #[test]
    fn answers_in_order_for_inline_methods() {
        let out = exchange(concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            "\n\n",
            "garbage\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":3,"method":"resources/list"}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}"#,
        ));
        assert_eq!(out.len(), 5, "{out:?}");
        assert_eq!(out[0]["result"]["protocolVersion"], "2024-11-05");
        assert_eq!(out[0]["result"]["serverInfo"]["name"], "gosling-echo");
        assert_eq!(out[1]["error"]["code"], -32700);
        assert_eq!(out[1]["id"], Value::Null);
        assert_eq!(out[2]["result"], json!({}));
        assert_eq!(out[3]["error"]["code"], -32601);
        assert_eq!(out[4]["result"]["protocolVersion"], mcp_version::PREFERRED);
    }

    #[test]
    fn tool_calls_and_their_errors() {
        let out = exchange(concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"nope"}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{}}}"#,
            "\n",
        ));
        let by_id = |i: i64| out.iter().find(|m| m["id"] == i).unwrap_or_else(|| panic!("no answer to {i}: {out:?}"));
        assert_eq!(by_id(1)["result"], json!({"content":[{"type":"text","text":"hi"}],"isError":false}));
        assert_eq!(by_id(2)["error"]["code"], -32602);
        assert_eq!(by_id(3)["result"]["isError"], true);
        assert!(by_id(3)["result"]["content"][0]["text"].as_str().unwrap().contains("`text`"));
    }

    #[test]
    fn long_lines_are_refused_and_reading_goes_on() {
        let mut input = Cursor::new(b"0123456789\nabc\nlast".to_vec());
        let mut buf = Vec::new();
        assert!(matches!(read_line(&mut input, &mut buf, 5).unwrap(), Line::TooLong));
        assert!(matches!(read_line(&mut input, &mut buf, 5).unwrap(), Line::Data));
        assert_eq!(buf, b"abc");
        assert!(matches!(read_line(&mut input, &mut buf, 5).unwrap(), Line::Data));
        assert_eq!(buf, b"last");
        assert!(matches!(read_line(&mut input, &mut buf, 5).unwrap(), Line::Eof));
    }

    #[test]
    fn unknown_builtin_lists_the_known_ones() {
        let exe = Path::new("/bin/gosling");
        let state = Path::new("/state");
        let err = launch("x", exe, state).unwrap_err().to_string();
        assert_eq!(err, "unknown builtin extension x; known builtins: developer, memory");
        assert_eq!(crate::make("x").err().map(|e| e.to_string()), Some(err));
        let l = launch("memory", exe, state).unwrap();
        assert_eq!((l.program.as_path(), l.args.as_slice()), (exe, ["mcp", "memory"].map(String::from).as_slice()));
        assert_eq!(l.env, [("GOSLING_STATE_DIR".to_string(), "/state".to_string())]);
    }
}
