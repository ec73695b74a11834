//! The provider for a `Settings`: one connection pool and one of the two wire formats
//! (`openai.rs`, `anthropic.rs`), each request sent through `stream.rs`.

use crate::error::Error;
use crate::settings::{canonical_provider, Settings};
use crate::stream::{agent_for, retry_cut_streams, Call, Sink};
use crate::types::{Cancel, ChatRequest, Completion, Delta, Provider};
use crate::{anthropic, openai};

/// The provider for these settings.
pub fn from_settings(s: &Settings) -> Result<Box<dyn Provider>, Error> {
    let format = match canonical_provider(&s.provider) {
        Some("anthropic") => Format::Anthropic,
        Some(_) => Format::OpenAi,
        None => {
            return Err(Error::NotConfigured(format!(
                "provider {:?} is not supported; use openai, ollama or anthropic",
                s.provider
            )))
        }
    };
    Ok(Box::new(Chat { settings: s.clone(), agent: agent_for(s), format }))
}

/// The two wire formats: OpenAI-compatible chat completions and Anthropic Messages.
#[derive(Clone, Copy)]
enum Format {
    OpenAi,
    Anthropic,
}

/// A provider: its settings, its connection pool and its wire format.
struct Chat {
    settings: Settings,
    agent: ureq::Agent,
    format: Format,
}

impl Provider for Chat {
    fn name(&self) -> &str {
        &self.settings.provider
    }

    fn complete_cancellable(
        &self,
        req: &ChatRequest,
        on_delta: &mut dyn FnMut(Delta) -> bool,
        cancelled: &Cancel,
    ) -> Result<Completion, Error> {
        let s = &self.settings;
        let (body, headers) = match self.format {
            Format::OpenAi => (openai::request_bytes_reusing(&s.model, req)?, openai::headers(s)),
            Format::Anthropic => {
                (anthropic::request_bytes_reusing(&s.model, s.max_tokens, req)?, anthropic::headers(s))
            }
        };
        let call = Call { agent: &self.agent, settings: s, headers: &headers, body: &body, cancelled };
        retry_cut_streams(s, &|| cancelled.is_set(), |delivered| {
            let mut sink = Sink { on_delta: &mut *on_delta, delivered };
            match self.format {
                Format::OpenAi => openai::attempt(&call, &mut sink),
                Format::Anthropic => anthropic::attempt(&call, &mut sink),
            }
        })
    }
}
