//! MCP data as Rust types (spec revisions 2025-06-18 and 2025-11-25): a server's `Tool`, the
//! `CallToolResult` of `tools/call` and its `ContentBlock`s; its `Resource`s and
//! `ResourceTemplate`s, the `ReadResourceResult` of `resources/read` and its `ResourceContents`;
//! its `Prompt`s and the `GetPromptResult` of `prompts/get`. The MCP client (`mcp::Client`)
//! reads them off the wire and everything above it (extensions, agent, acp, http) passes them
//! around; goose's and ACP's JSON are made from them at the edges.
//!
//! Lossless: gosling forwards what a server sent, so nothing is dropped. Keys a type does not
//! interpret are kept in `extra` (in the order they came) and written back after the known ones;
//! a known key whose value is not of the spec's type is kept in `extra` as it came (the typed
//! field stays `None`); a content block of a kind gosling does not know, or of a known kind
//! without the spec's required fields, is kept whole as `ContentBlock::Other` (a resource's
//! contents as `ResourceContents::Other`); a list of icons, prompt arguments or prompt messages
//! with an item not of the spec's shape stays in `extra` whole. Equivalent, not identical: keys
//! come back in the spec's order, an explicit `null` of an optional field comes back absent, and
//! a result without `content` (`contents`, `messages`) comes back with an empty one. The
//! `annotations` of a content block, resource or template, and a content block's `_meta`, stay in
//! its `extra`.
//!
//! Schemas (`inputSchema`, `outputSchema`) and `structuredContent` stay `Value`: they are JSON
//! Schema and whatever JSON the server declares. The codec goes through `Value` by hand rather
//! than derived visitors, as `store::message` does (one copy of the code, binary size).

use crate::fields::{
    has_strings, put, put_list, put_meta, put_str, take_bool, take_if, take_list, take_object, take_string, with_extra,
};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// Keys a type does not interpret, in the order they came.
pub type Extra = Map<String, Value>;

/// An MCP `Tool` as `tools/list` returns it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tool {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// JSON Schema of the arguments (`Value::Null` when the server sent none).
    pub input_schema: Value,
    /// JSON Schema of `structuredContent`, when the tool declares one.
    pub output_schema: Option<Value>,
    pub annotations: Option<ToolAnnotations>,
    pub icons: Option<Vec<Icon>>,
    pub execution: Option<ToolExecution>,
    /// `_meta`.
    pub meta: Option<Map<String, Value>>,
    pub extra: Extra,
}

/// A tool's behaviour hints (`annotations`): untrusted unless the server is trusted.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolAnnotations {
    pub title: Option<String>,
    pub read_only_hint: Option<bool>,
    pub destructive_hint: Option<bool>,
    pub idempotent_hint: Option<bool>,
    pub open_world_hint: Option<bool>,
    pub extra: Extra,
}

/// An icon of a tool (or of a resource link).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Icon {
    pub src: String,
    pub mime_type: Option<String>,
    pub sizes: Option<Vec<String>>,
    /// `light` or `dark`.
    pub theme: Option<String>,
    pub extra: Extra,
}

/// How a tool runs (`execution`, 2025-11-25): `taskSupport` is `forbidden`, `optional` or
/// `required`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolExecution {
    pub task_support: Option<String>,
    pub extra: Extra,
}

/// The result of `tools/call`. An `isError` result is the tool's failure, for the model to see.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CallToolResult {
    pub content: Vec<ContentBlock>,
    pub structured_content: Option<Value>,
    /// As the server sent it: `None` when it left `isError` out (meaning false).
    pub is_error: Option<bool>,
    /// `_meta`.
    pub meta: Option<Map<String, Value>>,
    pub extra: Extra,
}

/// One block of a tool result's `content`.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    Text(TextContent),
    Image(Media),
    Audio(Media),
    ResourceLink(ResourceLink),
    /// An embedded resource (`type: "resource"`).
    Resource(EmbeddedResource),
    /// A block of another kind (a newer server's), or of a known kind without its required
    /// fields: kept whole, forwarded unchanged.
    Other(Value),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct TextContent {
    pub text: String,
    pub extra: Extra,
}

/// An image or audio block: base64 `data` of `mime_type`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Media {
    pub data: String,
    pub mime_type: String,
    pub extra: Extra,
}

/// A link to a resource the client may read (`type: "resource_link"`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourceLink {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub extra: Extra,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EmbeddedResource {
    pub resource: ResourceContents,
    pub extra: Extra,
}

/// A resource's contents (embedded in a content block, or read by `resources/read`).
#[derive(Debug, Clone, PartialEq)]
pub enum ResourceContents {
    /// `TextResourceContents`: a string `text`.
    Text(TextResourceContents),
    /// `BlobResourceContents`: base64 `blob`.
    Blob(BlobResourceContents),
    /// Contents of another shape (no string `uri`, or neither a string `text` nor `blob`): kept
    /// whole, forwarded unchanged.
    Other(Value),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct TextResourceContents {
    pub uri: String,
    pub mime_type: Option<String>,
    pub text: String,
    /// `_meta`.
    pub meta: Option<Map<String, Value>>,
    pub extra: Extra,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct BlobResourceContents {
    pub uri: String,
    pub mime_type: Option<String>,
    /// Base64.
    pub blob: String,
    /// `_meta`.
    pub meta: Option<Map<String, Value>>,
    pub extra: Extra,
}

/// A resource as `resources/list` returns it. Its `annotations` stay in `extra`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Resource {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    /// The size in bytes, when the server knows it.
    pub size: Option<u64>,
    pub icons: Option<Vec<Icon>>,
    /// `_meta`.
    pub meta: Option<Map<String, Value>>,
    pub extra: Extra,
}

/// A template of resource URIs (RFC 6570) as `resources/templates/list` returns it. Its
/// `annotations` stay in `extra`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResourceTemplate {
    pub uri_template: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
    pub icons: Option<Vec<Icon>>,
    /// `_meta`.
    pub meta: Option<Map<String, Value>>,
    pub extra: Extra,
}

/// The result of `resources/read`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ReadResourceResult {
    pub contents: Vec<ResourceContents>,
    /// `_meta`.
    pub meta: Option<Map<String, Value>>,
    pub extra: Extra,
}

/// A prompt (template) as `prompts/list` returns it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prompt {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    /// As the server sent them: `None` when it left `arguments` out.
    pub arguments: Option<Vec<PromptArgument>>,
    pub icons: Option<Vec<Icon>>,
    /// `_meta`.
    pub meta: Option<Map<String, Value>>,
    pub extra: Extra,
}

/// An argument a prompt takes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PromptArgument {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub required: Option<bool>,
    pub extra: Extra,
}

/// The result of `prompts/get`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GetPromptResult {
    pub description: Option<String>,
    pub messages: Vec<PromptMessage>,
    /// `_meta`.
    pub meta: Option<Map<String, Value>>,
    pub extra: Extra,
}

/// One message of a prompt: `role` (`user` or `assistant`) and one content block.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptMessage {
    pub role: String,
    pub content: ContentBlock,
    pub extra: Extra,
}

impl Tool {
    /// A tool from its JSON; `Err` (the value back) when it is not an object with a string
    /// `name`, which no tool can be called without.
    pub fn from_value(v: Value) -> Result<Tool, Value> {
        let Value::Object(mut m) = v else { return Err(v) };
        let Some(name) = take_string(&mut m, "name") else { return Err(Value::Object(m)) };
        Ok(Tool {
            name,
            title: take_string(&mut m, "title"),
            description: take_string(&mut m, "description"),
            input_schema: take_if(&mut m, "inputSchema", |v| !v.is_null()).unwrap_or(Value::Null),
            output_schema: take_if(&mut m, "outputSchema", |v| !v.is_null()),
            annotations: take_object(&mut m, "annotations").map(ToolAnnotations::from_map),
            icons: take_list(&mut m, "icons", icon_fits, Icon::from_value),
            execution: take_object(&mut m, "execution")
                .map(|mut e| ToolExecution { task_support: take_string(&mut e, "taskSupport"), extra: e }),
            meta: take_object(&mut m, "_meta"),
            extra: m,
        })
    }

    /// The tool's JSON.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        put(&mut m, "name", Value::String(self.name.clone()));
        put_str(&mut m, "title", &self.title);
        put_str(&mut m, "description", &self.description);
        if !self.input_schema.is_null() {
            put(&mut m, "inputSchema", self.input_schema.clone());
        }
        if let Some(s) = &self.output_schema {
            put(&mut m, "outputSchema", s.clone());
        }
        if let Some(a) = &self.annotations {
            put(&mut m, "annotations", a.to_value());
        }
        put_icons(&mut m, &self.icons);
        if let Some(e) = &self.execution {
            let mut x = Map::new();
            put_str(&mut x, "taskSupport", &e.task_support);
            put(&mut m, "execution", with_extra(x, &e.extra));
        }
        put_meta(&mut m, &self.meta);
        with_extra(m, &self.extra)
    }

    /// The tool's `readOnlyHint` (false when it gives none).
    pub fn read_only(&self) -> bool {
        self.annotations.as_ref().and_then(|a| a.read_only_hint).unwrap_or(false)
    }

    /// True when the tool can only run as a task (`execution.taskSupport: "required"`).
    pub fn task_only(&self) -> bool {
        self.execution.as_ref().and_then(|e| e.task_support.as_deref()) == Some("required")
    }
}

impl ToolAnnotations {
    fn from_map(mut m: Map<String, Value>) -> ToolAnnotations {
        ToolAnnotations {
            title: take_string(&mut m, "title"),
            read_only_hint: take_bool(&mut m, "readOnlyHint"),
            destructive_hint: take_bool(&mut m, "destructiveHint"),
            idempotent_hint: take_bool(&mut m, "idempotentHint"),
            open_world_hint: take_bool(&mut m, "openWorldHint"),
            extra: m,
        }
    }

    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        put_str(&mut m, "title", &self.title);
        for (k, b) in [
            ("readOnlyHint", self.read_only_hint),
            ("destructiveHint", self.destructive_hint),
            ("idempotentHint", self.idempotent_hint),
            ("openWorldHint", self.open_world_hint),
        ] {
            if let Some(b) = b {
                put(&mut m, k, Value::Bool(b));
            }
        }
        with_extra(m, &self.extra)
    }
}

/// An icon: an object with a string `src`.
fn icon_fits(v: &Value) -> bool {
    v.get("src").is_some_and(Value::is_string)
}

fn put_icons(m: &mut Map<String, Value>, icons: &Option<Vec<Icon>>) {
    if let Some(icons) = icons {
        put_list(m, "icons", icons, Icon::to_value);
    }
}

impl Icon {
    /// An icon from JSON checked by `icon_fits`.
    fn from_value(v: Value) -> Icon {
        let Value::Object(mut m) = v else { return Icon::default() };
        Icon {
            src: take_string(&mut m, "src").unwrap_or_default(),
            mime_type: take_string(&mut m, "mimeType"),
            sizes: take_list(&mut m, "sizes", Value::is_string, |s| match s {
                Value::String(s) => s,
                _ => String::new(),
            }),
            theme: take_string(&mut m, "theme"),
            extra: m,
        }
    }

    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        put(&mut m, "src", Value::String(self.src.clone()));
        put_str(&mut m, "mimeType", &self.mime_type);
        if let Some(s) = &self.sizes {
            put_list(&mut m, "sizes", s, |s| Value::String(s.clone()));
        }
        put_str(&mut m, "theme", &self.theme);
        with_extra(m, &self.extra)
    }
}

impl CallToolResult {
    /// A result of one text block; `is_error` says whether it is the tool's failure.
    pub fn text(text: impl Into<String>, is_error: bool) -> CallToolResult {
        CallToolResult { content: vec![ContentBlock::text(text)], is_error: Some(is_error), ..Default::default() }
    }

    /// A result from its JSON; `Err` (the value back) when it is not an object.
    pub fn from_value(v: Value) -> Result<CallToolResult, Value> {
        let Value::Object(mut m) = v else { return Err(v) };
        let content = take_list(&mut m, "content", |_| true, ContentBlock::from_value).unwrap_or_default();
        Ok(CallToolResult {
            content,
            structured_content: take_if(&mut m, "structuredContent", |v| !v.is_null()),
            is_error: take_bool(&mut m, "isError"),
            meta: take_object(&mut m, "_meta"),
            extra: m,
        })
    }

    /// The result's JSON as MCP has it (`isError` only when the server sent it).
    pub fn to_value(&self) -> Value {
        self.encode(self.is_error)
    }

    /// The result's JSON with `isError` always written (false when the server left it out), for
    /// the formats that require it (goose's `CallToolResponse`).
    pub fn to_value_with_is_error(&self) -> Value {
        self.encode(Some(self.is_error()))
    }

    fn encode(&self, is_error: Option<bool>) -> Value {
        let mut m = Map::new();
        // A `content` that was not an array is still in `extra`: it is written back instead.
        if !self.extra.contains_key("content") {
            put_list(&mut m, "content", &self.content, ContentBlock::to_value);
        }
        if let Some(s) = &self.structured_content {
            put(&mut m, "structuredContent", s.clone());
        }
        if let Some(e) = is_error {
            put(&mut m, "isError", Value::Bool(e));
        }
        put_meta(&mut m, &self.meta);
        with_extra(m, &self.extra)
    }

    /// Whether the tool failed (`isError`, false when absent).
    pub fn is_error(&self) -> bool {
        self.is_error.unwrap_or(false)
    }
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text(TextContent { text: text.into(), extra: Extra::new() })
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text(t) => Some(&t.text),
            _ => None,
        }
    }

    /// A block from its JSON: typed when its kind and shape are the spec's, `Other` otherwise.
    pub fn from_value(v: Value) -> ContentBlock {
        let Value::Object(mut m) = v else { return ContentBlock::Other(v) };
        let is_str = |m: &Map<String, Value>, k: &str| m.get(k).is_some_and(Value::is_string);
        let media = |m: &mut Map<String, Value>| Media {
            data: take_string(m, "data").unwrap_or_default(),
            mime_type: take_string(m, "mimeType").unwrap_or_default(),
            extra: Extra::new(),
        };
        let kind = m.get("type").and_then(Value::as_str).unwrap_or("").to_string();
        let mut block = match kind.as_str() {
            "text" if is_str(&m, "text") => ContentBlock::Text(TextContent {
                text: take_string(&mut m, "text").unwrap_or_default(),
                extra: Extra::new(),
            }),
            "image" if is_str(&m, "data") && is_str(&m, "mimeType") => ContentBlock::Image(media(&mut m)),
            "audio" if is_str(&m, "data") && is_str(&m, "mimeType") => ContentBlock::Audio(media(&mut m)),
            "resource_link" if is_str(&m, "uri") && is_str(&m, "name") => ContentBlock::ResourceLink(ResourceLink {
                uri: take_string(&mut m, "uri").unwrap_or_default(),
                name: take_string(&mut m, "name").unwrap_or_default(),
                title: take_string(&mut m, "title"),
                description: take_string(&mut m, "description"),
                mime_type: take_string(&mut m, "mimeType"),
                extra: Extra::new(),
            }),
            "resource" if m.get("resource").is_some_and(|r| r.get("uri").is_some_and(Value::is_string)) => {
                let resource = ResourceContents::from_value(m.shift_remove("resource").unwrap_or_default());
                ContentBlock::Resource(EmbeddedResource { resource, extra: Extra::new() })
            }
            _ => return ContentBlock::Other(Value::Object(m)),
        };
        m.shift_remove("type");
        match &mut block {
            ContentBlock::Text(TextContent { extra, .. })
            | ContentBlock::Image(Media { extra, .. })
            | ContentBlock::Audio(Media { extra, .. })
            | ContentBlock::ResourceLink(ResourceLink { extra, .. })
            | ContentBlock::Resource(EmbeddedResource { extra, .. }) => *extra = m,
            ContentBlock::Other(_) => {}
        }
        block
    }

    /// The block's JSON.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        let kind = |m: &mut Map<String, Value>, k: &str| put(m, "type", Value::String(k.to_string()));
        let extra = match self {
            ContentBlock::Other(v) => return v.clone(),
            ContentBlock::Text(t) => {
                kind(&mut m, "text");
                put(&mut m, "text", Value::String(t.text.clone()));
                &t.extra
            }
            ContentBlock::Image(i) | ContentBlock::Audio(i) => {
                kind(&mut m, if matches!(self, ContentBlock::Image(_)) { "image" } else { "audio" });
                put(&mut m, "data", Value::String(i.data.clone()));
                put(&mut m, "mimeType", Value::String(i.mime_type.clone()));
                &i.extra
            }
            ContentBlock::ResourceLink(l) => {
                kind(&mut m, "resource_link");
                put(&mut m, "uri", Value::String(l.uri.clone()));
                put(&mut m, "name", Value::String(l.name.clone()));
                put_str(&mut m, "title", &l.title);
                put_str(&mut m, "description", &l.description);
                put_str(&mut m, "mimeType", &l.mime_type);
                &l.extra
            }
            ContentBlock::Resource(e) => {
                kind(&mut m, "resource");
                put(&mut m, "resource", e.resource.to_value());
                &e.extra
            }
        };
        with_extra(m, extra)
    }
}

impl ResourceContents {
    /// Contents from their JSON: `Text` when `text` is a string, else `Blob` when `blob` is, both
    /// with a string `uri`; `Other` otherwise.
    pub fn from_value(v: Value) -> ResourceContents {
        let fits = |k: &str| v.get("uri").is_some_and(Value::is_string) && v.get(k).is_some_and(Value::is_string);
        let text = fits("text");
        if !text && !fits("blob") {
            return ResourceContents::Other(v);
        }
        let Value::Object(mut m) = v else { unreachable!("checked by fits") };
        let uri = take_string(&mut m, "uri").unwrap_or_default();
        let mime_type = take_string(&mut m, "mimeType");
        if text {
            let text = take_string(&mut m, "text").unwrap_or_default();
            let meta = take_object(&mut m, "_meta");
            ResourceContents::Text(TextResourceContents { uri, mime_type, text, meta, extra: m })
        } else {
            let blob = take_string(&mut m, "blob").unwrap_or_default();
            let meta = take_object(&mut m, "_meta");
            ResourceContents::Blob(BlobResourceContents { uri, mime_type, blob, meta, extra: m })
        }
    }

    /// The contents' JSON.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        let (uri, mime_type, (key, body), meta, extra) = match self {
            ResourceContents::Other(v) => return v.clone(),
            ResourceContents::Text(t) => (&t.uri, &t.mime_type, ("text", &t.text), &t.meta, &t.extra),
            ResourceContents::Blob(b) => (&b.uri, &b.mime_type, ("blob", &b.blob), &b.meta, &b.extra),
        };
        put(&mut m, "uri", Value::String(uri.clone()));
        put_str(&mut m, "mimeType", mime_type);
        put(&mut m, key, Value::String(body.clone()));
        put_meta(&mut m, meta);
        with_extra(m, extra)
    }

    /// The `uri` (`None` for `Other` contents without a string one).
    pub fn uri(&self) -> Option<&str> {
        match self {
            ResourceContents::Text(t) => Some(&t.uri),
            ResourceContents::Blob(b) => Some(&b.uri),
            ResourceContents::Other(v) => v.get("uri").and_then(Value::as_str),
        }
    }

    /// The text of text contents.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ResourceContents::Text(t) => Some(&t.text),
            _ => None,
        }
    }
}

impl Resource {
    /// A resource from its JSON; `Err` (the value back) when it is not an object with a string
    /// `uri` and `name`.
    pub fn from_value(v: Value) -> Result<Resource, Value> {
        if !has_strings(&v, &["uri", "name"]) {
            return Err(v);
        }
        let Value::Object(mut m) = v else { return Err(v) };
        Ok(Resource {
            uri: take_string(&mut m, "uri").unwrap_or_default(),
            name: take_string(&mut m, "name").unwrap_or_default(),
            title: take_string(&mut m, "title"),
            description: take_string(&mut m, "description"),
            mime_type: take_string(&mut m, "mimeType"),
            size: take_if(&mut m, "size", Value::is_u64).and_then(|v| v.as_u64()),
            icons: take_list(&mut m, "icons", icon_fits, Icon::from_value),
            meta: take_object(&mut m, "_meta"),
            extra: m,
        })
    }

    /// The resource's JSON.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        put(&mut m, "uri", Value::String(self.uri.clone()));
        put(&mut m, "name", Value::String(self.name.clone()));
        put_str(&mut m, "title", &self.title);
        put_str(&mut m, "description", &self.description);
        put_str(&mut m, "mimeType", &self.mime_type);
        if let Some(n) = self.size {
            put(&mut m, "size", Value::from(n));
        }
        put_icons(&mut m, &self.icons);
        put_meta(&mut m, &self.meta);
        with_extra(m, &self.extra)
    }
}

impl ResourceTemplate {
    /// A template from its JSON; `Err` (the value back) when it is not an object with a string
    /// `uriTemplate` and `name`.
    pub fn from_value(v: Value) -> Result<ResourceTemplate, Value> {
        if !has_strings(&v, &["uriTemplate", "name"]) {
            return Err(v);
        }
        let Value::Object(mut m) = v else { return Err(v) };
        Ok(ResourceTemplate {
            uri_template: take_string(&mut m, "uriTemplate").unwrap_or_default(),
            name: take_string(&mut m, "name").unwrap_or_default(),
            title: take_string(&mut m, "title"),
            description: take_string(&mut m, "description"),
            mime_type: take_string(&mut m, "mimeType"),
            icons: take_list(&mut m, "icons", icon_fits, Icon::from_value),
            meta: take_object(&mut m, "_meta"),
            extra: m,
        })
    }

    /// The template's JSON.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        put(&mut m, "uriTemplate", Value::String(self.uri_template.clone()));
        put(&mut m, "name", Value::String(self.name.clone()));
        put_str(&mut m, "title", &self.title);
        put_str(&mut m, "description", &self.description);
        put_str(&mut m, "mimeType", &self.mime_type);
        put_icons(&mut m, &self.icons);
        put_meta(&mut m, &self.meta);
        with_extra(m, &self.extra)
    }
}

impl ReadResourceResult {
    /// A result from its JSON; `Err` (the value back) when it is not an object.
    pub fn from_value(v: Value) -> Result<ReadResourceResult, Value> {
        let Value::Object(mut m) = v else { return Err(v) };
        let contents = take_list(&mut m, "contents", |_| true, ResourceContents::from_value).unwrap_or_default();
        Ok(ReadResourceResult { contents, meta: take_object(&mut m, "_meta"), extra: m })
    }

    /// The result's JSON.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        // A `contents` that was not an array is still in `extra`: it is written back instead.
        if !self.extra.contains_key("contents") {
            put_list(&mut m, "contents", &self.contents, ResourceContents::to_value);
        }
        put_meta(&mut m, &self.meta);
        with_extra(m, &self.extra)
    }
}

/// A prompt argument: an object with a string `name`.
fn argument_fits(v: &Value) -> bool {
    v.get("name").is_some_and(Value::is_string)
}

/// A prompt message: an object with a string `role` and a `content`.
fn message_fits(v: &Value) -> bool {
    v.get("role").is_some_and(Value::is_string) && v.get("content").is_some_and(|c| !c.is_null())
}

impl Prompt {
    /// A prompt from its JSON; `Err` (the value back) when it is not an object with a string
    /// `name`.
    pub fn from_value(v: Value) -> Result<Prompt, Value> {
        if !has_strings(&v, &["name"]) {
            return Err(v);
        }
        let Value::Object(mut m) = v else { return Err(v) };
        Ok(Prompt {
            name: take_string(&mut m, "name").unwrap_or_default(),
            title: take_string(&mut m, "title"),
            description: take_string(&mut m, "description"),
            arguments: take_list(&mut m, "arguments", argument_fits, PromptArgument::from_value),
            icons: take_list(&mut m, "icons", icon_fits, Icon::from_value),
            meta: take_object(&mut m, "_meta"),
            extra: m,
        })
    }

    /// The prompt's JSON.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        put(&mut m, "name", Value::String(self.name.clone()));
        put_str(&mut m, "title", &self.title);
        put_str(&mut m, "description", &self.description);
        if let Some(a) = &self.arguments {
            put_list(&mut m, "arguments", a, PromptArgument::to_value);
        }
        put_icons(&mut m, &self.icons);
        put_meta(&mut m, &self.meta);
        with_extra(m, &self.extra)
    }
}

impl PromptArgument {
    /// An argument from JSON checked by `argument_fits`.
    fn from_value(v: Value) -> PromptArgument {
        let Value::Object(mut m) = v else { return PromptArgument::default() };
        PromptArgument {
            name: take_string(&mut m, "name").unwrap_or_default(),
            title: take_string(&mut m, "title"),
            description: take_string(&mut m, "description"),
            required: take_bool(&mut m, "required"),
            extra: m,
        }
    }

    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        put(&mut m, "name", Value::String(self.name.clone()));
        put_str(&mut m, "title", &self.title);
        put_str(&mut m, "description", &self.description);
        if let Some(r) = self.required {
            put(&mut m, "required", Value::Bool(r));
        }
        with_extra(m, &self.extra)
    }
}

impl GetPromptResult {
    /// A result from its JSON; `Err` (the value back) when it is not an object.
    pub fn from_value(v: Value) -> Result<GetPromptResult, Value> {
        let Value::Object(mut m) = v else { return Err(v) };
        let description = take_string(&mut m, "description");
        let messages = take_list(&mut m, "messages", message_fits, PromptMessage::from_value).unwrap_or_default();
        Ok(GetPromptResult { description, messages, meta: take_object(&mut m, "_meta"), extra: m })
    }

    /// The result's JSON.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        put_str(&mut m, "description", &self.description);
        // `messages` not of the spec's shape are still in `extra`: they are written back instead.
        if !self.extra.contains_key("messages") {
            put_list(&mut m, "messages", &self.messages, PromptMessage::to_value);
        }
        put_meta(&mut m, &self.meta);
        with_extra(m, &self.extra)
    }
}

impl PromptMessage {
    /// A message from JSON checked by `message_fits`.
    fn from_value(v: Value) -> PromptMessage {
        let Value::Object(mut m) = v else { unreachable!("checked by message_fits") };
        PromptMessage {
            role: take_string(&mut m, "role").unwrap_or_default(),
            content: ContentBlock::from_value(m.shift_remove("content").unwrap_or_default()),
            extra: m,
        }
    }

    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        put(&mut m, "role", Value::String(self.role.clone()));
        put(&mut m, "content", self.content.to_value());
        with_extra(m, &self.extra)
    }
}

/// `Display` (the JSON text, for messages and logs) and serde through `Value` for a type with
/// `from_value` (returning `Result`, `Err` meaning "not of this type": `what` says what it is)
/// and `to_value`.
macro_rules! through_value {
    ($($t:ident: $what:literal),* $(,)?) => {$(
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.to_value().fmt(f)
            }
        }

        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.to_value().serialize(s)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                $t::from_value(Value::deserialize(d)?).map_err(|_| serde::de::Error::custom($what))
            }
        }
    )*};
}

through_value! {
    Tool: "an MCP tool is an object with a string `name`",
    CallToolResult: "an MCP CallToolResult is an object",
    Resource: "an MCP resource is an object with a string `uri` and `name`",
    ResourceTemplate: "an MCP resource template is an object with a string `uriTemplate` and `name`",
    ReadResourceResult: "an MCP ReadResourceResult is an object",
    Prompt: "an MCP prompt is an object with a string `name`",
    GetPromptResult: "an MCP GetPromptResult is an object",
}

/// Serde through `Value` for a type whose `from_value` takes anything (what it does not know
/// is kept as `Other`).
macro_rules! through_value_total {
    ($($t:ident),* $(,)?) => {$(
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                self.to_value().serialize(s)
            }
        }

        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                Ok($t::from_value(Value::deserialize(d)?))
            }
        }
    )*};
}

through_value_total!(ContentBlock, ResourceContents);

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_with_every_field_round_trips_typed() {
        let v = json!({
            "name": "add", "title": "Add", "description": "adds",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}}},
            "outputSchema": {"type": "object"},
            "annotations": {"title": "Adder", "readOnlyHint": true, "destructiveHint": false,
                "idempotentHint": true, "openWorldHint": false, "x-new-hint": 1},
            "icons": [{"src": "https://example.com/a.png", "mimeType": "image/png", "sizes": ["48x48"], "theme": "dark", "x": 2}],
            "execution": {"taskSupport": "optional", "later": true},
            "_meta": {"k": "v"},
            "x-later-field": [1, 2]
        });
        let t = Tool::from_value(v.clone()).unwrap();
        assert_eq!(t.name, "add");
        assert!(t.read_only());
        assert!(!t.task_only());
        assert_eq!(t.annotations.as_ref().unwrap().extra["x-new-hint"], 1);
        assert_eq!(t.icons.as_ref().unwrap()[0].sizes.as_deref(), Some(&["48x48".to_string()][..]));
        assert_eq!(t.extra["x-later-field"], json!([1, 2]));
        assert_eq!(t.to_value(), v);
        assert_eq!(serde_json::to_value(serde_json::from_value::<Tool>(v.clone()).unwrap()).unwrap(), v);
    }

    #[test]
    fn a_tool_keeps_known_keys_of_another_type_and_needs_a_name() {
        let v = json!({"name": "t", "title": 5, "annotations": "odd", "icons": [{"no": "src"}], "inputSchema": {}});
        let t = Tool::from_value(v.clone()).unwrap();
        assert_eq!((t.title.as_ref(), t.annotations.as_ref(), t.icons.as_ref()), (None, None, None));
        assert_eq!(t.to_value(), v);
        assert!(Tool::from_value(json!({"description": "nameless"})).is_err());
        assert!(Tool::from_value(json!("tool")).is_err());
    }

    #[test]
    fn every_content_kind_round_trips_and_unknown_ones_are_kept_whole() {
        let blocks = json!([
            {"type": "text", "text": "hi", "annotations": {"audience": ["user"], "priority": 1}, "_meta": {"a": 1}},
            {"type": "image", "data": "aGk=", "mimeType": "image/png"},
            {"type": "audio", "data": "aGk=", "mimeType": "audio/wav", "x": 1},
            {"type": "resource_link", "uri": "file:///a", "name": "a", "title": "A", "description": "d",
                "mimeType": "text/plain", "size": 3, "icons": []},
            {"type": "resource", "resource": {"uri": "file:///b", "mimeType": "text/plain", "text": "b", "_meta": {}}},
            {"type": "resource", "resource": {"uri": "file:///c", "blob": "Yw=="}},
            {"type": "hologram", "frames": 3},
            {"type": "text", "text": 7},
            "not an object"
        ]);
        let parsed: Vec<ContentBlock> = serde_json::from_value(blocks.clone()).unwrap();
        let kinds: Vec<&str> = parsed
            .iter()
            .map(|b| match b {
                ContentBlock::Text(_) => "text",
                ContentBlock::Image(_) => "image",
                ContentBlock::Audio(_) => "audio",
                ContentBlock::ResourceLink(_) => "link",
                ContentBlock::Resource(_) => "resource",
                ContentBlock::Other(_) => "other",
            })
            .collect();
        assert_eq!(kinds, ["text", "image", "audio", "link", "resource", "resource", "other", "other", "other"]);
        assert_eq!(parsed[0].as_text(), Some("hi"));
        assert_eq!(serde_json::to_value(&parsed).unwrap(), blocks);
    }

    #[test]
    fn a_result_round_trips_with_is_error_as_sent() {
        for v in [
            json!({"content": [{"type": "text", "text": "3"}], "structuredContent": {"sum": 3}, "isError": false,
                "_meta": {"m": 1}, "x-extra": true}),
            json!({"content": []}),
            json!({"content": [{"type": "text", "text": "no"}], "isError": true}),
            json!({"content": "odd", "toolResult": 1}),
        ] {
            let r = CallToolResult::from_value(v.clone()).unwrap();
            assert_eq!(r.to_value(), v);
        }
        assert!(!CallToolResult::from_value(json!({"content": []})).unwrap().is_error());
        assert_eq!(
            CallToolResult::from_value(json!({"content": [], "x": 1})).unwrap().to_value_with_is_error(),
            json!({"content": [], "isError": false, "x": 1})
        );
        assert_eq!(CallToolResult::from_value(json!({})).unwrap().to_value(), json!({"content": []}));
        // An explicit null of a known key is taken for absent.
        let r = CallToolResult::from_value(
            json!({"content": null, "structuredContent": null, "isError": null, "_meta": null}),
        )
        .unwrap();
        assert_eq!(r.to_value_with_is_error(), json!({"content": [], "isError": false}));
        let t = Tool::from_value(json!({"name": "t", "description": null, "outputSchema": null})).unwrap();
        assert_eq!(t.to_value(), json!({"name": "t"}));
        assert!(CallToolResult::from_value(json!([1])).is_err());
        assert_eq!(
            CallToolResult::text("boom", true).to_value(),
            json!({"content": [{"type": "text", "text": "boom"}], "isError": true})
        );
    }

    #[test]
    fn resources_and_templates_round_trip_typed_and_need_their_required_keys() {
        let v = json!({
            "uri": "ui://app/main", "name": "main", "title": "Main", "description": "the app",
            "mimeType": "text/html;profile=mcp-app", "size": 1024,
            "icons": [{"src": "https://example.com/i.svg"}], "_meta": {"ui": {"csp": {}}},
            "annotations": {"audience": ["user"], "priority": 0.5}, "x-later": 1
        });
        let r = Resource::from_value(v.clone()).unwrap();
        assert_eq!((r.uri.as_str(), r.name.as_str(), r.size), ("ui://app/main", "main", Some(1024)));
        assert_eq!(r.extra["annotations"]["priority"], 0.5);
        assert_eq!(r.to_value(), v);
        assert_eq!(serde_json::to_value(serde_json::from_value::<Resource>(v.clone()).unwrap()).unwrap(), v);
        // A known key of another type stays as it came.
        let odd = json!({"uri": "a://b", "name": "b", "size": -1, "icons": "none", "title": null});
        let r = Resource::from_value(odd).unwrap();
        assert_eq!((r.size, r.icons.as_ref(), r.title.as_ref()), (None, None, None));
        assert_eq!(r.to_value(), json!({"uri": "a://b", "name": "b", "size": -1, "icons": "none"}));
        assert!(Resource::from_value(json!({"uri": "a://b"})).is_err());
        assert!(Resource::from_value(json!({"name": "b", "uri": 1})).is_err());
        assert!(Resource::from_value(json!(["a://b"])).is_err());

        let v = json!({"uriTemplate": "greeting://{name}", "name": "greeting", "mimeType": "text/plain",
            "annotations": {"lastModified": "2025-01-01T00:00:00Z"}, "_meta": {}, "x": [1]});
        let t = ResourceTemplate::from_value(v.clone()).unwrap();
        assert_eq!(t.uri_template, "greeting://{name}");
        assert_eq!(t.to_value(), v);
        assert!(ResourceTemplate::from_value(json!({"uri": "greeting://x", "name": "g"})).is_err());
    }

    #[test]
    fn read_results_keep_unknown_contents_whole() {
        let v = json!({
            "contents": [
                {"uri": "file:///a", "mimeType": "text/plain", "text": "a", "_meta": {"m": 1}, "x": true},
                {"uri": "file:///b", "blob": "Yg=="},
                {"uri": "file:///c", "mimeType": "text/plain"},
                {"text": "no uri"},
                7
            ],
            "_meta": {"k": "v"}, "x-extra": "kept"
        });
        let r = ReadResourceResult::from_value(v.clone()).unwrap();
        let kinds: Vec<&str> = r
            .contents
            .iter()
            .map(|c| match c {
                ResourceContents::Text(_) => "text",
                ResourceContents::Blob(_) => "blob",
                ResourceContents::Other(_) => "other",
            })
            .collect();
        assert_eq!(kinds, ["text", "blob", "other", "other", "other"]);
        assert_eq!((r.contents[0].uri(), r.contents[0].as_text()), (Some("file:///a"), Some("a")));
        assert_eq!((r.contents[2].uri(), r.contents[3].uri()), (Some("file:///c"), None));
        assert_eq!(r.to_value(), v);
        assert_eq!(serde_json::to_value(serde_json::from_value::<ReadResourceResult>(v.clone()).unwrap()).unwrap(), v);
        for v in [json!({"contents": "odd"}), json!({"contents": []})] {
            assert_eq!(ReadResourceResult::from_value(v.clone()).unwrap().to_value(), v);
        }
        assert_eq!(
            ReadResourceResult::from_value(json!({"contents": null})).unwrap().to_value(),
            json!({"contents": []})
        );
        assert!(ReadResourceResult::from_value(json!("contents")).is_err());
        // Text wins when both are there; the blob stays in `extra`.
        let both = json!({"uri": "a://b", "text": "t", "blob": "Yg=="});
        let c = ResourceContents::from_value(both.clone());
        assert_eq!(c.as_text(), Some("t"));
        assert_eq!(c.to_value(), both);
    }

    #[test]
    fn prompts_and_prompt_results_round_trip_typed() {
        let v = json!({
            "name": "review", "title": "Review", "description": "reviews code",
            "arguments": [{"name": "code", "title": "Code", "description": "the code", "required": true, "x": 1},
                {"name": "style"}],
            "icons": [{"src": "data:image/png;base64,AA=="}], "_meta": {"a": 1}, "x-later": null
        });
        let p = Prompt::from_value(v.clone()).unwrap();
        let args = p.arguments.as_ref().unwrap();
        assert_eq!((args[0].name.as_str(), args[0].required, args[1].required), ("code", Some(true), None));
        assert_eq!(p.to_value(), v);
        assert_eq!(serde_json::to_value(serde_json::from_value::<Prompt>(v.clone()).unwrap()).unwrap(), v);
        // Arguments with one that is not an argument stay whole, as they came.
        let odd = json!({"name": "p", "arguments": [{"name": "a"}, {"required": true}]});
        let p = Prompt::from_value(odd.clone()).unwrap();
        assert!(p.arguments.is_none());
        assert_eq!(p.to_value(), odd);
        assert_eq!(Prompt::from_value(json!({"name": "p"})).unwrap().to_value(), json!({"name": "p"}));
        assert!(Prompt::from_value(json!({"title": "nameless"})).is_err());

        let v = json!({
            "description": "a review",
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "review x = 1"}},
                {"role": "assistant", "content": {"type": "resource", "resource": {"uri": "file:///x", "text": "x"}}},
                {"role": "user", "content": {"type": "hologram", "frames": 2}, "x": 1}
            ],
            "_meta": {"m": true}, "x-extra": [1]
        });
        let r = GetPromptResult::from_value(v.clone()).unwrap();
        assert_eq!(r.messages.len(), 3);
        assert_eq!((r.messages[0].role.as_str(), r.messages[0].content.as_text()), ("user", Some("review x = 1")));
        assert!(matches!(r.messages[1].content, ContentBlock::Resource(_)));
        assert!(matches!(r.messages[2].content, ContentBlock::Other(_)));
        assert_eq!(r.to_value(), v);
        assert_eq!(serde_json::to_value(serde_json::from_value::<GetPromptResult>(v.clone()).unwrap()).unwrap(), v);
        // Messages with one that is not a message stay whole, as they came.
        let odd = json!({"messages": [{"role": "user", "content": {"type": "text", "text": "a"}}, {"role": "user"}]});
        let r = GetPromptResult::from_value(odd.clone()).unwrap();
        assert!(r.messages.is_empty());
        assert_eq!(r.to_value(), odd);
        assert_eq!(GetPromptResult::from_value(json!({})).unwrap().to_value(), json!({"messages": []}));
        assert!(GetPromptResult::from_value(json!(null)).is_err());
    }
}
