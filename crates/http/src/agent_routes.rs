//! `/agent/*` and `/sessions*`: session lifecycle, the tool surface, resources.

use crate::error::ApiError;
use crate::server::{Request, Response};
use crate::state::App;
use gosling_agent::extension_set::{Origin, StoredExtension};
use gosling_agent::ops::{NewSession, OpenSession, Wait};
use gosling_agent::Error;
use gosling_extensions::config::ExtensionConfig;
use gosling_extensions::policy::InstallSource;
use gosling_extensions::runtime::{tool_info, SessionRuntime};
use gosling_mcp::client::CallContext;
use gosling_store::sessions::Session;
use gosling_wire::mcp_types::ResourceContents;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

type R = Result<Response, ApiError>;

fn session_json(s: &Session) -> Value {
    serde_json::to_value(s).expect("a Session always serializes")
}

/// The running agent of a session; 424 (goose's "Agent not initialized") otherwise.
fn runtime(app: &App, id: &str) -> Result<Arc<SessionRuntime>, ApiError> {
    Ok(app.runtime(id)?)
}

#[derive(Deserialize)]
struct StartReq {
    working_dir: String,
    recipe: Option<Value>,
    recipe_id: Option<String>,
    recipe_deeplink: Option<String>,
    extension_overrides: Option<Vec<Value>>,
    /// Digests (`summary.digest`) of the recipe's extensions the person approved.
    #[serde(default)]
    approve: Vec<String>,
    /// With a recipe: answer the summaries of its extensions, start nothing.
    #[serde(default)]
    dry_run: bool,
}

fn parse_configs(values: &[Value], field: &str) -> Result<Vec<ExtensionConfig>, ApiError> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let c = ExtensionConfig::from_value(v.clone())
                .map_err(|e| ApiError::bad_request(format!("{field}[{i}]: {e}")))?;
            c.validate().map_err(|e| ApiError::bad_request(format!("{field}[{i}]: {e}")))?;
            Ok(c)
        })
        .collect()
}

/// A recipe deep link carries the recipe as base64 JSON (optionally behind `config=`).
fn decode_recipe_deeplink(link: &str) -> Result<Value, ApiError> {
    let payload = link.rsplit("config=").next().unwrap_or(link);
    let payload = gosling_wire::percent::decode_lenient(payload);
    let bytes = gosling_util::base64_decode(payload.trim())
        .ok_or_else(|| ApiError::bad_request("recipe_deeplink is not valid base64"))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("recipe_deeplink does not hold a JSON recipe: {e}")))
}

/// The session's working dir by the one rule (`config::working_dir`), or a 400 naming the problem.
fn checked_working_dir(raw: &str, what: &str) -> Result<String, ApiError> {
    use gosling_config::{working_dir, ProcessEnv};
    working_dir(raw, &ProcessEnv).map(|dir| dir.display().to_string()).map_err(|e| working_dir_refused(e, what))
}

/// A refused working dir in goose's words (`what` names the field), with the rule's reason.
fn working_dir_refused(e: gosling_config::Error, what: &str) -> ApiError {
    match e {
        gosling_config::Error::EmptyWorkingDir => ApiError::bad_request("Working directory cannot be empty"),
        e => ApiError::bad_request(format!("{what}: {e}")),
    }
}

pub fn start(app: &App, req: &Request) -> R {
    let mut r: StartReq = req.json()?;
    r.working_dir = checked_working_dir(&r.working_dir, "Invalid working_dir")?;
    let recipe = match (&r.recipe_deeplink, &r.recipe_id, &r.recipe) {
        (Some(link), _, _) => Some(decode_recipe_deeplink(link)?),
        (None, Some(id), _) => {
            return Err(ApiError::bad_request(format!(
                "recipe_id {id:?}: gosling keeps no saved recipes; send the recipe itself in `recipe`"
            )))
        }
        (None, None, recipe) => recipe.clone(),
    };
    let extensions = match recipe.as_ref().and_then(|rc| rc.get("extensions")).and_then(Value::as_array) {
        Some(list) => Some(parse_configs(list, "recipe.extensions")?),
        None => r.extension_overrides.as_ref().map(|list| parse_configs(list, "extension_overrides")).transpose()?,
    };
    // A recipe's extensions came from elsewhere: the policy's rules for links apply.
    let from_recipe = recipe.as_ref().and_then(|rc| rc.get("extensions")).is_some_and(Value::is_array);
    let source = if from_recipe { InstallSource::Recipe } else { InstallSource::AddExtension };
    let extensions = match extensions {
        Some(mut configs) => {
            for c in &configs {
                app.check_policy(c, source)?;
            }
            if from_recipe {
                if let Some(answer) = recipe_consent(app, &mut configs, &r.approve, r.dry_run)? {
                    return Ok(answer);
                }
            }
            // Chosen for this session (a recipe's, or the client's overrides).
            configs.into_iter().map(|config| StoredExtension { config, origin: Origin::Session }).collect()
        }
        None => app.enabled_extensions()?,
    };
    let new =
        NewSession { working_dir: r.working_dir, extensions, source, recipe, wait: Wait::Background, delegate: None };
    let opened = app.start_session(new)?;
    Ok(Response::json(200, &session_json(&opened.session)))
}

/// Consent for a recipe's extensions (`extensions::consent`): each runs only when the person
/// approved its exact launch — its digest is in `approve`, or an installed extension has the
/// same launch — or the operator's allowlist names it exactly. Otherwise the answer is 428 with
/// the summary of each extension to approve (a recipe cannot bring its own approval: any
/// `gosling_consent` in it is dropped). Approved configs are stamped, so the session's stored
/// copies are checked again on resume. `dry_run`: the summaries, nothing started.
fn recipe_consent(
    app: &App,
    configs: &mut [ExtensionConfig],
    approve: &[String],
    dry_run: bool,
) -> Result<Option<Response>, ApiError> {
    use gosling_extensions::consent;
    let stored = app.config_extensions()?.entries;
    let present = |name: &str| app.secret_stored(name);
    let mut summaries = Vec::new();
    let mut pending = Vec::new();
    for c in configs.iter_mut() {
        consent::strip(c);
        let digest = consent::digest(c);
        let installed = stored.iter().any(|e| consent::digest(&consent::stripped(&e.config)) == digest);
        let approved = approve.iter().any(|a| a.trim() == digest) || installed || consent::allowlisted(c, app.policy());
        let mut summary = consent::summary(c, &present);
        summary["approved"] = json!(approved);
        if !approved {
            pending.push(format!("{:?} ({digest})", c.name()));
        }
        summaries.push(summary);
    }
    if dry_run {
        return Ok(Some(Response::json(200, &json!({ "extensions": summaries }))));
    }
    if !pending.is_empty() {
        let message = format!(
            "consent: the recipe's extensions came from elsewhere and run only after you approve each exact launch: review \
             their summaries (`extensions` here, or the same request with \"dry_run\": true) and send the digests you approve \
             in \"approve\": not approved: {}",
            pending.join(", ")
        );
        return Ok(Some(Response::json(428, &json!({ "message": message, "extensions": summaries }))));
    }
    for c in configs.iter_mut() {
        consent::stamp(c, consent::Origin::Recipe);
    }
    Ok(None)
}

#[derive(Deserialize)]
struct ResumeReq {
    session_id: String,
    load_model_and_extensions: bool,
}

/// Session `id`'s JSON with its conversation, written as the conversation is read from its
/// file (`Host::each_message`: the session as its files hold it under its lock, then one message
/// held at a time, the first bytes out before the last line is read), between `before` and
/// `after`. A write error (the client gone) ends the writing; the read goes on to the file's
/// end without sending.
fn session_streamed(app: &Arc<App>, id: &str, before: &'static str, after: String) -> R {
    let (app, id) = (app.clone(), id.to_string());
    let write = move |w: &mut dyn std::io::Write| -> std::io::Result<()> {
        use std::io::Write;
        // Both callbacks write (one after the other): the writer and its state in one cell.
        struct Out<'a> {
            w: std::io::BufWriter<&'a mut dyn Write>,
            wrote: std::io::Result<usize>,
            had_note: bool,
        }
        let out = std::cell::RefCell::new(Out {
            w: std::io::BufWriter::with_capacity(64 << 10, w),
            wrote: Ok(0),
            had_note: false,
        });
        let head = |s: Session, o: &mut Out| -> std::io::Result<()> {
            let mut v = session_json(&s);
            if let Value::Object(m) = &mut v {
                m.remove("conversation");
            }
            o.had_note = v.get(gosling_store::sessions::DAMAGED_KEY).is_some();
            let mut text = format!("{before}{v}");
            text.pop(); // its closing brace: the conversation goes last
            let sep = if text.ends_with('{') { "" } else { "," };
            o.w.write_all(format!("{text}{sep}\"conversation\":[").as_bytes())
        };
        let read = app.each_message(
            &id,
            |s| {
                let o = &mut *out.borrow_mut();
                if let Err(e) = head(s, o) {
                    o.wrote = Err(e);
                }
            },
            |m| {
                let o = &mut *out.borrow_mut();
                if let Ok(n) = o.wrote {
                    let sep: &[u8] = if n == 0 { b"" } else { b"," };
                    let r =
                        o.w.write_all(sep)
                            .and_then(|_| serde_json::to_writer(&mut o.w, &m).map_err(std::io::Error::other));
                    o.wrote = r.map(|_| n + 1);
                }
            },
        );
        let Out { mut w, wrote, had_note } = out.into_inner();
        wrote?;
        let damaged = match read {
            Ok(d) => d,
            Err(e) => {
                // The headers are out: the body ends short, and the log says why.
                log::warn!("session {id}: its conversation could not be read whole: {e}");
                return Err(std::io::Error::other(e.to_string()));
            }
        };
        w.write_all(b"]")?;
        // Found damaged while it was read (lines skipped): said after the conversation.
        if let Some(note) = damaged.filter(|_| !had_note) {
            let key = gosling_store::sessions::DAMAGED_KEY;
            w.write_all(format!(",\"{key}\":{}", Value::String(note)).as_bytes())?;
        }
        w.write_all(b"}")?;
        w.write_all(after.as_bytes())?;
        w.flush()
    };
    let mut r = Response::sse(Box::new(write));
    r.headers = vec![("Content-Type".into(), "application/json".into())];
    Ok(r)
}

pub fn resume(app: &Arc<App>, req: &Request) -> R {
    let r: ResumeReq = req.json()?;
    let not_found = |e| match e {
        Error::SessionNotFound(id) => {
            ApiError::not_found(format!("Failed to resume session: session {id:?} not found"))
        }
        e => ApiError::from(e),
    };
    if !r.load_model_and_extensions {
        app.session_meta(&r.session_id).map_err(not_found)?;
        return session_streamed(app, &r.session_id, "{\"session\":", "}".into());
    }
    let open = OpenSession { without_conversation: true, ..Default::default() };
    let opened = app.open_session(&r.session_id, open).map_err(not_found)?;
    let results = serde_json::to_string(&opened.results).map_err(|e| ApiError::internal(e.to_string()))?;
    session_streamed(app, &r.session_id, "{\"session\":", format!(",\"extension_results\":{results}}}"))
}

#[derive(Deserialize)]
struct SessionReq {
    session_id: String,
}

pub fn restart(app: &App, req: &Request) -> R {
    let r: SessionReq = req.json()?;
    let opened =
        app.open_session(&r.session_id, OpenSession { restart: true, ..Default::default() }).map_err(|e| match e {
            Error::SessionNotFound(id) => {
                ApiError::not_found(format!("Failed to get session: session {id:?} not found"))
            }
            e => ApiError::from(e),
        })?;
    Ok(Response::json(200, &json!({ "extension_results": opened.results })))
}

pub fn stop(app: &App, req: &Request) -> R {
    let r: SessionReq = req.json()?;
    app.stop_session(&r.session_id).map_err(|e| match e {
        Error::NoAgent(id) => ApiError::not_found(format!("Failed to stop agent for session {id}: no running agent")),
        e => ApiError::from(e),
    })?;
    Ok(Response::empty(200))
}

#[derive(Deserialize)]
struct WorkingDirReq {
    session_id: String,
    working_dir: String,
}

/// The core's move (`Host::update_working_dir`: the running extension processes start again
/// in the new dir before their next use), with goosed's words for a refused dir.
pub fn update_working_dir(app: &App, req: &Request) -> R {
    let r: WorkingDirReq = req.json()?;
    app.update_working_dir(&r.session_id, &r.working_dir).map_err(|e| match e {
        Error::BadWorkingDir(e) => working_dir_refused(e, "Invalid directory path"),
        Error::SessionNotFound(id) => ApiError::not_found(format!("session {id:?} not found")),
        e => ApiError::from(e),
    })?;
    Ok(Response::empty(200))
}

pub fn tools(app: &App, req: &Request) -> R {
    let id = req
        .query_param("session_id")
        .ok_or_else(|| ApiError::bad_request("missing the `session_id` query parameter"))?;
    let rt = runtime(app, &id)?;
    let filter = req.query_param("extension_name").filter(|e| !e.is_empty());
    let permission = app.tool_permission_default(&id);
    let list: Vec<Value> = rt.tools(filter.as_deref()).iter().map(|t| tool_info(t, permission.as_deref())).collect();
    Ok(Response::json(200, &Value::Array(list)))
}

#[derive(Deserialize)]
struct AddReq {
    session_id: String,
    config: Value,
}

pub fn add_extension(app: &App, req: &Request) -> R {
    let r: AddReq = req.json()?;
    let config = ExtensionConfig::from_value(r.config)?;
    config.validate()?;
    app.add_extension(&r.session_id, config).map_err(|e| match e {
        // The policy's refusal in its own words (403).
        Error::Refused(e) => ApiError::from(*e),
        // goose answers 500 to every activation failure; one the client can fix (a refused
        // variable, an unset OAuth client secret) is a 4xx here (`ApiError::from`), with goose's
        // message.
        e => {
            let e = ApiError::from(e);
            ApiError::new(e.status, format!("Failed to add extension: {}", e.message))
        }
    })?;
    Ok(Response::empty(200))
}

#[derive(Deserialize)]
struct RemoveReq {
    session_id: String,
    name: String,
}

pub fn remove_extension(app: &App, req: &Request) -> R {
    let r: RemoveReq = req.json()?;
    app.remove_extension(&r.session_id, &r.name)?;
    Ok(Response::empty(200))
}

#[derive(Deserialize)]
struct ReadReq {
    session_id: String,
    extension_name: String,
    uri: String,
}

pub fn read_resource(app: &App, req: &Request) -> R {
    let r: ReadReq = req.json()?;
    let rt = runtime(app, &r.session_id)?;
    let result = rt.read_resource(&r.extension_name, &r.uri)?;
    let first = result.contents.into_iter().next();
    let first = first.ok_or_else(|| ApiError::not_found(format!("resource {} has no contents", r.uri)))?;
    let (uri, mime_type, text, meta) = match first {
        ResourceContents::Text(t) => (t.uri, t.mime_type, t.text, t.meta),
        ResourceContents::Blob(b) => {
            let bytes = gosling_util::base64_decode(&b.blob)
                .ok_or_else(|| ApiError::internal("resource blob is not valid base64"))?;
            let text = String::from_utf8(bytes).map_err(|_| ApiError::internal("resource blob is not UTF-8 text"))?;
            (b.uri, b.mime_type, text, b.meta)
        }
        ResourceContents::Other(_) => {
            return Err(ApiError::internal("resource contents have no string `uri` and `text` or `blob`"))
        }
    };
    let mut out = json!({ "uri": uri, "text": text });
    if let Some(m) = mime_type {
        out["mimeType"] = Value::String(m);
    }
    if let Some(m) = meta {
        out["_meta"] = Value::Object(m);
    }
    Ok(Response::json(200, &out))
}

#[derive(Deserialize)]
struct CallReq {
    session_id: String,
    name: String,
    #[serde(default)]
    arguments: Value,
}

pub fn call_tool(app: &App, req: &Request) -> R {
    let r: CallReq = req.json()?;
    let rt = runtime(app, &r.session_id)?;
    let args = match r.arguments {
        Value::Object(_) => Some(r.arguments),
        _ => None,
    };
    let ctx = CallContext { progress: None, cancel: None };
    let result = rt.call_tool(&r.name, args, &ctx)?;
    Ok(Response::json(200, &gosling_agent::messages::call_tool_response(&result)))
}

pub fn list_sessions(app: &App) -> R {
    // The index keeps each session's listing JSON: the body is built without serializing.
    let list = app.list_sessions_json()?;
    let mut body = Vec::with_capacity(list.len() + 16);
    body.extend_from_slice(b"{\"sessions\":");
    body.extend_from_slice(&list);
    body.push(b'}');
    Ok(Response::bytes(200, "application/json", body))
}

/// The session with its conversation, streamed from its file (`session_streamed`).
pub fn get_session(app: &Arc<App>, id: &str) -> R {
    app.session_meta(id).map_err(|e| match e {
        Error::SessionNotFound(id) => ApiError::not_found(format!("Session not found: session {id:?} not found")),
        e => ApiError::from(e),
    })?;
    session_streamed(app, id, "", String::new())
}

pub fn delete_session(app: &App, id: &str) -> R {
    // The core's words for a session it does not have, as ACP's `session/delete` says them.
    app.delete_session(id)?;
    Ok(Response::empty(200))
}
