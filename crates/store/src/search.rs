//! Search over what was said in sessions (Desktop's history search: `session/list`'s
//! `query`), bounded in time: sessions are read newest first until the budget is spent; the
//! answer says whether every session was read. Each session is asked through its search
//! summary (`search_index`: a trigram filter in memory, the messages' lower-cased text on
//! disk), brought up to date with its conversation file first; a session the summary cannot
//! answer for (the one-file layout, more text than a summary holds) is read from its file: a
//! line is parsed only when its bytes hold the query (case-insensitive), then matched against
//! the text blocks of the message alone, so a query that names a JSON key ("role") finds
//! nothing. When the budget runs out, the summaries of the sessions not reached are brought up
//! to date on a thread of their own, so the next search gets further.
//!
//! What is checked against the files, and when: a session's filter is checked against its
//! conversation file (a `stat`, and the summary brought up to date) once per index entry,
//! and kept with the entry (`Listed::search_slot`). The store replaces a session's entry on
//! every change this process makes and on every change another process notes in `.changes`
//! (every write of the store notes one, after the write), and a search starts from the index
//! as it is after reading `.changes` — so a search asks the file system only about the
//! sessions changed since the last one, and never misses a change a gosling process finished
//! before it started. A session without messages is not asked at all. A file changed behind
//! the store's back (by hand) is seen once its session changes again, as the listing sees it.

use crate::atomic;
use crate::message::Message;
use crate::search_index::{self, Verdict};
use crate::sessions::{Listed, Listing, SessionStore};
use serde_json::Value;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The most read of one conversation file: a larger one is searched in its first 16 MiB.
const MAX_FILE: u64 = 16 << 20;

/// Sessions asked from their kept filters (no I/O, well under a microsecond each) between two
/// looks at the clock; after a session that needed the file system the clock is read at once.
const CHEAP_BETWEEN_CLOCKS: usize = 256;

/// What a search found.
pub struct Found {
    /// The positions (in the slice given, ascending) of the sessions whose messages say the
    /// query.
    pub hits: Vec<usize>,
    /// Every session given was read (false: the budget ran out first; the oldest were not).
    pub complete: bool,
}

/// The sessions among `sessions` (newest first) with a message whose text holds `query`,
/// ignoring case, within about `budget`. A file that cannot be read counts as not matching
/// (logged).
pub fn sessions_saying(store: &SessionStore, sessions: &[Listed<'_>], query: &str, budget: Duration) -> Found {
    let deadline = Instant::now() + budget;
    let needle = query.to_lowercase();
    let mut found = Found { hits: Vec::new(), complete: true };
    if needle.trim().is_empty() {
        return found;
    }
    let mut cheap = 0usize;
    for (n, s) in sessions.iter().enumerate() {
        if n > 0 && (cheap == 0 || cheap >= CHEAP_BETWEEN_CLOCKS) {
            cheap = 0;
            if Instant::now() >= deadline {
                found.complete = false;
                warm_later(sessions[n..].iter().map(|s| store.conversation_file(s.id())).collect());
                break;
            }
        }
        if s.message_count() == 0 {
            // Nothing said (the entry is replaced when a message is added).
            cheap += 1;
            continue;
        }
        let slot = s.search_slot();
        let known = slot.get();
        if known.is_some_and(|f| f.rules_out(&needle)) {
            cheap += 1;
            continue;
        }
        cheap = if known.is_some() { cheap + 1 } else { 0 };
        let lines = store.conversation_file(s.id());
        let (verdict, filter) = search_index::says(&lines, &needle, known);
        if let (None, Some(f)) = (known, filter) {
            let _ = slot.set(f);
        }
        // The first file that exists holds the conversation.
        let hit = match verdict {
            Verdict::Yes => true,
            Verdict::No => false,
            Verdict::AskFile => says(&lines, &needle) == Some(true),
            Verdict::NoFile => says(&store.conversation_files(s.id())[1], &needle) == Some(true),
        };
        if hit {
            found.hits.push(n);
        }
    }
    found
}

/// Fills the kept filters (`Listed::search_slot`) of `listing`'s sessions from the summaries
/// already on disk, on a thread of its own, once per process: the first search of a new
/// process then asks the file system about no session whose summary an earlier search wrote
/// (Desktop lists its history as it starts, before anyone searches). A summary not written
/// yet is left to the first search, which writes it within its budget and the rest in the
/// background (`warm_later`), as before.
pub fn prefetch_filters(store: &SessionStore) {
    static DONE: AtomicBool = AtomicBool::new(false);
    if DONE.swap(true, Ordering::AcqRel) {
        return;
    }
    let store = store.handle();
    let spawned = std::thread::Builder::new().name("search-filters".into()).spawn(move || {
        let t = Instant::now();
        let listing = match store.listed() {
            Ok(l) => l,
            Err(e) => return log::warn!("search: no listing to read the summaries' filters for: {e}"),
        };
        let kept = fill_slots(&store, &listing);
        log::debug!("search: {kept} filters kept from their summaries in {:?}", t.elapsed());
    });
    if let Err(e) = spawned {
        log::warn!("search: no thread to read the summaries' filters ({e}); the first search reads them");
    }
}

/// `prefetch_filters`' work: each session with messages and no kept filter gets its stored
/// summary's filter when that summary is current. How many were kept.
fn fill_slots(store: &SessionStore, listing: &Listing) -> usize {
    let mut kept = 0;
    for s in listing.iter().filter(|s| s.message_count() > 0 && s.search_slot().get().is_none()) {
        if let Some(f) = search_index::stored_filter(&store.conversation_file(s.id())) {
            let _ = s.search_slot().set(f);
            kept += 1;
        }
    }
    kept
}

/// Brings the summaries of `files` up to date on a thread of its own (one at a time: a
/// search that runs out of budget while one works leaves the rest to the next).
fn warm_later(files: Vec<PathBuf>) {
    static RUNNING: AtomicBool = AtomicBool::new(false);
    if RUNNING.swap(true, Ordering::AcqRel) {
        return;
    }
    let spawned = std::thread::Builder::new().name("search-index".into()).spawn(|| {
        for f in files {
            search_index::warm(&f);
        }
        RUNNING.store(false, Ordering::Release);
    });
    if let Err(e) = spawned {
        log::warn!("search: no thread to bring the summaries up to date ({e}); the next search does it");
        RUNNING.store(false, Ordering::Release);
    }
}

/// Whether the conversation in `path` (a file of message lines, or the earlier one-file
/// layout with a `conversation` array) has a message whose text holds `needle` (lower case);
/// `None` when there is no such file.
fn says(path: &std::path::Path, needle: &str) -> Option<bool> {
    let mut bytes = Vec::new();
    let read = atomic::open_read(path).and_then(|f| f.take(MAX_FILE).read_to_end(&mut bytes));
    match read {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            log::warn!("search: {}", atomic::io_err(path, e));
            return Some(false);
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let lower = text.to_lowercase();
    // Where JSON escapes the query's characters the bytes cannot hold it: parse every line.
    let escaped = needle.chars().any(|c| c == '"' || c == '\\' || c.is_control());
    if !escaped && !lower.contains(needle) {
        return Some(false);
    }
    if path.extension().is_some_and(|e| e == "json") {
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let list = v.get("conversation").and_then(Value::as_array).cloned().unwrap_or_default();
        return Some(list.into_iter().any(|m| message_says(m, needle)));
    }
    Some(
        text.lines()
            .filter(|l| escaped || l.to_lowercase().contains(needle))
            .any(|l| serde_json::from_str::<Value>(l).is_ok_and(|m| message_says(m, needle))),
    )
}

fn message_says(v: Value, needle: &str) -> bool {
    Message::from_value(v).is_ok_and(|m| m.text().to_lowercase().contains(needle))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(role: &str, text: &str) -> Message {
        let v = json!({"role": role, "created": 1, "content": [{"type": "text", "text": text}], "metadata": {}});
        Message::from_value(v).unwrap()
    }

    #[test]
    fn finds_what_was_said_not_the_json_around_it() {
        let d = std::env::temp_dir().join(format!("gosling-search-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let st = SessionStore::open(&d).unwrap();
        let a = st.create("/w", vec![]).unwrap().id;
        let b = st.create("/w", vec![]).unwrap().id;
        let c = st.create("/w", vec![]).unwrap().id;
        st.append_message(&a, &message("user", "Where is the Zebra?")).unwrap();
        st.append_message(&a, &message("assistant", "In the \"zoo\", née Tiergarten")).unwrap();
        st.append_message(&b, &message("user", "nothing here")).unwrap();
        let found = |q: &str| {
            let listing = st.listed().unwrap();
            let all: Vec<Listed<'_>> = listing.iter().collect();
            let f = sessions_saying(&st, &all, q, Duration::from_secs(10));
            assert!(f.complete);
            let mut v: Vec<String> = f.hits.into_iter().map(|i| all[i].id().to_string()).collect();
            v.sort();
            v
        };
        assert_eq!(found("zebra"), std::slice::from_ref(&a), "case is ignored");
        assert_eq!(found("NÉE"), std::slice::from_ref(&a), "beyond ASCII too");
        assert_eq!(found("\"zoo\""), std::slice::from_ref(&a), "quotes, which JSON escapes");
        assert!(found("role").is_empty(), "a JSON key is not something said");
        assert!(found("created").is_empty());
        assert!(found("giraffe").is_empty());
        assert!(found("  ").is_empty(), "a blank query finds nothing");
        // The summaries follow the files: an append is found, a rewrite forgets what it cut,
        // a damaged or foreign summary is rebuilt, never believed.
        st.append_message(&b, &message("assistant", "a Giraffe, later")).unwrap();
        assert_eq!(found("giraffe"), std::slice::from_ref(&b));
        st.replace_conversation(&b, &[message("user", "nothing here")]).unwrap();
        assert!(found("giraffe").is_empty(), "cut by an edit");
        let summary = d.join("sessions/.search").join(&a);
        let mut bytes = std::fs::read(&summary).unwrap();
        let n = bytes.len();
        bytes[n - 3] ^= 0x20;
        std::fs::write(&summary, &bytes).unwrap();
        assert_eq!(found("zoo"), std::slice::from_ref(&a), "a damaged summary is rebuilt");
        st.delete(&c).unwrap();
        assert!(!d.join("sessions/.search").join(&c).exists(), "a deleted session's summary goes too");
        // A filter kept with a session's entry is asked again without the file; the entry a
        // change puts in its place is checked against the file again.
        let listing = st.listed().unwrap();
        let kept = listing.iter().find(|s| s.id() == a).unwrap();
        assert!(kept.search_slot().get().is_some(), "the filter is kept with the entry");
        st.append_message(&a, &message("user", "an Okapi too")).unwrap();
        assert_eq!(found("okapi"), std::slice::from_ref(&a), "the appended message is found");
        // A new store (a new process) keeps the filters of the summaries on disk without a
        // search: the current ones, never one a later change made stale.
        st.append_message(&b, &message("user", "stale now")).unwrap();
        let other = SessionStore::open(&d).unwrap();
        super::search_index::forget_cache_for_tests();
        let listing = other.listed().unwrap();
        assert_eq!(fill_slots(&other, &listing), 1, "a's summary is current; b's was not rewritten since its append");
        let a_slot = listing.iter().find(|s| s.id() == a).unwrap();
        assert!(a_slot.search_slot().get().is_some_and(|f| !f.rules_out("okapi")), "a's filter holds what a says");
        assert!(listing.iter().find(|s| s.id() == b).unwrap().search_slot().get().is_none());
        // No budget left: the newest session is still read, the rest are not (a new store:
        // nothing is kept yet).
        let fresh = SessionStore::open(&d).unwrap();
        let listing = fresh.listed().unwrap();
        let all: Vec<Listed<'_>> = listing.iter().collect();
        let f = sessions_saying(&fresh, &all, "zebra", Duration::ZERO);
        assert!(!f.complete && f.hits.len() <= 1);
        let _ = std::fs::remove_dir_all(&d);
    }
}
