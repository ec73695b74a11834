//! MCP 2026-07-28 "custom headers": a tool's input schema may mark a property with
//! `x-mcp-header: TOKEN`; a `tools/call` over Streamable HTTP then repeats that argument in
//! the `Mcp-Param-TOKEN` header, so that proxies can route on it without reading the body.
//!
//! The rules (transports, "Custom Headers"): the annotation sits on a property reached from
//! the schema's root through `properties` alone; its value is an RFC 9110 token, unique in the
//! schema regardless of case; the property's `type` is `string`, `integer` or `boolean`. A
//! tool whose annotations break a rule is not offered (clients MUST drop it). A value is sent
//! as is when it is visible ASCII without leading or trailing spaces, else as
//! `=?base64?…?=` (UTF-8, standard alphabet); `true`/`false` for booleans; an absent or null
//! argument sends no header.
//!
//! Pure: no I/O. The transport asks `headers` for each modern `tools/call`.

use serde_json::Value;

/// One annotated argument: the `properties` path to it, and its header token.
pub type HeaderMap = Vec<(Vec<String>, String)>;

const KEY: &str = "x-mcp-header";
/// Schema keywords whose value is one sub-schema; crossing one leaves the `properties` chain.
const SINGLE: [&str; 11] = [
    "items",
    "contains",
    "unevaluatedItems",
    "additionalProperties",
    "propertyNames",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
    "contentSchema",
];
/// Keywords whose value is a list of sub-schemas.
const LIST: [&str; 4] = ["allOf", "anyOf", "oneOf", "prefixItems"];
/// Keywords whose value is a map of sub-schemas.
const MAP: [&str; 4] = ["patternProperties", "dependentSchemas", "$defs", "definitions"];
/// The longest `Mcp-Param-*` value sent; a longer argument travels in the body only (the
/// server then says which header it misses), not as a header a proxy would refuse anyway.
pub const MAX_VALUE: usize = 4096;
/// Deepest schema nesting walked (a hostile schema cannot make the walk unbounded).
const MAX_DEPTH: usize = 64;

/// A schema position: its `properties` path from the root (`None` off that chain), and it.
type Position<'a> = (Option<Vec<String>>, &'a serde_json::Map<String, Value>);

/// Every schema position of `root`, with its `properties` path (`None` once another
/// applicator was crossed). `$ref` is not followed; instance data (`default`, `enum`…) is not
/// entered.
fn positions(root: &Value) -> Vec<Position<'_>> {
    let mut out = Vec::new();
    let mut stack: Vec<(Option<Vec<String>>, &Value, usize)> = vec![(Some(Vec::new()), root, 0)];
    while let Some((path, node, depth)) = stack.pop() {
        let Value::Object(schema) = node else { continue };
        out.push((path.clone(), schema));
        if depth >= MAX_DEPTH {
            continue;
        }
        for (kw, v) in schema {
            match (kw.as_str(), v) {
                ("properties", Value::Object(props)) => {
                    for (name, sub) in props {
                        let p = path.as_ref().map(|p| p.iter().cloned().chain([name.clone()]).collect());
                        stack.push((p, sub, depth + 1));
                    }
                }
                (k, _) if SINGLE.contains(&k) => stack.push((None, v, depth + 1)),
                (k, Value::Array(subs)) if LIST.contains(&k) => {
                    stack.extend(subs.iter().map(|s| (None, s, depth + 1)));
                }
                (k, Value::Object(subs)) if MAP.contains(&k) => {
                    stack.extend(subs.values().map(|s| (None, s, depth + 1)));
                }
                _ => {}
            }
        }
    }
    out
}

fn is_token(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Why a tool's `x-mcp-header` annotations break the rules, if they do.
pub fn invalid(input_schema: &Value) -> Option<String> {
    let mut seen: Vec<(String, String)> = Vec::new();
    for (path, schema) in positions(input_schema) {
        let Some(token) = schema.get(KEY) else { continue };
        let Some(path) = path.filter(|p| !p.is_empty()) else {
            return Some(format!("{KEY} at a position not reached through `properties` alone"));
        };
        let at = path.join(".");
        let Some(token) = token.as_str() else {
            return Some(format!("property {at:?}: {KEY} must be a string"));
        };
        if !is_token(token) {
            return Some(format!("property {at:?}: {KEY} {token:?} is not an HTTP header token"));
        }
        match schema.get("type").and_then(Value::as_str) {
            Some("string" | "integer" | "boolean") => {}
            other => {
                return Some(format!(
                    "property {at:?}: {KEY} is allowed on string, integer and boolean properties only (type {})",
                    other.unwrap_or("not a single string")
                ))
            }
        }
        let lower = token.to_ascii_lowercase();
        if let Some((_, first)) = seen.iter().find(|(t, _)| *t == lower) {
            return Some(format!("{KEY} {token:?} on property {at:?} repeats the one on {first:?}"));
        }
        seen.push((lower, at));
    }
    None
}

/// The annotated arguments of a valid schema (`invalid` gave `None`).
pub fn header_map(input_schema: &Value) -> HeaderMap {
    positions(input_schema)
        .into_iter()
        .filter_map(|(path, schema)| {
            let token = schema.get(KEY)?.as_str()?;
            Some((path.filter(|p| !p.is_empty())?, token.to_string()))
        })
        .collect()
}

/// A header value: as is when it survives an HTTP field, else base64-wrapped.
pub fn encode(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && value.trim() == value
        && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if plain {
        value.to_string()
    } else {
        format!("=?base64?{}?=", gosling_util::base64_encode(value.as_bytes(), false))
    }
}

/// The `Mcp-Param-*` headers of a call with `arguments`, in `map`'s order.
pub fn headers(map: &HeaderMap, arguments: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (path, token) in map {
        let value = path.iter().try_fold(arguments, |node, key| node.get(key));
        let text = match value {
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => continue,
        };
        let value = encode(&text);
        if value.len() > MAX_VALUE {
            log::warn!(
                "mcp: argument {} is too long for its Mcp-Param-{token} header; sent in the body only",
                path.join(".")
            );
            continue;
        }
        out.push((format!("Mcp-Param-{token}"), value));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn annotations_are_checked() {
        let ok = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}}},
            "n": {"type": "integer", "x-mcp-header": "N"}}});
        assert_eq!(invalid(&ok), None);
        let mut m = header_map(&ok);
        m.sort();
        assert_eq!(
            m,
            vec![
                (vec!["n".to_string()], "N".to_string()),
                (vec!["opts".into(), "dry".into()], "Dry-Run".into()),
                (vec!["region".into()], "Region".into()),
            ]
        );
        let bad = |s: Value| invalid(&json!({"type": "object", "properties": s})).unwrap();
        assert!(bad(json!({"x": {"type": "number", "x-mcp-header": "X"}})).contains("string, integer and boolean"));
        assert!(bad(json!({"x": {"type": "string", "x-mcp-header": "a b"}})).contains("token"));
        assert!(bad(json!({"x": {"type": "string", "x-mcp-header": 3}})).contains("must be a string"));
        assert!(bad(
            json!({"x": {"type": "string", "x-mcp-header": "A"}, "y": {"type": "string", "x-mcp-header": "a"}})
        )
        .contains("repeats"));
        assert!(bad(json!({"x": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}}))
            .contains("through `properties` alone"));
        assert!(invalid(&json!({"type": "object", "x-mcp-header": "Root"})).is_some());
        // Instance data is not a schema.
        assert_eq!(invalid(&json!({"properties": {"x": {"type": "object", "default": {"x-mcp-header": 1}}}})), None);
    }

    #[test]
    fn values_become_headers() {
        let map = header_map(&json!({"properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "dry": {"type": "boolean", "x-mcp-header": "Dry"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "gone": {"type": "string", "x-mcp-header": "Gone"}}}));
        let mut h = headers(&map, &json!({"region": "eu-west-1", "dry": true, "n": 42, "gone": null}));
        h.sort();
        assert_eq!(
            h,
            vec![
                ("Mcp-Param-Dry".to_string(), "true".to_string()),
                ("Mcp-Param-N".into(), "42".into()),
                ("Mcp-Param-Region".into(), "eu-west-1".into()),
            ]
        );
        assert_eq!(encode("héllo"), "=?base64?aMOpbGxv?=");
        assert_eq!(encode(" padded"), "=?base64?IHBhZGRlZA==?=");
        assert_eq!(encode("=?base64?x?="), "=?base64?PT9iYXNlNjQ/eD89?=");
        assert_eq!(encode("a\nb"), "=?base64?YQpi?=");
        // A header never carries a line break, and never grows without bound.
        let h = headers(&map, &json!({"region": "x\r\nInjected: yes"}));
        assert!(!h[0].1.contains('\n') && h[0].1.starts_with("=?base64?"), "{h:?}");
        assert!(headers(&map, &json!({"region": "x".repeat(MAX_VALUE + 1)})).is_empty());
    }
}
