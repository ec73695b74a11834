//! The providers gosling can run (openai, anthropic, ollama) as goose's provider pickers show
//! them: names, the settings each reads, the models it knows the context window of. One
//! table for goosed's `/config/providers` (http) and goose serve's `providers/list` (acp).

/// A model gosling knows the context window of.
pub struct Model {
    pub name: &'static str,
    pub context_limit: u64,
    /// The family a model picker groups it under.
    pub family: &'static str,
    /// Whether it reasons (thinks) before it answers.
    pub reasoning: bool,
}

/// A provider gosling supports, with what goose's ProviderMetadata shows.
pub struct Provider {
    pub name: &'static str,
    pub display_name: &'static str,
    pub description: &'static str,
    pub default_model: &'static str,
    pub doc_link: &'static str,
    /// (key, required, secret, default)
    pub keys: &'static [(&'static str, bool, bool, Option<&'static str>)],
    pub models: &'static [Model],
    /// Where to get what the provider needs, step by step (the setup dialog shows them).
    pub setup_steps: &'static [&'static str],
    /// Whether the person's images are sent to it (Ollama's depend on the model, which gosling
    /// does not know: not sent).
    pub images: bool,
}

pub const PROVIDERS: [Provider; 3] = [
    Provider {
        name: "openai",
        display_name: "OpenAI (or any OpenAI-compatible server)",
        description: "OpenAI's chat completions API, or a local OpenAI-compatible server (llama.cpp, vLLM, LM Studio) at OPENAI_HOST",
        default_model: "gpt-4o",
        doc_link: "https://platform.openai.com/docs/models",
        keys: &[
            ("OPENAI_API_KEY", false, true, None),
            ("OPENAI_HOST", false, false, Some(crate::settings::OPENAI_DEFAULT_HOST)),
            ("OPENAI_BASE_PATH", false, false, Some(crate::settings::OPENAI_DEFAULT_PATH)),
        ],
        models: &[
            Model { name: "gpt-4o", context_limit: 128_000, family: "gpt-4o", reasoning: false },
            Model { name: "gpt-4o-mini", context_limit: 128_000, family: "gpt-4o", reasoning: false },
            Model { name: "gpt-4.1", context_limit: 1_047_576, family: "gpt-4.1", reasoning: false },
            Model { name: "gpt-4.1-mini", context_limit: 1_047_576, family: "gpt-4.1", reasoning: false },
            Model { name: "o3", context_limit: 200_000, family: "o-series", reasoning: true },
            Model { name: "o4-mini", context_limit: 200_000, family: "o-series", reasoning: true },
        ],
        setup_steps: &[
            "Sign in at https://platform.openai.com and open the API keys page",
            "Create a secret key and set it as OPENAI_API_KEY",
            "For a local OpenAI-compatible server (llama.cpp, vLLM, LM Studio) set OPENAI_HOST to its address instead; a key may not be needed",
        ],
        images: true,
    },
    Provider {
        name: "anthropic",
        display_name: "Anthropic",
        description: "Claude models through Anthropic's Messages API",
        default_model: "claude-sonnet-4-5",
        doc_link: "https://docs.anthropic.com/en/docs/about-claude/models",
        keys: &[("ANTHROPIC_API_KEY", true, true, None), ("ANTHROPIC_HOST", false, false, Some(crate::settings::ANTHROPIC_DEFAULT_HOST))],
        models: &[
            Model { name: "claude-sonnet-4-5", context_limit: 200_000, family: "claude-sonnet", reasoning: true },
            Model { name: "claude-opus-4-1", context_limit: 200_000, family: "claude-opus", reasoning: true },
            Model { name: "claude-haiku-4-5", context_limit: 200_000, family: "claude-haiku", reasoning: true },
            Model { name: "claude-3-5-haiku-latest", context_limit: 200_000, family: "claude-haiku", reasoning: false },
        ],
        setup_steps: &[
            "Sign in at https://console.anthropic.com and open the API keys page",
            "Create a key and set it as ANTHROPIC_API_KEY",
        ],
        images: true,
    },
    Provider {
        name: "ollama",
        display_name: "Ollama",
        description: "Local models served by Ollama",
        default_model: "qwen3",
        doc_link: "https://ollama.com/library",
        keys: &[("OLLAMA_HOST", true, false, Some(crate::settings::OLLAMA_DEFAULT_HOST))],
        models: &[
            Model { name: "qwen3", context_limit: 40_960, family: "qwen", reasoning: true },
            Model { name: "llama3.2", context_limit: 131_072, family: "llama", reasoning: false },
            Model { name: "gpt-oss", context_limit: 131_072, family: "gpt-oss", reasoning: true },
        ],
        setup_steps: &[
            "Install Ollama from https://ollama.com and start it",
            "Pull a model, for example `ollama pull qwen3`",
            "Set OLLAMA_HOST when it does not listen on the default address",
        ],
        images: false,
    },
];

/// Whether gosling could run `provider` with the current settings (the same check a turn
/// makes, with any model).
pub fn is_configured(provider: &str, setting: &dyn Fn(&str) -> Option<String>) -> bool {
    crate::settings::Settings::resolve(&gosling_config::ProcessEnv, setting, (Some(provider), Some("any"))).is_ok()
}

/// Whether `provider` (any name gosling accepts) is sent the person's images.
pub fn takes_images(provider: &str) -> bool {
    crate::canonical_provider(provider).and_then(find).is_some_and(|p| p.images)
}

/// The catalogue entry of `name` (a canonical provider name).
pub fn find(name: &str) -> Option<&'static Provider> {
    PROVIDERS.iter().find(|p| p.name == name)
}

/// The context window, in tokens, of `model` as `provider` serves it: the catalogue's entry of
/// that name, else the entry the name is a dated or tagged variant of (`gpt-4o-2024-08-06`,
/// `claude-sonnet-4-5-20250929`, `qwen3:8b`: the longest known name followed by `-`, `:` or
/// `@`). The provider's own entries come first, then any provider's (a local server serving an
/// OpenAI or Ollama model by its name). `None` for a model gosling does not know: no guess.
pub fn context_limit(provider: Option<&str>, model: &str) -> Option<u64> {
    let model = model.trim();
    let own = provider.and_then(find).into_iter();
    let others = PROVIDERS.iter().filter(|p| Some(p.name) != provider);
    let mut best: Option<&Model> = None;
    for p in own.chain(others) {
        for m in p.models {
            if m.name == model {
                return Some(m.context_limit);
            }
            let variant = model.strip_prefix(m.name).is_some_and(|rest| rest.starts_with(['-', ':', '@']));
            if variant && best.is_none_or(|b| m.name.len() > b.name.len()) {
                best = Some(m);
            }
        }
    }
    best.map(|m| m.context_limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_limits_of_known_models_and_their_variants() {
        assert_eq!(context_limit(Some("openai"), "gpt-4o"), Some(128_000));
        assert_eq!(context_limit(Some("openai"), "gpt-4.1-mini"), Some(1_047_576));
        // A dated variant is its model; the longest name wins (gpt-4.1-mini over gpt-4.1).
        assert_eq!(context_limit(Some("openai"), "gpt-4.1-mini-2025-04-14"), Some(1_047_576));
        assert_eq!(context_limit(Some("anthropic"), "claude-sonnet-4-5-20250929"), Some(200_000));
        assert_eq!(context_limit(Some("ollama"), "qwen3:8b"), Some(40_960));
        // Another provider's model served by an OpenAI-compatible server.
        assert_eq!(context_limit(Some("openai"), "llama3.2"), Some(131_072));
        assert_eq!(context_limit(None, "o3"), Some(200_000));
        // Unknown: no guess; a name that only starts like a known one is not it.
        assert_eq!(context_limit(Some("openai"), "my-finetune"), None);
        assert_eq!(context_limit(Some("openai"), "o3x"), None);
        assert_eq!(context_limit(Some("openai"), ""), None);
    }

    #[test]
    fn images_go_to_providers_that_take_them() {
        assert!(takes_images("openai") && takes_images("vllm") && takes_images("claude"));
        assert!(!takes_images("ollama") && !takes_images("nobody"));
    }
}
