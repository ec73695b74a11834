//! Checking a tool's `structuredContent` against its `outputSchema` (MCP 2025-06-18: a client
//! SHOULD validate structured results).
//!
//! A subset of JSON Schema that tool output schemas use: `type` (one or a list), `properties`,
//! `required`, `additionalProperties` (false or a schema), `items`, `enum`, `const`,
//! `minimum`/`maximum`, `minLength`/`maxLength`, `minItems`/`maxItems`, `anyOf`/`oneOf`/`allOf`.
//! Anything else (`$ref`, formats, patterns) is accepted as is: a false alarm would hide a good
//! result from the model, a missed keyword only lets one through. Pure: no I/O.

use serde_json::Value;

/// The first mismatch, as `path: what`, or `None` when `value` fits `schema`.
pub fn mismatch(schema: &Value, value: &Value) -> Option<String> {
    check(schema, value, "$", 0)
}

const MAX_DEPTH: usize = 64;

fn type_matches(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        _ => true,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn check(schema: &Value, v: &Value, path: &str, depth: usize) -> Option<String> {
    if depth > MAX_DEPTH {
        return None;
    }
    let s = match schema {
        Value::Bool(false) => return Some(format!("{path}: no value is allowed here")),
        Value::Object(s) => s,
        _ => return None,
    };
    match s.get("type") {
        Some(Value::String(t)) if !type_matches(t, v) => {
            return Some(format!("{path}: expected {t}, got {}", kind(v)));
        }
        Some(Value::Array(ts)) if !ts.iter().filter_map(Value::as_str).any(|t| type_matches(t, v)) => {
            let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            return Some(format!("{path}: expected {}, got {}", names.join(" or "), kind(v)));
        }
        _ => {}
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array).filter(|e| !e.contains(v)) {
        return Some(format!("{path}: {v} is not one of {}", Value::Array(e.clone())));
    }
    if let Some(c) = s.get("const").filter(|c| *c != v) {
        return Some(format!("{path}: expected {c}, got {v}"));
    }
    if let Some(n) = v.as_f64() {
        if let Some(min) = s.get("minimum").and_then(Value::as_f64).filter(|min| n < *min) {
            return Some(format!("{path}: {n} is below the minimum {min}"));
        }
        if let Some(max) = s.get("maximum").and_then(Value::as_f64).filter(|max| n > *max) {
            return Some(format!("{path}: {n} is above the maximum {max}"));
        }
    }
    if let Some(text) = v.as_str() {
        let len = text.chars().count() as u64;
        if s.get("minLength").and_then(Value::as_u64).is_some_and(|m| len < m) {
            return Some(format!("{path}: the string is shorter than minLength"));
        }
        if s.get("maxLength").and_then(Value::as_u64).is_some_and(|m| len > m) {
            return Some(format!("{path}: the string is longer than maxLength"));
        }
    }
    if let Some(obj) = v.as_object() {
        let props = s.get("properties").and_then(Value::as_object);
        let required = s.get("required").and_then(Value::as_array).into_iter().flatten();
        if let Some(r) = required.filter_map(Value::as_str).find(|r| !obj.contains_key(*r)) {
            return Some(format!("{path}: the required property `{r}` is missing"));
        }
        for (k, item) in obj {
            let sub_schema = match (props.and_then(|p| p.get(k)), s.get("additionalProperties")) {
                (Some(ps), _) => ps,
                (None, Some(Value::Bool(false))) => return Some(format!("{path}: the property `{k}` is not allowed")),
                (None, Some(extra @ Value::Object(_))) => extra,
                _ => continue,
            };
            if let Some(m) = check(sub_schema, item, &format!("{path}.{k}"), depth + 1) {
                return Some(m);
            }
        }
    }
    if let Some(arr) = v.as_array() {
        let n = arr.len() as u64;
        if s.get("minItems").and_then(Value::as_u64).is_some_and(|m| n < m) {
            return Some(format!("{path}: fewer items than minItems"));
        }
        if s.get("maxItems").and_then(Value::as_u64).is_some_and(|m| n > m) {
            return Some(format!("{path}: more items than maxItems"));
        }
        if let Some(items) = s.get("items").filter(|i| i.is_object() || i.is_boolean()) {
            for (i, item) in arr.iter().enumerate() {
                if let Some(m) = check(items, item, &format!("{path}[{i}]"), depth + 1) {
                    return Some(m);
                }
            }
        }
    }
    let mut all = s.get("allOf").and_then(Value::as_array).into_iter().flatten();
    if let Some(m) = all.find_map(|a| check(a, v, path, depth + 1)) {
        return Some(m);
    }
    for key in ["anyOf", "oneOf"] {
        let fits = |alternatives: &Vec<Value>| alternatives.iter().any(|a| check(a, v, path, depth + 1).is_none());
        if s.get(key).and_then(Value::as_array).is_some_and(|any| !any.is_empty() && !fits(any)) {
            return Some(format!("{path}: matches none of the {key} alternatives"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_and_types() {
        let s = json!({"type":"object","properties":{"temp":{"type":"number"},"city":{"type":"string"}},"required":["temp"]});
        assert_eq!(mismatch(&s, &json!({"temp": 21.5, "city": "Oslo"})), None);
        assert_eq!(mismatch(&s, &json!({"city": "Oslo"})).unwrap(), "$: the required property `temp` is missing");
        assert_eq!(mismatch(&s, &json!({"temp": "warm"})).unwrap(), "$.temp: expected number, got string");
        assert_eq!(mismatch(&s, &json!([1])).unwrap(), "$: expected object, got array");
        let closed = json!({"type":"object","properties":{"a":{}},"additionalProperties":false});
        assert_eq!(mismatch(&closed, &json!({"b": 1})).unwrap(), "$: the property `b` is not allowed");
    }

    #[test]
    fn arrays_enums_and_combinators() {
        let s = json!({"type":"array","items":{"type":"integer","minimum":0},"maxItems":2});
        assert_eq!(mismatch(&s, &json!([1, 2])), None);
        assert_eq!(mismatch(&s, &json!([1, -2])).unwrap(), "$[1]: -2 is below the minimum 0");
        assert!(mismatch(&s, &json!([1, 2, 3])).is_some());
        assert!(mismatch(&json!({"enum":["a","b"]}), &json!("c")).is_some());
        assert_eq!(mismatch(&json!({"type":["string","null"]}), &json!(null)), None);
        assert!(mismatch(&json!({"anyOf":[{"type":"string"},{"type":"integer"}]}), &json!(true)).is_some());
        assert_eq!(mismatch(&json!({"$ref":"#/defs/x"}), &json!(1)), None);
    }
}
