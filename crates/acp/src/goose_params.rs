//! goose's own methods (`_goose/unstable/*`) as Rust types: each method's params read once
//! from the request into its type (a missing or mistyped field is an invalid-params error that
//! names it), and each answer built from the core's typed result. `goose.rs` dispatches on
//! these; JSON stays here, at the edge. Hand-written like `protocol.rs` (no derive visitors).

use crate::protocol::invalid_params;
use gosling_agent::diagnostics::{Level, Report};
use gosling_agent::import::{ImportSource, Imported};
use gosling_wire::jsonrpc::ErrorObject;
use serde_json::{json, Map, Value};

/// `_goose/unstable/session/working-dir/update`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpdateWorkingDir {
    pub session_id: String,
    pub working_dir: String,
}

/// `_goose/unstable/session/import`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportSession {
    pub input: String,
    pub source: ImportSource,
}

/// `_goose/unstable/diagnostics/get`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetDiagnostics {
    pub session_id: String,
    pub level: Level,
}

fn object(p: &Value) -> Result<&Map<String, Value>, ErrorObject> {
    p.as_object().ok_or_else(|| invalid_params("`params` must be an object"))
}

fn string(m: &Map<String, Value>, k: &str) -> Result<String, ErrorObject> {
    match m.get(k) {
        Some(Value::String(s)) => Ok(s.clone()),
        None | Some(Value::Null) => Err(invalid_params(format!("missing the string parameter `{k}`"))),
        Some(_) => Err(invalid_params(format!("`{k}` must be a string"))),
    }
}

impl UpdateWorkingDir {
    pub fn read(p: &Value) -> Result<UpdateWorkingDir, ErrorObject> {
        let m = object(p)?;
        Ok(UpdateWorkingDir { session_id: string(m, "sessionId")?, working_dir: string(m, "workingDir")? })
    }
}

impl ImportSession {
    pub fn read(p: &Value) -> Result<ImportSession, ErrorObject> {
        let m = object(p)?;
        let input = string(m, "input")?;
        let source = string(m, "source")?;
        let source = ImportSource::parse(&source).ok_or_else(|| {
            invalid_params(format!(
                "`source` {source:?} is not one of auto, json, nostr; send \"json\" with an exported session"
            ))
        })?;
        Ok(ImportSession { input, source })
    }
}

impl GetDiagnostics {
    pub fn read(p: &Value) -> Result<GetDiagnostics, ErrorObject> {
        let m = object(p)?;
        let level = match m.get("level") {
            None | Some(Value::Null) => Level::Summary,
            Some(Value::String(l)) => {
                Level::parse(l).ok_or_else(|| invalid_params(format!("`level` {l:?} is not summary or full")))?
            }
            Some(_) => return Err(invalid_params("`level` must be \"summary\" or \"full\"")),
        };
        Ok(GetDiagnostics { session_id: string(m, "sessionId")?, level })
    }
}

/// goose's ImportSessionResponse.
pub fn imported(i: &Imported) -> Value {
    json!({ "sessionId": i.session_id, "title": i.title, "updatedAt": i.updated_at, "messageCount": i.message_count })
}

/// goose's diagnostics report (`schemaVersion` 1): its keys, with gosling's values; the
/// extensions' states under `extensions.states`, the errors as lines.
pub fn report(r: &Report) -> Value {
    let names: Vec<&str> = r.extensions.iter().map(|e| e.name.as_str()).collect();
    let states: Vec<Value> = r
        .extensions
        .iter()
        .map(|e| json!({ "name": e.name, "state": e.state.word(), "detail": e.state.detail() }))
        .collect();
    let session = r.session.as_ref().map(|s| {
        json!({ "id": s.id, "workingDir": s.working_dir, "messageCount": s.message_count, "sessionType": s.session_type })
    });
    json!({ "report": {
        "schemaVersion": 1,
        "generatedAt": r.generated_at,
        "level": r.level.name(),
        "system": {
            "app_version": r.version, "os": r.os, "os_version": r.os_version, "architecture": r.architecture,
            "provider": r.provider, "model": r.model, "enabled_extensions": names,
        },
        "config": null,
        "extensions": { "enabled": names, "states": states },
        "session": session,
        "logs": { "cli": [], "llm": [] },
        "prompts": [],
        "schedule": null,
        "scheduledRecipes": [],
        "errors": r.errors,
    }})
}

#[cfg(test)]
mod tests {
    use super::*;
    use gosling_agent::diagnostics::{ExtensionState, State};

    fn says(e: ErrorObject, words: &str) {
        assert_eq!(e.code, gosling_wire::jsonrpc::INVALID_PARAMS);
        assert!(e.message.contains(words), "{}", e.message);
    }

    #[test]
    fn working_dir_update_reads_as_desktop_sends_it() {
        let p = json!({"sessionId":"20261128_1","workingDir":"/home/me/project"});
        let want = UpdateWorkingDir { session_id: "20261128_1".into(), working_dir: "/home/me/project".into() };
        assert_eq!(UpdateWorkingDir::read(&p).unwrap(), want);
        says(UpdateWorkingDir::read(&json!({"sessionId":"s"})).unwrap_err(), "`workingDir`");
        says(UpdateWorkingDir::read(&json!({"sessionId":"s","workingDir":7})).unwrap_err(), "must be a string");
        says(UpdateWorkingDir::read(&json!([])).unwrap_err(), "object");
    }

    #[test]
    fn import_reads_its_source_and_answers_goose_shape() {
        let p = json!({"input":"{}","source":"json"});
        assert_eq!(ImportSession::read(&p).unwrap(), ImportSession { input: "{}".into(), source: ImportSource::Json });
        assert_eq!(ImportSession::read(&json!({"input":"","source":"auto"})).unwrap().source, ImportSource::Auto);
        assert_eq!(ImportSession::read(&json!({"input":"","source":"nostr"})).unwrap().source, ImportSource::Nostr);
        says(ImportSession::read(&json!({"input":"x","source":"yaml"})).unwrap_err(), "auto, json, nostr");
        says(ImportSession::read(&json!({"source":"json"})).unwrap_err(), "`input`");
        let i = Imported {
            session_id: "20261128_2".into(),
            message_count: 3,
            title: "A chat".into(),
            updated_at: "2026-11-28T21:00:00Z".into(),
            left_out: vec!["everything".into()],
        };
        assert_eq!(
            imported(&i),
            json!({"sessionId":"20261128_2","title":"A chat","updatedAt":"2026-11-28T21:00:00Z","messageCount":3})
        );
    }

    #[test]
    fn diagnostics_reads_its_level_and_answers_goose_report() {
        let g = GetDiagnostics::read(&json!({"sessionId":"s"})).unwrap();
        assert_eq!(g, GetDiagnostics { session_id: "s".into(), level: Level::Summary });
        assert_eq!(GetDiagnostics::read(&json!({"sessionId":"s","level":"full"})).unwrap().level, Level::Full);
        says(GetDiagnostics::read(&json!({"sessionId":"s","level":"all"})).unwrap_err(), "summary or full");
        says(GetDiagnostics::read(&json!({"level":"full"})).unwrap_err(), "`sessionId`");
        let r = Report {
            generated_at: "2026-11-28T21:00:00Z".into(),
            level: Level::Summary,
            version: "1.0.0",
            os: "linux",
            os_version: "6.1".into(),
            architecture: "x86_64",
            provider: Some("openai".into()),
            model: None,
            extensions: vec![
                ExtensionState { name: "developer".into(), state: State::Running },
                ExtensionState { name: "broken".into(), state: State::Failed("exit 1".into()) },
            ],
            session: None,
            errors: vec!["extension broken failed: exit 1".into()],
        };
        let v = report(&r);
        let report = &v["report"];
        assert_eq!(report["schemaVersion"], 1);
        assert_eq!(report["system"]["enabled_extensions"], json!(["developer", "broken"]));
        assert_eq!(report["system"]["model"], Value::Null);
        assert_eq!(report["extensions"]["states"][1], json!({"name":"broken","state":"failed","detail":"exit 1"}));
        assert_eq!(report["errors"], json!(["extension broken failed: exit 1"]));
        assert_eq!(report["session"], Value::Null);
    }
}
