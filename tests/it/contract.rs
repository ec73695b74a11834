//! Validates our JSON bodies against the schemas of tests/contract/goose-openapi-in-scope.json
//! (goose-server 1.34.0; see tests/contract/README.md). A small validator for the subset of JSON Schema that file uses: $ref, type,
//! nullable, enum, properties, required, items, additionalProperties, oneOf, anyOf, allOf.
//! Every route test calls `check` on the bodies it receives, so new routes are covered as
//! their tests are written.

use serde_json::Value;
use std::sync::OnceLock;

fn spec() -> &'static Value {
    static S: OnceLock<Value> = OnceLock::new();
    S.get_or_init(|| {
        let p = crate::support::manifest_dir().join("tests/contract/goose-openapi-in-scope.json");
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()));
        serde_json::from_str(&text).unwrap()
    })
}

fn resolve(s: &Value) -> &Value {
    match s.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.rsplit('/').next().unwrap();
            resolve(&spec()["components"]["schemas"][name])
        }
        None => s,
    }
}

/// Errors of `v` against `schema`, with JSON paths.
pub fn validate(schema: &Value, v: &Value, at: &str) -> Vec<String> {
    let s = resolve(schema);
    let mut errs = Vec::new();
    if v.is_null() && s.get("nullable").and_then(Value::as_bool) == Some(true) {
        return errs;
    }
    if let Some(all) = s.get("allOf").and_then(Value::as_array) {
        for sub in all {
            errs.extend(validate(sub, v, at));
        }
    }
    if let Some(one) = s.get("oneOf").and_then(Value::as_array) {
        let ok = one.iter().filter(|sub| validate(sub, v, at).is_empty()).count();
        if ok != 1 {
            errs.push(format!("{at}: matches {ok} of the oneOf alternatives (want exactly 1): {v}"));
        }
    }
    if let Some(any) = s.get("anyOf").and_then(Value::as_array) {
        if !any.iter().any(|sub| validate(sub, v, at).is_empty()) {
            errs.push(format!("{at}: matches none of the anyOf alternatives: {v}"));
        }
    }
    if let Some(en) = s.get("enum").and_then(Value::as_array) {
        if !en.contains(v) {
            errs.push(format!("{at}: {v} not in enum {en:?}"));
        }
    }
    if let Some(t) = s.get("type").and_then(Value::as_str) {
        let ok = match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "boolean" => v.is_boolean(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "null" => v.is_null(),
            _ => true,
        };
        if !ok {
            errs.push(format!("{at}: expected {t}, got {v}"));
            return errs;
        }
        if t == "integer" {
            if let Some(min) = s.get("minimum").and_then(Value::as_f64) {
                if v.as_f64().unwrap_or(0.0) < min {
                    errs.push(format!("{at}: {v} below minimum {min}"));
                }
            }
        }
    }
    if let Some(obj) = v.as_object() {
        if let Some(req) = s.get("required").and_then(Value::as_array) {
            for r in req {
                let r = r.as_str().unwrap();
                if !obj.contains_key(r) {
                    errs.push(format!("{at}: missing required field `{r}`"));
                }
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (k, val) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(ps) => errs.extend(validate(ps, val, &format!("{at}.{k}"))),
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => errs.push(format!("{at}: unexpected field `{k}`")),
                    Some(ap @ Value::Object(_)) => errs.extend(validate(ap, val, &format!("{at}.{k}"))),
                    _ => {}
                },
            }
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, item) in arr.iter().enumerate() {
            errs.extend(validate(items, item, &format!("{at}[{i}]")));
        }
    }
    errs
}

/// Panics unless `body` matches the schema goose documents for `method path` → `status`.
/// `path` is the OpenAPI path template, e.g. `/config/extensions/{name}`.
pub fn check(method: &str, path: &str, status: u16, body: &Value) {
    let op = &spec()["paths"][path][method.to_ascii_lowercase()];
    assert!(op.is_object(), "contract: goose-openapi has no {method} {path}");
    let resp = &op["responses"][status.to_string()];
    assert!(resp.is_object(), "contract: goose documents no {status} for {method} {path}");
    let content = &resp["content"];
    let schema = content["application/json"]["schema"].as_object().or(content["text/plain"]["schema"].as_object());
    let Some(schema) = schema else {
        return; // no body documented (e.g. bare 404/500): any body is a superset
    };
    let errs = validate(&Value::Object(schema.clone()), body, "$");
    assert!(
        errs.is_empty(),
        "contract: {method} {path} {status} does not match goose's schema:\n{}\nbody: {body}",
        errs.join("\n")
    );
}

/// `check` for a whole response: the status must be one goose documents for the route, and a
/// body goose documents (JSON, or text/plain as a string) must match its schema.
pub fn check_resp(method: &str, path: &str, r: &crate::support::Resp) {
    let ct = r.header("content-type").unwrap_or("");
    let body = if ct.starts_with("application/json") { r.json() } else { Value::String(r.text()) };
    check(method, path, r.status, &body);
}

#[test]
fn validator_catches_mistakes() {
    let schema = serde_json::json!({"$ref": "#/components/schemas/ExtensionResponse"});
    let good = serde_json::json!({"extensions":[{"enabled":true,"type":"stdio","name":"x","description":"","cmd":"c","args":[]}],"warnings":[]});
    assert!(validate(&schema, &good, "$").is_empty());
    let bad =
        serde_json::json!({"extensions":[{"enabled":"yes","type":"stdio","name":"x","description":"","cmd":"c"}]});
    let errs = validate(&schema, &bad, "$");
    assert!(!errs.is_empty());
}

/// `ExtensionConfig` writes every kind byte for byte as it did when it was seven serde
/// variants (tests/contract/extension_configs.json was produced by that code).
#[test]
fn extension_configs_keep_their_bytes() {
    use gosling::extensions::config::{ExtensionConfig, ExtensionEntry};
    let p = crate::support::manifest_dir().join("tests/contract/extension_configs.json");
    let fixtures: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    assert!(fixtures.len() >= 7, "one fixture per kind at least");
    for f in &fixtures {
        let input = &f["input"];
        let c = ExtensionConfig::from_value(input.clone()).unwrap_or_else(|e| panic!("{input}: {e}"));
        assert_eq!(serde_json::to_string(&c).unwrap(), f["config"].as_str().unwrap(), "config of {input}");
        assert_eq!(c.to_string(), f["display"].as_str().unwrap(), "Display of {input}");
        let mut e = input.clone();
        e["enabled"] = Value::Bool(true);
        let entry: ExtensionEntry = serde_json::from_value(e).unwrap();
        assert_eq!(serde_json::to_string(&entry).unwrap(), f["entry"].as_str().unwrap(), "entry of {input}");
        // And what it wrote reads back to the same config.
        let again = ExtensionConfig::from_value(serde_json::from_str(f["config"].as_str().unwrap()).unwrap()).unwrap();
        assert_eq!(again, c, "{input}");
    }
}
