//! Provider settings: from the environment first, then the config store, with goose's variable
//! names; the defaults and the accepted provider names.

use std::fmt;
use std::time::Duration;

use gosling_config::Env;

use crate::error::Error;

/// Everything a provider needs. Built by `resolve` (or by hand in tests).
#[derive(Clone)]
pub struct Settings {
    /// Canonical: "openai", "ollama" or "anthropic".
    pub provider: String,
    pub model: String,
    /// Scheme, host, port and optional path prefix, e.g. `https://api.openai.com`.
    pub host: String,
    /// Appended to `host` with one `/` between, e.g. `v1/chat/completions`.
    pub base_path: String,
    /// Never logged; `Debug` prints only whether it is set.
    pub api_key: Option<String>,
    /// TCP connect limit.
    pub connect_timeout: Duration,
    /// Longest silence on the connection, before the headers or between stream bytes.
    pub stall_timeout: Duration,
    /// Requests per completion when the provider answers 429 or 5xx (1 = no retry).
    pub max_attempts: u32,
    /// Longest total time spent sleeping between attempts; a Retry-After beyond it ends retrying.
    pub max_retry_wait: Duration,
    /// Anthropic's required `max_tokens` (OpenAI: not sent).
    pub max_tokens: u32,
    /// Bound on the bytes read from one response.
    pub max_response_bytes: usize,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("provider", &self.provider)
            .field("model", &self.model)
            .field("host", &self.host)
            .field("base_path", &self.base_path)
            .field("api_key", &if self.api_key.is_some() { "<set>" } else { "<unset>" })
            .field("connect_timeout", &self.connect_timeout)
            .field("stall_timeout", &self.stall_timeout)
            .field("max_attempts", &self.max_attempts)
            .field("max_retry_wait", &self.max_retry_wait)
            .field("max_tokens", &self.max_tokens)
            .field("max_response_bytes", &self.max_response_bytes)
            .finish()
    }
}

pub const OPENAI_DEFAULT_HOST: &str = "https://api.openai.com";
pub const OPENAI_DEFAULT_PATH: &str = "v1/chat/completions";
pub const OLLAMA_DEFAULT_HOST: &str = "http://localhost:11434";
pub const ANTHROPIC_DEFAULT_HOST: &str = "https://api.anthropic.com";
pub const ANTHROPIC_PATH: &str = "v1/messages";

/// How to choose a provider, for each front end: the web page's Settings, goose Desktop and
/// ACP clients through the config calls, scripts through the variables.
const HOW_TO_CONFIGURE: &str = "choose one in the web page's Settings; from goose Desktop or an ACP client, store GOOSE_PROVIDER and GOOSE_MODEL with _goose/unstable/config/upsert (goosed's API: POST /config/upsert); in scripts, set GOOSE_PROVIDER (openai, ollama or anthropic) and GOOSE_MODEL, plus OPENAI_HOST/OPENAI_API_KEY for OpenAI-compatible servers, OLLAMA_HOST for Ollama, or ANTHROPIC_API_KEY for Anthropic (in the environment or the config store; a key with `gosling secret set NAME`)";

/// The provider names we accept, mapped to the canonical one.
pub fn canonical_provider(name: &str) -> Option<&'static str> {
    match name.trim().to_ascii_lowercase().as_str() {
        "openai" | "openai_compatible" | "openai-compatible" | "llamacpp" | "llama.cpp" | "vllm" | "lmstudio"
        | "lm_studio" => Some("openai"),
        "ollama" => Some("ollama"),
        "anthropic" | "claude" => Some("anthropic"),
        _ => None,
    }
}

impl Settings {
    /// Settings from the environment first, then the config store (`stored` looks a key up in
    /// the plain config, then the secrets). `overrides` (provider, model) win over both; they
    /// come from a session's `update_provider`.
    pub fn resolve(
        env: &dyn Env,
        stored: &dyn Fn(&str) -> Option<String>,
        overrides: (Option<&str>, Option<&str>),
    ) -> Result<Settings, Error> {
        let get = |k: &str| {
            gosling_config::settings::user_setting(env, k, || stored(k))
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let chosen = |over: Option<&str>, key: &str| {
            over.filter(|s| !s.trim().is_empty()).map(str::to_string).or_else(|| get(key))
        };
        let provider_raw = chosen(overrides.0, "GOOSE_PROVIDER")
            .ok_or_else(|| Error::NotConfigured(format!("no LLM provider is configured; {HOW_TO_CONFIGURE}")))?;
        let provider = canonical_provider(&provider_raw).ok_or_else(|| {
            Error::NotConfigured(format!("GOOSE_PROVIDER={provider_raw:?} is not supported; use openai (any OpenAI-compatible server), ollama or anthropic"))
        })?;
        let model = chosen(overrides.1, "GOOSE_MODEL").ok_or_else(|| {
            Error::NotConfigured(format!("GOOSE_PROVIDER is {provider} but no model is set; name one in the web page's Settings, or set GOOSE_MODEL (_goose/unstable/config/upsert, POST /config/upsert, or the environment)"))
        })?;
        let num = |k: &str, default: u64| -> Result<u64, Error> {
            get(k).map_or(Ok(default), |v| {
                v.parse().map_err(|_| Error::NotConfigured(format!("{k}={v:?} is not a whole number")))
            })
        };
        let (host, base_path, api_key) = match provider {
            "openai" => {
                let host = get("OPENAI_HOST").unwrap_or_else(|| OPENAI_DEFAULT_HOST.to_string());
                let key = get("OPENAI_API_KEY");
                if key.is_none() && host.trim_end_matches('/') == OPENAI_DEFAULT_HOST {
                    return Err(Error::NotConfigured(
                        "GOOSE_PROVIDER is openai with the default host api.openai.com but OPENAI_API_KEY is not set; set OPENAI_API_KEY, or OPENAI_HOST for a local OpenAI-compatible server".into(),
                    ));
                }
                (host, get("OPENAI_BASE_PATH").unwrap_or_else(|| OPENAI_DEFAULT_PATH.to_string()), key)
            }
            "ollama" => (ollama_host(get("OLLAMA_HOST").as_deref()), OPENAI_DEFAULT_PATH.to_string(), None),
            _ => {
                let host = get("ANTHROPIC_HOST").unwrap_or_else(|| ANTHROPIC_DEFAULT_HOST.to_string());
                let key = get("ANTHROPIC_API_KEY");
                if key.is_none() && host.trim_end_matches('/') == ANTHROPIC_DEFAULT_HOST {
                    return Err(Error::NotConfigured(
                        "GOOSE_PROVIDER is anthropic but ANTHROPIC_API_KEY is not set; set ANTHROPIC_API_KEY".into(),
                    ));
                }
                (host, ANTHROPIC_PATH.to_string(), key)
            }
        };
        if !(host.starts_with("http://") || host.starts_with("https://")) {
            return Err(Error::NotConfigured(format!(
                "the {provider} host {host:?} must start with http:// or https://"
            )));
        }
        Ok(Settings {
            provider: provider.to_string(),
            model,
            host,
            base_path,
            api_key,
            connect_timeout: Duration::from_secs(num("GOSLING_LLM_CONNECT_SECS", 10)?),
            stall_timeout: Duration::from_secs(num("GOSLING_LLM_STALL_SECS", 60)?.max(1)),
            max_attempts: num("GOSLING_LLM_MAX_ATTEMPTS", 3)?.clamp(1, 10) as u32,
            max_retry_wait: Duration::from_secs(num("GOSLING_LLM_MAX_RETRY_WAIT_SECS", 30)?),
            max_tokens: num("GOSLING_LLM_MAX_TOKENS", 4096)?.clamp(1, u32::MAX as u64) as u32,
            max_response_bytes: num("GOSLING_LLM_MAX_RESPONSE_BYTES", 64 << 20)? as usize,
        })
    }

    /// Settings with the defaults `resolve` uses, nothing read from anywhere (tests, tools).
    pub fn new(provider: &str, model: &str, host: &str) -> Settings {
        let provider = canonical_provider(provider).unwrap_or("openai");
        Settings {
            provider: provider.to_string(),
            model: model.to_string(),
            host: host.to_string(),
            base_path: if provider == "anthropic" { ANTHROPIC_PATH } else { OPENAI_DEFAULT_PATH }.to_string(),
            api_key: None,
            connect_timeout: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(60),
            max_attempts: 3,
            max_retry_wait: Duration::from_secs(30),
            max_tokens: 4096,
            max_response_bytes: 64 << 20,
        }
    }

    /// `host` + `/` + `base_path`.
    pub fn url(&self) -> String {
        let (host, path) = (self.host.trim_end_matches('/'), self.base_path.trim_start_matches('/'));
        if path.is_empty() {
            host.to_string()
        } else {
            format!("{host}/{path}")
        }
    }

    /// The variable that holds this provider's key, for messages.
    pub fn key_var(&self) -> &'static str {
        match self.provider.as_str() {
            "anthropic" => "ANTHROPIC_API_KEY",
            "ollama" => "OLLAMA_HOST",
            _ => "OPENAI_API_KEY",
        }
    }

    /// The variable that holds this provider's host, for messages.
    pub fn host_var(&self) -> &'static str {
        match self.provider.as_str() {
            "anthropic" => "ANTHROPIC_HOST",
            "ollama" => "OLLAMA_HOST",
            _ => "OPENAI_HOST/OPENAI_BASE_PATH",
        }
    }
}

/// goose accepts OLLAMA_HOST as `host`, `host:port` or a URL; the port defaults to 11434.
fn ollama_host(v: Option<&str>) -> String {
    let Some(v) = v else { return OLLAMA_DEFAULT_HOST.to_string() };
    let v = v.trim().trim_end_matches('/');
    let (scheme, rest) = v.split_once("://").unwrap_or(("http", v));
    let authority = rest.split('/').next().unwrap_or("");
    let has_port = match authority.rsplit_once(':') {
        Some((h, p)) => !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && !h.ends_with(':'),
        None => false,
    } && !authority.ends_with(']');
    if has_port || scheme == "https" {
        format!("{scheme}://{rest}")
    } else {
        let path = &rest[authority.len()..];
        format!("{scheme}://{authority}:11434{path}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// An environment read from a map instead of the process's.
    struct MapEnv(HashMap<&'static str, &'static str>);

    impl gosling_config::Env for MapEnv {
        fn get(&self, key: &str) -> Option<String> {
            self.0.get(key).map(|s| s.to_string())
        }
    }

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn nothing_configured_names_the_settings() {
        let e = Settings::resolve(&MapEnv(HashMap::new()), &none, (None, None)).unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, Error::NotConfigured(_)));
        for k in ["GOOSE_PROVIDER", "GOOSE_MODEL", "OPENAI_HOST", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_HOST"]
        {
            assert!(m.contains(k), "{m} should name {k}");
        }
        assert!(m.starts_with("llm: "));
        // Each front end's fix: the page's Settings, Desktop's and ACP's config call, scripts'.
        for fix in ["web page's Settings", "_goose/unstable/config/upsert", "POST /config/upsert", "gosling secret set"]
        {
            assert!(m.contains(fix), "{m} should name {fix}");
        }
    }

    #[test]
    fn env_wins_over_store_and_overrides_win_over_both() {
        let env = MapEnv(HashMap::from([("GOOSE_PROVIDER", "openai"), ("OPENAI_HOST", "http://127.0.0.1:9/")]));
        let store = |k: &str| match k {
            "GOOSE_PROVIDER" => Some("anthropic".to_string()),
            "GOOSE_MODEL" => Some("m-from-store".to_string()),
            "OPENAI_API_KEY" => Some("sk-secret-value".to_string()),
            _ => None,
        };
        let s = Settings::resolve(&env, &store, (None, None)).unwrap();
        assert_eq!((s.provider.as_str(), s.model.as_str()), ("openai", "m-from-store"));
        assert_eq!(s.url(), "http://127.0.0.1:9/v1/chat/completions");
        assert_eq!(s.api_key.as_deref(), Some("sk-secret-value"));
        assert!(!format!("{s:?}").contains("sk-secret"), "Debug must not print the key");
        let s = Settings::resolve(&env, &store, (Some("ollama"), Some("llama3.2"))).unwrap();
        assert_eq!(
            (s.provider.as_str(), s.model.as_str(), s.url().as_str()),
            ("ollama", "llama3.2", "http://localhost:11434/v1/chat/completions")
        );
    }

    #[test]
    fn hosted_providers_need_their_key_local_ones_do_not() {
        let env = MapEnv(HashMap::from([("GOOSE_PROVIDER", "openai"), ("GOOSE_MODEL", "gpt-4o")]));
        assert!(Settings::resolve(&env, &none, (None, None)).unwrap_err().to_string().contains("OPENAI_API_KEY"));
        let env = MapEnv(HashMap::from([("GOOSE_PROVIDER", "anthropic"), ("GOOSE_MODEL", "c")]));
        assert!(Settings::resolve(&env, &none, (None, None)).unwrap_err().to_string().contains("ANTHROPIC_API_KEY"));
        let env = MapEnv(HashMap::from([
            ("GOOSE_PROVIDER", "anthropic"),
            ("GOOSE_MODEL", "c"),
            ("ANTHROPIC_HOST", "http://127.0.0.1:1/anthropic"),
        ]));
        assert_eq!(
            Settings::resolve(&env, &none, (None, None)).unwrap().url(),
            "http://127.0.0.1:1/anthropic/v1/messages"
        );
        let env = MapEnv(HashMap::from([("GOOSE_PROVIDER", "nope"), ("GOOSE_MODEL", "c")]));
        assert!(Settings::resolve(&env, &none, (None, None)).unwrap_err().to_string().contains("nope"));
        let env = MapEnv(HashMap::from([("GOOSE_PROVIDER", "ollama")]));
        assert!(Settings::resolve(&env, &none, (None, None)).unwrap_err().to_string().contains("GOOSE_MODEL"));
    }

    #[test]
    fn ollama_host_forms() {
        assert_eq!(ollama_host(None), "http://localhost:11434");
        assert_eq!(ollama_host(Some("gpu-box")), "http://gpu-box:11434");
        assert_eq!(ollama_host(Some("gpu-box:8080")), "http://gpu-box:8080");
        assert_eq!(ollama_host(Some("http://10.0.0.2/")), "http://10.0.0.2:11434");
        assert_eq!(ollama_host(Some("https://ollama.example.com")), "https://ollama.example.com");
        assert_eq!(ollama_host(Some("http://127.0.0.1:5/x")), "http://127.0.0.1:5/x");
    }
}
