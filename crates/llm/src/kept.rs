//! Encodings kept from this process's recent model requests, so a call encodes only what is
//! new: a conversation sends all it holds on every model call, and between two calls it has
//! only grown by a message or a few; a session's tool list is the same `Arc` while its tools
//! stay the same. Each wire format keeps its own (`openai`, `anthropic`); the bodies they build
//! from these are the bytes they build whole (`types::tests`).

use crate::error::Error;
use crate::types::{ChatMessage, ToolSpec};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// How many recent requests are kept (a process may turn several conversations at once) and
/// the largest kept: each costs about twice its body in memory, so at most about 16 MB in all
/// for each format; a larger conversation is encoded whole on every call.
const KEPT: usize = 4;
const MAX_BYTES: usize = 2 << 20;

/// The messages of recent requests, each with its encoding.
pub(crate) struct Messages(Mutex<Vec<Encoded>>);

/// The messages of a recent request and each one's encoding (empty when it gives nothing).
pub(crate) struct Encoded {
    messages: Vec<ChatMessage>,
    encoded: Vec<Vec<u8>>,
}

impl Encoded {
    /// The messages' encodings in order, those that give nothing left out.
    pub(crate) fn parts(&self) -> impl Iterator<Item = &[u8]> {
        self.encoded.iter().filter(|b| !b.is_empty()).map(Vec::as_slice)
    }

    /// Their bytes in all.
    pub(crate) fn size(&self) -> usize {
        self.encoded.iter().map(Vec::len).sum()
    }
}

impl Messages {
    pub(crate) const fn new() -> Messages {
        Messages(Mutex::new(Vec::new()))
    }

    fn kept(&self) -> MutexGuard<'_, Vec<Encoded>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `messages` encoded, each by `one`: those a recent request began with (equal, part for
    /// part) taken from its encodings, the rest encoded now. The recent request sharing the
    /// longest start is taken out while the rest is encoded (another conversation's call does
    /// not wait for it); give the result back with `keep`.
    pub(crate) fn encode(
        &self,
        messages: &[ChatMessage],
        one: impl Fn(&ChatMessage) -> Result<Vec<u8>, Error>,
    ) -> Result<Encoded, Error> {
        let common = |e: &Encoded| e.messages.iter().zip(messages).take_while(|(a, b)| a == b).count();
        let taken = {
            let mut kept = self.kept();
            let best = kept.iter().enumerate().map(|(i, e)| (common(e), i)).max();
            best.filter(|&(n, _)| n > 0).map(|(n, i)| (n, kept.remove(i)))
        };
        let mut entry = match taken {
            Some((n, mut e)) => {
                e.messages.truncate(n);
                e.encoded.truncate(n);
                e
            }
            None => Encoded { messages: Vec::new(), encoded: Vec::new() },
        };
        for m in &messages[entry.messages.len()..] {
            entry.encoded.push(one(m)?);
            entry.messages.push(m.clone());
        }
        Ok(entry)
    }

    /// Keeps `entry` for the next calls (the most recent first), unless it is too large.
    pub(crate) fn keep(&self, entry: Encoded) {
        if entry.size() <= MAX_BYTES {
            let mut kept = self.kept();
            kept.insert(0, entry);
            kept.truncate(KEPT);
        }
    }
}

/// The encodings of recent tool lists, each kept while its list lives (`gosling_util::PerArc`).
pub(crate) struct Tools(gosling_util::PerArc<Vec<ToolSpec>, Arc<Vec<u8>>>);

impl Tools {
    pub(crate) const fn new() -> Tools {
        Tools(gosling_util::PerArc::new(KEPT))
    }

    /// Appends the encoding of `tools` to `out`: the one kept when this very list was encoded
    /// before, else `encode`'s, then kept.
    pub(crate) fn append(
        &self,
        tools: &Arc<Vec<ToolSpec>>,
        encode: impl Fn(&[ToolSpec]) -> Result<Vec<u8>, Error>,
        out: &mut Vec<u8>,
    ) -> Result<(), Error> {
        let bytes = self.0.get_or_make(tools, |t| encode(t).map(Arc::new))?;
        out.extend_from_slice(&bytes);
        Ok(())
    }
}
