//! Reading and writing a JSON object field by field: the shared pieces of the hand-written
//! serde of `mcp_types` and `store::message` (goose's messages). Reading takes a field out of
//! the object only when its value has the expected shape, so whatever is left is the `extra`
//! written back after the known fields; nothing a peer sent is lost. Pure; uses no other module.

use serde_json::{Map, Value};

/// Sets `key` to `v`.
pub fn put(m: &mut Map<String, Value>, key: &str, v: impl Into<Value>) {
    put_value(m, key, v.into())
}

// The map's hashing is inlined where its methods are called: one copy each (not one per field)
// keeps the codecs small.
#[inline(never)]
fn put_value(m: &mut Map<String, Value>, key: &str, v: Value) {
    m.insert(key.to_string(), v);
}

/// Sets `key` to the string, when there is one.
pub fn put_str(m: &mut Map<String, Value>, key: &str, v: &Option<String>) {
    if let Some(s) = v {
        put(m, key, s.as_str());
    }
}

/// Sets `_meta`, when there is one.
pub fn put_meta(m: &mut Map<String, Value>, meta: &Option<Map<String, Value>>) {
    if let Some(meta) = meta {
        put(m, "_meta", Value::Object(meta.clone()));
    }
}

/// Sets `key` to the array of `items`, each written by `to`.
pub fn put_list<T>(m: &mut Map<String, Value>, key: &str, items: &[T], to: fn(&T) -> Value) {
    put(m, key, Value::Array(items.iter().map(to).collect()));
}

/// `m` with the keys of `extra` it does not have, after its own: the object written back.
pub fn with_extra(mut m: Map<String, Value>, extra: &Map<String, Value>) -> Value {
    for (k, v) in extra {
        m.entry(k.as_str()).or_insert_with(|| v.clone());
    }
    Value::Object(m)
}

/// Removes `key` when its value passes `fits`; a value that does not stays (in what becomes
/// `extra`), except an explicit `null`, which is taken for absent and removed.
#[inline(never)]
pub fn take_if(m: &mut Map<String, Value>, key: &str, fits: fn(&Value) -> bool) -> Option<Value> {
    match m.get(key) {
        Some(v) if fits(v) => m.shift_remove(key),
        Some(Value::Null) => {
            m.shift_remove(key);
            None
        }
        _ => None,
    }
}

pub fn take_string(m: &mut Map<String, Value>, key: &str) -> Option<String> {
    match take_if(m, key, Value::is_string) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

pub fn take_bool(m: &mut Map<String, Value>, key: &str) -> Option<bool> {
    take_if(m, key, Value::is_boolean).and_then(|v| v.as_bool())
}

pub fn take_object(m: &mut Map<String, Value>, key: &str) -> Option<Map<String, Value>> {
    match take_if(m, key, Value::is_object) {
        Some(Value::Object(o)) => Some(o),
        _ => None,
    }
}

/// The array at `key`, each item read by `from`, when every item passes `fits` (else the
/// array stays, in what becomes `extra`; a `null` is removed as by `take_if`).
pub fn take_list<T>(
    m: &mut Map<String, Value>,
    key: &str,
    fits: fn(&Value) -> bool,
    from: fn(Value) -> T,
) -> Option<Vec<T>> {
    if !m.get(key).and_then(Value::as_array).is_some_and(|a| a.iter().all(fits)) {
        take_if(m, key, |_| false);
        return None;
    }
    match m.shift_remove(key) {
        Some(Value::Array(a)) => Some(a.into_iter().map(from).collect()),
        _ => None,
    }
}

/// Whether `v` is an object whose `keys` all hold strings.
pub fn has_strings(v: &Value, keys: &[&str]) -> bool {
    keys.iter().all(|k| v.get(k).is_some_and(Value::is_string))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_field_of_another_shape_stays_and_a_null_goes() {
        let mut m = map(json!({"a": 1, "b": null, "c": "x"}));
        assert_eq!(take_string(&mut m, "a"), None);
        assert_eq!(take_string(&mut m, "b"), None);
        assert_eq!(take_string(&mut m, "c").as_deref(), Some("x"));
        assert_eq!(Value::Object(m), json!({"a": 1}));
    }

    #[test]
    fn a_list_is_read_only_when_every_item_fits() {
        let mut m = map(json!({"ok": ["a", "b"], "mixed": ["a", 1], "gone": null}));
        let s = |v: Value| v.as_str().unwrap_or_default().to_string();
        assert_eq!(take_list(&mut m, "ok", Value::is_string, s), Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(take_list(&mut m, "mixed", Value::is_string, s), None);
        assert_eq!(take_list(&mut m, "gone", Value::is_string, s), None);
        assert_eq!(with_extra(Map::new(), &m), json!({"mixed": ["a", 1]}));
    }

    #[test]
    fn written_fields_come_before_the_extra_and_win_over_it() {
        let mut m = Map::new();
        put(&mut m, "name", "n");
        put_str(&mut m, "title", &None);
        put_list(&mut m, "ids", &[1u64, 2], |n| Value::from(*n));
        let extra = map(json!({"name": "old", "z": true}));
        assert_eq!(serde_json::to_string(&with_extra(m, &extra)).unwrap(), r#"{"name":"n","ids":[1,2],"z":true}"#);
    }
}
