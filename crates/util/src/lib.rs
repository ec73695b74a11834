//! Small helpers std lacks: random tokens, SHA-256, hex, base64, RFC 3339 timestamps, the
//! one way a mutex is locked, kept threads (`Workers`), values kept per shared list (`PerArc`), the HTTP clients' resolver (`LiteralFirst`). The root declares the modules and
//! re-exports their items at the crate's top level (`gosling_util::lock`, `gosling_util::hex`, ...).
#![deny(unsafe_code)]

mod encoding;
mod per_arc;
mod random;
mod resolve;
mod sync;
mod time;
mod words;
mod workers;

pub use encoding::{base64_decode, base64_encode, hex, sha256};
pub use per_arc::PerArc;
pub use random::{random_bytes, random_hex, XorShift};
pub use resolve::LiteralFirst;
pub use sync::lock;
pub use time::{now_rfc3339, rfc3339, unix_secs};
pub use words::{in_words, printable, word_matches};
pub use workers::Workers;
