//! JSON-RPC 2.0 messages as MCP uses them: parse one message from bytes, encode one to a line.
//!
//! Pure: no I/O, no knowledge of transports or of MCP methods. Batches are not part of
//! MCP 2025-06-18, so a JSON array is rejected like any other malformed message.

use serde::ser::{SerializeMap, Serializer};
use serde::Serialize;
use serde_json::Value;
use std::fmt;

pub use crate::error::ErrorObject;
use crate::Error;

/// Standard error codes (JSON-RPC 2.0 §5.1).
pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// A request id: MCP allows strings and integers (never null).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(untagged)]
pub enum Id {
    Num(i64),
    Str(String),
}

impl Id {
    /// A string or integer id; anything else is not one.
    pub fn from_value(v: &Value) -> Option<Id> {
        match v {
            Value::String(s) => Some(Id::Str(s.clone())),
            Value::Number(n) => n.as_i64().map(Id::Num),
            _ => None,
        }
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// One JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request {
        id: Id,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A successful response.
    Response {
        id: Id,
        result: Value,
    },
    /// A failed response. `id` is `None` only when the peer could not read our id.
    Error {
        id: Option<Id>,
        error: ErrorObject,
    },
}

/// Written straight from the borrowed parts (no intermediate `Value`): `jsonrpc` first, then
/// `id`, then the method and params, the result or the error.
impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("jsonrpc", "2.0")?;
        match self {
            Message::Request { id, method, params } => {
                m.serialize_entry("id", id)?;
                m.serialize_entry("method", method)?;
                if let Some(p) = params {
                    m.serialize_entry("params", p)?;
                }
            }
            Message::Notification { method, params } => {
                m.serialize_entry("method", method)?;
                if let Some(p) = params {
                    m.serialize_entry("params", p)?;
                }
            }
            Message::Response { id, result } => {
                m.serialize_entry("id", id)?;
                m.serialize_entry("result", result)?;
            }
            Message::Error { id, error } => {
                m.serialize_entry("id", id)?;
                m.serialize_entry("error", error)?;
            }
        }
        m.end()
    }
}

impl Message {
    pub fn request(id: Id, method: impl Into<String>, params: Option<Value>) -> Message {
        Message::Request { id, method: method.into(), params }
    }

    pub fn notification(method: impl Into<String>, params: Option<Value>) -> Message {
        Message::Notification { method: method.into(), params }
    }

    /// Parses one message. Leading/trailing whitespace (a `\r` before `\n`) is allowed.
    pub fn parse(bytes: &[u8]) -> Result<Message, Error> {
        let value: Value = serde_json::from_slice(bytes).map_err(|e| Error::NotJson(e.to_string()))?;
        Message::from_value(value)
    }

    pub fn from_value(value: Value) -> Result<Message, Error> {
        let Value::Object(mut obj) = value else {
            return Err(Error::NotJsonRpc("expected a JSON object"));
        };
        if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(Error::NotJsonRpc("`jsonrpc` must be \"2.0\""));
        }
        let params = obj.remove("params");
        if let Some(p) = &params {
            if !p.is_object() && !p.is_array() && !p.is_null() {
                return Err(Error::NotJsonRpc("`params` must be an object or array"));
            }
        }
        let params = params.filter(|p| !p.is_null());
        let id = match obj.get("id") {
            None => None,
            Some(Value::Null) => None,
            Some(v) => Some(Id::from_value(v).ok_or(Error::NotJsonRpc("`id` must be a string or integer"))?),
        };
        if let Some(method) = obj.get("method") {
            let method = method.as_str().ok_or(Error::NotJsonRpc("`method` must be a string"))?.to_string();
            return Ok(match id {
                Some(id) => Message::Request { id, method, params },
                None => Message::Notification { method, params },
            });
        }
        if let Some(err) = obj.remove("error") {
            let Value::Object(mut e) = err else {
                return Err(Error::NotJsonRpc("`error` must be an object"));
            };
            let code =
                e.get("code").and_then(Value::as_i64).ok_or(Error::NotJsonRpc("`error.code` must be an integer"))?;
            let message = e.get("message").and_then(Value::as_str).unwrap_or("").to_string();
            let data = e.remove("data");
            return Ok(Message::Error { id, error: ErrorObject { code, message, data } });
        }
        if let Some(result) = obj.remove("result") {
            let id = id.ok_or(Error::NotJsonRpc("a response needs an `id`"))?;
            return Ok(Message::Response { id, result });
        }
        Err(Error::NotJsonRpc("neither `method`, `result` nor `error`"))
    }

    /// Compact JSON without a trailing newline. serde_json escapes control characters, so the
    /// result never contains a raw `\n` and is safe as one line of newline-delimited framing.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The method name of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request { method, .. } | Message::Notification { method, .. } => Some(method),
            _ => None,
        }
    }
}

/// The top-level `id` of a message of which only the first bytes are at hand (an over-limit
/// message whose rest was skipped): scans the object's members in order, skipping values
/// without parsing them, and stops at `id`. `None` when the prefix ends first, is not an
/// object, or the id is neither a string nor an integer. Clients write `id` before `params`.
pub fn peek_id(prefix: &[u8]) -> Option<Id> {
    let mut s = Scan { b: prefix, i: 0 };
    s.ws();
    s.eat(b'{')?;
    loop {
        s.ws();
        let key = s.string()?;
        s.ws();
        s.eat(b':')?;
        s.ws();
        let start = s.i;
        s.value()?;
        if serde_json::from_slice::<String>(key).ok()?.as_str() == "id" {
            let v: Value = serde_json::from_slice(&prefix[start..s.i]).ok()?;
            return Id::from_value(&v);
        }
        s.ws();
        match s.next()? {
            b',' => continue,
            _ => return None,
        }
    }
}

/// A forward scanner over JSON text for `peek_id`: each step returns `None` at the end of the
/// input or at a byte that cannot be there.
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.b.get(self.i)?;
        self.i += 1;
        Some(c)
    }
    fn ws(&mut self) {
        while self.b.get(self.i).is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }
    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }
    /// A string token, quotes included.
    fn string(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        self.eat(b'"')?;
        loop {
            match self.next()? {
                b'\\' => {
                    self.next()?;
                }
                b'"' => return Some(&self.b[start..self.i]),
                _ => {}
            }
        }
    }
    /// Skips one value: a string, an object or array (nested, strings inside skipped), or a
    /// number or literal (up to the next delimiter).
    fn value(&mut self) -> Option<()> {
        match *self.b.get(self.i)? {
            b'"' => self.string().map(|_| ()),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match *self.b.get(self.i)? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => depth -= 1,
                        _ => {}
                    }
                    self.i += 1;
                    if depth == 0 {
                        return Some(());
                    }
                }
            }
            _ => {
                let start = self.i;
                while self
                    .b
                    .get(self.i)
                    .is_some_and(|c| !matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                {
                    self.i += 1;
                }
                // A token cut by the end of the prefix is not a whole value.
                (self.i > start && self.i < self.b.len()).then_some(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn peek_id_reads_the_id_from_a_prefix() {
        assert_eq!(peek_id(br#"{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"x":"#), Some(Id::Num(7)));
        assert_eq!(peek_id(br#" { "jsonrpc" : "2.0" , "id" : "a\"b" , "params""#), Some(Id::Str("a\"b".into())));
        // Members before the id are skipped, nested and with brackets inside strings.
        assert_eq!(peek_id(br#"{"meta":{"a":[1,"]}",{"b":"}"}]},"\u0069d":-3,"x"#), Some(Id::Num(-3)));
        // The prefix ends before the id, or inside it.
        assert_eq!(peek_id(br#"{"jsonrpc":"2.0","method":"x","params":{"text":"aaaa"#), None);
        assert_eq!(peek_id(br#"{"id":12"#), None, "a number cut by the end may be longer");
        assert_eq!(peek_id(br#"{"id":"ab"#), None);
        // Not an object, or an id of the wrong type.
        assert_eq!(peek_id(b"[1,2]"), None);
        assert_eq!(peek_id(br#"{"id":null,"x":1}"#), None);
        assert_eq!(peek_id(br#"{"id":1.5,"x":1}"#), None);
        assert_eq!(peek_id(b"not json at all"), None);
    }

    #[test]
    fn parses_each_kind() {
        let r = Message::parse(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
        assert_eq!(r, Message::request(Id::Num(1), "ping", None));
        let n = Message::parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}"#).unwrap();
        assert_eq!(n, Message::notification("notifications/initialized", Some(json!({}))));
        let ok = Message::parse(br#"{"jsonrpc":"2.0","id":"a","result":{"x":1}}"#).unwrap();
        assert_eq!(ok, Message::Response { id: Id::Str("a".into()), result: json!({"x":1}) });
        let err = Message::parse(br#"{"jsonrpc":"2.0","id":2,"error":{"code":-32601,"message":"nope"}}"#).unwrap();
        assert_eq!(err, Message::Error { id: Some(Id::Num(2)), error: ErrorObject::new(METHOD_NOT_FOUND, "nope") });
        let err_null =
            Message::parse(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}"#).unwrap();
        assert!(matches!(err_null, Message::Error { id: None, .. }));
    }

    #[test]
    fn rejects_what_is_not_jsonrpc() {
        for bad in [
            &b"not json"[..],
            b"[]",
            br#"{"id":1,"method":"x"}"#,
            br#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#,
            br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#,
            br#"{"jsonrpc":"2.0","method":7}"#,
            br#"{"jsonrpc":"2.0","result":1}"#,
            br#"{"jsonrpc":"2.0","id":1}"#,
            br#"{"jsonrpc":"2.0","id":1,"error":{"message":"no code"}}"#,
            br#"{"jsonrpc":"2.0","method":"x","params":3}"#,
        ] {
            assert!(Message::parse(bad).is_err(), "accepted {:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn encode_round_trips_on_one_line() {
        let msgs = [
            Message::request(
                Id::Str("r\n1".into()),
                "tools/call",
                Some(json!({"name":"echo","arguments":{"m":"a\nb"}})),
            ),
            Message::notification("notifications/cancelled", Some(json!({"requestId":3}))),
            Message::Response { id: Id::Num(-4), result: json!(null) },
            Message::Error { id: None, error: ErrorObject { code: -1, message: "m".into(), data: Some(json!([1])) } },
        ];
        for m in msgs {
            let line = m.encode();
            assert!(!line.contains('\n'));
            assert_eq!(Message::parse(line.as_bytes()).unwrap(), m);
        }
    }

    #[test]
    fn trailing_cr_is_fine() {
        assert!(Message::parse(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\r").is_ok());
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use gosling_util::XorShift;

    const SEEDS: [&str; 5] = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"m":"x"}}}"#,
        r#"{"jsonrpc":"2.0","id":"a","result":{"content":[{"type":"text","text":"hi"}],"isError":false}}"#,
        r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"nope","data":[1,2]}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}"#,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}"#,
    ];

    #[test]
    fn ten_thousand_mutations_never_panic_and_round_trip() {
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        let alphabet = b"{}[]\":,0123456789-.eE truefalsnul\\u\n\rabcidmethodjsonrpc2.0";
        let mut parsed = 0;
        for i in 0..10_000 {
            let b = rng.mutate(SEEDS[i % SEEDS.len()].as_bytes(), alphabet, 6);
            if let Ok(m) = Message::parse(&b) {
                parsed += 1;
                let line = m.encode();
                assert!(!line.contains('\n'));
                assert_eq!(Message::parse(line.as_bytes()).unwrap(), m, "round trip of {line}");
            }
        }
        assert!(parsed > 100, "the mutations should keep some messages valid ({parsed})");
    }
}
