//! LLM providers: one streamed chat completion at a time, over blocking ureq and our own SSE
//! decoder (`wire::sse`).
//!
//! Owns the neutral conversation types (`ChatRequest`, `Completion`), provider settings
//! (`Settings::resolve`: environment first, then the config store, with goose's variable
//! names), and the two wire formats: OpenAI-compatible chat completions (`openai.rs`: OpenAI,
//! Ollama, llama.cpp, vLLM, LM Studio) and Anthropic Messages (`anthropic.rs`). Retries of 429
//! and 5xx live in `retry.rs`.
//!
//! Does not know about goose messages, sessions, HTTP routes or tools' execution: the turn loop
//! (agent/) converts to and from these types. Never logs the API key, request bodies or
//! response text above `trace`, and never the key at all.
//!
//! The root declares the modules and re-exports their items at the crate's top level.
#![deny(unsafe_code)]

pub mod anthropic;
mod body;
pub mod catalog;
mod error;
mod kept;
pub mod openai;
mod provider;
mod retry;
mod settings;
mod stream;
mod text;
mod types;

pub use error::Error;
pub use provider::from_settings;
pub use settings::{
    canonical_provider, Settings, ANTHROPIC_DEFAULT_HOST, ANTHROPIC_PATH, OLLAMA_DEFAULT_HOST, OPENAI_DEFAULT_HOST,
    OPENAI_DEFAULT_PATH,
};
pub use text::clip;
pub use types::{
    BadArguments, Cancel, ChatMessage, ChatRequest, Completion, Delta, Part, Provider, Role, ToolCallOut, ToolSpec,
    Usage,
};
