//! Small borrowed pieces for writing request bodies straight to bytes (`openai.rs`,
//! `anthropic.rs`): the conversation is serialized from the `ChatRequest` it is in, with no
//! `serde_json::Value` tree built and copied on the way.

use serde::ser::{Serialize, SerializeMap, Serializer};

/// Strings joined with a separator, written as one JSON string without joining them first.
pub(crate) struct Join<'a>(pub &'a [&'a str], pub &'static str);

impl std::fmt::Display for Join<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, s) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(self.1)?;
            }
            f.write_str(s)?;
        }
        Ok(())
    }
}

impl Serialize for Join<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A value's compact JSON text as a JSON string (what `value.to_string()` would give),
/// written without the intermediate `String`.
pub(crate) struct JsonText<'a>(pub &'a serde_json::Value);

impl Serialize for JsonText<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self.0)
    }
}

/// `{"type": "text", "text": …}`.
pub(crate) struct TextBlock<T>(pub T);

impl<T: Serialize> Serialize for TextBlock<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("type", "text")?;
        m.serialize_entry("text", &self.0)?;
        m.end()
    }
}
