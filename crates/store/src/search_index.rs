//! A search summary per session, so a history search does not read and parse every
//! conversation: `sessions/.search/<id>` holds the lower-cased text of each message (what
//! `Message::text` says, one message after another, each ended by the byte 0xFF, which UTF-8
//! never uses, so a match never spans two messages) and a trigram filter over it; each
//! process keeps the filters in memory.
//!
//! The summary is a cache, never trusted over the conversation file: it records the file it was
//! made from (inode, length, modification time) and the last whole line it covers (offset,
//! length, hash). A search stats the conversation file; when the file changed, lines appended
//! after the covered one are read and added (the covered line re-read and compared first), and
//! anything else — another inode, a rewrite, a summary that does not parse or whose checksum
//! fails — rebuilds it from the file. It is written without fsync (a temp file renamed over
//! the old one, so several processes sharing the state dir each see a whole summary): after a
//! power loss a damaged one fails its checksum and is rebuilt.

use crate::atomic;
use crate::message::Message;
use std::collections::{HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

const MAGIC: &[u8; 8] = b"gsearch1";
/// Ends each message's text in the summary.
const END: u8 = 0xFF;
/// The most text a summary holds; a session that says more is searched in its file.
const MAX_TEXT: u64 = 16 << 20;
/// The filter's size bounds, in bits (256 bytes to 8 KiB a session).
const MIN_BITS: usize = 1 << 11;
const MAX_BITS: usize = 1 << 16;
/// The header: magic, then 13 little-endian u64s (`encode`), then the filter, then the text.
const HEAD: usize = 8 + 13 * 8;

/// The conversation file a summary was made from, and how far it covers it.
#[derive(Clone, Copy, PartialEq, Debug, Default)]
struct Stamp {
    ino: u64,
    len: u64,
    mtime: i64,
    mtime_ns: i64,
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp { ino: m.ino(), len: m.len(), mtime: m.mtime(), mtime_ns: m.mtime_nsec() }
    }
}

#[derive(Clone, Copy, PartialEq, Debug, Default)]
struct Head {
    file: Stamp,
    /// Just after the last whole line read.
    covered: u64,
    /// That line's length (`\n` included) and hash (0, 0: no line yet).
    last_len: u64,
    last_hash: u64,
    /// The text is cut at `MAX_TEXT`: the file must be searched itself.
    partial: bool,
}

/// What a process keeps of a summary: its header and filter.
pub(crate) struct Filter {
    head: Head,
    bits: Box<[u64]>,
}

impl Filter {
    /// Whether the text may hold every trigram of `needle` (always, for shorter needles).
    fn may_hold(&self, needle: &[u8]) -> bool {
        let n = self.bits.len() * 64;
        needle.windows(3).all(|t| {
            let b = slot(t, n);
            self.bits[b / 64] & (1 << (b % 64)) != 0
        })
    }
}

impl Filter {
    /// Whether the text cannot hold `needle` (lower case) by the filter alone.
    pub(crate) fn rules_out(&self, needle: &str) -> bool {
        !self.head.partial && !self.may_hold(needle.as_bytes())
    }
}

fn slot(t: &[u8], nbits: usize) -> usize {
    let v = u32::from(t[0]) << 16 | u32::from(t[1]) << 8 | u32::from(t[2]);
    // nbits is a power of two; the multiply spreads the 24 bits over the top ones.
    (v.wrapping_mul(0x9E37_79B1) >> (32 - nbits.trailing_zeros())) as usize
}

fn filter_of(text: &[u8], head: Head) -> Filter {
    let mut seen = HashSet::new();
    for seg in text.split(|&b| b == END) {
        seen.extend(seg.windows(3).map(|t| u32::from(t[0]) << 16 | u32::from(t[1]) << 8 | u32::from(t[2])));
    }
    // About 8 bits a trigram: an absent trigram passes 1 time in 9.
    let nbits = (seen.len() * 8).next_power_of_two().clamp(MIN_BITS, MAX_BITS);
    let mut bits = vec![0u64; nbits / 64].into_boxed_slice();
    for v in seen {
        let b = slot(&[(v >> 16) as u8, (v >> 8) as u8, v as u8], nbits);
        bits[b / 64] |= 1 << (b % 64);
    }
    Filter { head, bits }
}

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

fn encode(f: &Filter, text: &[u8]) -> Vec<u8> {
    let bits: Vec<u8> = f.bits.iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut out = Vec::with_capacity(HEAD + bits.len() + text.len());
    out.extend_from_slice(MAGIC);
    let (h, s) = (f.head, f.head.file);
    let fields = [s.ino, s.len, s.mtime as u64, s.mtime_ns as u64, h.covered, h.last_len, h.last_hash];
    let sizes = [u64::from(h.partial), bits.len() as u64, fnv(&bits), text.len() as u64, fnv(text)];
    for v in fields.into_iter().chain(sizes) {
        out.extend_from_slice(&v.to_le_bytes());
    }
    let sum = fnv(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out.extend_from_slice(&bits);
    out.extend_from_slice(text);
    out
}

/// A summary's header, if `bytes` starts with an intact one: (header, filter bytes, text bytes).
fn decode_head(bytes: &[u8]) -> Option<(Head, usize, u64, usize, u64)> {
    if bytes.len() < HEAD || &bytes[..8] != MAGIC {
        return None;
    }
    let u = |i: usize| u64::from_le_bytes(bytes[8 + i * 8..16 + i * 8].try_into().unwrap_or_default());
    if fnv(&bytes[..HEAD - 8]) != u(12) {
        return None;
    }
    let file = Stamp { ino: u(0), len: u(1), mtime: u(2) as i64, mtime_ns: u(3) as i64 };
    let head = Head { file, covered: u(4), last_len: u(5), last_hash: u(6), partial: u(7) != 0 };
    let nbits = u(8) as usize * 8;
    if !(MIN_BITS..=MAX_BITS).contains(&nbits)
        || !nbits.is_power_of_two()
        || u(10) > MAX_TEXT
        || head.last_len > head.covered
    {
        return None;
    }
    Some((head, nbits / 8, u(9), u(10) as usize, u(11)))
}

fn bits_of(bytes: &[u8]) -> Box<[u64]> {
    bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())).collect()
}

/// A whole summary: its filter and text; `None` when it is not whole and intact.
fn decode(bytes: &[u8]) -> Option<(Filter, &[u8])> {
    let (head, nbytes, bits_sum, tlen, text_sum) = decode_head(bytes)?;
    let bits = bytes.get(HEAD..HEAD + nbytes)?;
    let text = bytes.get(HEAD + nbytes..)?;
    if fnv(bits) != bits_sum || text.len() != tlen || fnv(text) != text_sum {
        return None;
    }
    Some((Filter { head, bits: bits_of(bits) }, text))
}

/// The filters this process holds, by conversation file.
fn filters() -> &'static Mutex<HashMap<PathBuf, Arc<Filter>>> {
    static F: OnceLock<Mutex<HashMap<PathBuf, Arc<Filter>>>> = OnceLock::new();
    F.get_or_init(Default::default)
}

fn cached(path: &Path) -> Option<Arc<Filter>> {
    filters().lock().unwrap_or_else(|p| p.into_inner()).get(path).cloned()
}

/// Forgets every filter this process holds (a unit test's "new process").
#[cfg(test)]
pub(crate) fn forget_cache_for_tests() {
    filters().lock().unwrap_or_else(|p| p.into_inner()).clear();
}

fn keep(path: &Path, f: Option<Arc<Filter>>) {
    let mut all = filters().lock().unwrap_or_else(|p| p.into_inner());
    match f {
        Some(f) => all.insert(path.to_path_buf(), f),
        None => all.remove(path),
    };
}

/// Where session file `conversation`'s summary is (`<dir>/.search/<id>`).
pub(crate) fn summary_path(conversation: &Path) -> Option<PathBuf> {
    let dir = conversation.parent()?;
    let id = conversation.file_name()?.to_str()?.strip_suffix(".jsonl")?;
    Some(dir.join(".search").join(id))
}

/// Removes session file `conversation`'s summary (the session is deleted).
pub(crate) fn forget(conversation: &Path) {
    keep(conversation, None);
    if let Some(p) = summary_path(conversation) {
        let _ = std::fs::remove_file(p);
    }
}

/// What a summary says of a needle.
pub(crate) enum Verdict {
    /// The conversation file does not exist.
    NoFile,
    /// No message of the file says it.
    No,
    /// A message says it.
    Yes,
    /// The summary cannot tell (the text is larger than a summary holds, or it could not be
    /// read or written): search the file itself.
    AskFile,
}

/// Whether a message in conversation file `path` says `needle` (lower case), from its summary:
/// `known`, a filter already checked against the file since the session last changed
/// (`Listed::search_slot`: no `stat`), else the summary brought up to date with the file
/// first. With the verdict, the filter it came from when that filter describes the file (for
/// the caller to keep in the slot).
pub(crate) fn says(path: &Path, needle: &str, known: Option<&Arc<Filter>>) -> (Verdict, Option<Arc<Filter>>) {
    let Some(spath) = summary_path(path) else { return (Verdict::AskFile, None) };
    let (filter, text) = match known {
        Some(f) => (f.clone(), None),
        None => {
            let now = match std::fs::symlink_metadata(path) {
                Ok(m) if m.is_file() => Stamp::of(&m),
                Ok(_) => return (Verdict::AskFile, None),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    keep(path, None);
                    return (Verdict::NoFile, None);
                }
                Err(_) => return (Verdict::AskFile, None),
            };
            match current(path, &spath, now) {
                Ok(got) => got,
                Err(e) => {
                    log::warn!("search: {} (searching the file itself)", atomic::io_err(&spath, e));
                    return (Verdict::AskFile, None);
                }
            }
        }
    };
    if filter.head.partial {
        return (Verdict::AskFile, None);
    }
    if !filter.may_hold(needle.as_bytes()) {
        return (Verdict::No, Some(filter));
    }
    let text = match text {
        Some(t) => t,
        // The text as summarized for the same file (another process may have replaced the
        // summary since: then it must still describe the file as the filter did).
        None => match read_summary(&spath) {
            Some((f, t)) if f.head == filter.head => t,
            _ => match refresh(path, &spath) {
                Ok((f, t)) if !f.head.partial => t,
                _ => return (Verdict::AskFile, None),
            },
        },
    };
    let verdict = if memmem(&text, needle.as_bytes()) { Verdict::Yes } else { Verdict::No };
    (verdict, Some(filter))
}

/// The filter of session file `path` from the summary already on disk, when that summary
/// describes the file as it is now (one `stat` and the summary's head and filter read; no
/// summary is written, no conversation read).
pub(crate) fn stored_filter(path: &Path) -> Option<Arc<Filter>> {
    let spath = summary_path(path)?;
    let now = std::fs::symlink_metadata(path).ok().filter(|m| m.is_file()).map(|m| Stamp::of(&m))?;
    known_filter(path, &spath, now)
}

/// Brings session file `path`'s summary up to date (without searching it).
pub(crate) fn warm(path: &Path) {
    let Some(spath) = summary_path(path) else { return };
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if let Err(e) = current(path, &spath, Stamp::of(&m)) {
            log::warn!("search: {}", atomic::io_err(&spath, e));
        }
    }
}

/// The filter describing the file as stamped `now`: this process's, the stored summary's, or
/// a refreshed one (then with its text).
fn current(path: &Path, spath: &Path, now: Stamp) -> io::Result<(Arc<Filter>, Option<Vec<u8>>)> {
    if let Some(f) = known_filter(path, spath, now) {
        return Ok((f, None));
    }
    let (f, text) = refresh(path, spath)?;
    Ok((f, Some(text)))
}

/// The filter describing the file as stamped `now` that this process holds or the stored
/// summary has (then kept); `None` when neither is current.
fn known_filter(path: &Path, spath: &Path, now: Stamp) -> Option<Arc<Filter>> {
    if let Some(f) = cached(path).filter(|f| f.head.file == now) {
        return Some(f);
    }
    let f = Arc::new(load_filter(spath).filter(|f| f.head.file == now)?);
    keep(path, Some(f.clone()));
    Some(f)
}

fn memmem(hay: &[u8], needle: &[u8]) -> bool {
    let Some((&first, rest)) = needle.split_first() else { return true };
    let last = hay.len().saturating_sub(rest.len());
    (0..last).any(|i| hay[i] == first && hay[i + 1..].starts_with(rest))
}

/// The header and filter of the summary at `spath` (the text is not read).
fn load_filter(spath: &Path) -> Option<Filter> {
    let f = atomic::open_read(spath).ok()?;
    let mut head = [0u8; HEAD];
    f.read_exact_at(&mut head, 0).ok()?;
    let (head, nbytes, bits_sum, _, _) = decode_head(&head)?;
    let mut bits = vec![0u8; nbytes];
    f.read_exact_at(&mut bits, HEAD as u64).ok()?;
    (fnv(&bits) == bits_sum).then(|| Filter { head, bits: bits_of(&bits) })
}

fn read_summary(spath: &Path) -> Option<(Filter, Vec<u8>)> {
    let f = atomic::open_read(spath).ok()?;
    let mut bytes = Vec::new();
    f.take((HEAD + MAX_BITS / 8) as u64 + MAX_TEXT + 1).read_to_end(&mut bytes).ok()?;
    let (filter, text) = decode(&bytes)?;
    Some((filter, text.to_vec()))
}

/// The summary of `path` as the file is now: the stored one extended by the lines appended
/// since, when the file still holds its last covered line where it was, else rebuilt; written
/// back, and kept.
fn refresh(path: &Path, spath: &Path) -> io::Result<(Arc<Filter>, Vec<u8>)> {
    let mut file = atomic::open_read(path)?;
    let now = Stamp::of(&file.metadata()?);
    let base = read_summary(spath).filter(|(f, _)| {
        let h = f.head;
        h.file.ino == now.ino && h.covered <= now.len && !h.partial && {
            let mut line = vec![0u8; h.last_len as usize];
            file.read_exact_at(&mut line, h.covered - h.last_len).is_ok() && fnv(&line) == h.last_hash
        }
    });
    let (mut head, mut text) = base.map(|(f, t)| (f.head, t)).unwrap_or_default();
    head.file = now;
    file.seek(SeekFrom::Start(head.covered))?;
    let mut r = BufReader::with_capacity(64 << 10, file);
    let mut line = Vec::new();
    loop {
        line.clear();
        r.read_until(b'\n', &mut line)?; // wait: a regular file
        if line.last() != Some(&b'\n') {
            // The end, or a line still being written: the next search reads it.
            break;
        }
        head.covered += line.len() as u64;
        head.last_len = line.len() as u64;
        head.last_hash = fnv(&line);
        if head.partial {
            continue;
        }
        let said = serde_json::from_slice(&line).ok().and_then(|v| Message::from_value(v).ok()).map(|m| m.text());
        let said = said.map(|t| t.to_lowercase()).unwrap_or_default();
        if (text.len() + said.len() + 1) as u64 > MAX_TEXT {
            head.partial = true;
            text.clear();
            continue;
        }
        text.extend_from_slice(said.as_bytes());
        text.push(END);
    }
    let f = Arc::new(filter_of(&text, head));
    write_summary(spath, &encode(&f, &text))?;
    keep(path, Some(f.clone()));
    Ok((f, text))
}

/// Replaces the summary at `spath` (temp file in the sessions dir, renamed; no fsync: a cache).
fn write_summary(spath: &Path, bytes: &[u8]) -> io::Result<()> {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = spath.parent().ok_or_else(|| io::Error::other("no directory"))?;
    let sessions = dir.parent().ok_or_else(|| io::Error::other("no directory"))?;
    atomic::ensure_subdir(dir).map_err(|e| io::Error::other(e.to_string()))?;
    let name = spath.file_name().and_then(|n| n.to_str()).unwrap_or("summary");
    // In the sessions dir, named as the store's temp files are, so one a crash leaves is
    // removed at the next start.
    let tmp = sessions.join(format!(".{name}.search.tmp.{}.{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
    let r = (|| {
        let mut f =
            OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(&tmp)?;
        f.write_all(bytes)?;
        std::fs::rename(&tmp, spath)
    })();
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_round_trips_and_a_damaged_one_is_refused() {
        let head = Head {
            file: Stamp { ino: 7, len: 99, mtime: 5, mtime_ns: 6 },
            covered: 90,
            last_len: 30,
            last_hash: 42,
            partial: false,
        };
        let text = b"zebra\xffn\xc3\xa9e\xff";
        let bytes = encode(&filter_of(text, head), text);
        let (f, t) = decode(&bytes).unwrap();
        assert_eq!((f.head, t), (head, &text[..]));
        assert!(f.may_hold(b"zebra") && f.may_hold("née".as_bytes()));
        for i in [0, 9, HEAD - 3, HEAD + 2, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert!(decode(&bad).is_none(), "byte {i} flipped");
        }
        assert!(decode(&bytes[..bytes.len() - 1]).is_none(), "cut short");
    }

    #[test]
    fn the_filter_has_every_trigram_of_the_text_and_few_others() {
        let f = filter_of(b"where is the zebra?\xffin the zoo", Head::default());
        for q in ["zebra", "the z", "where is the zebra?", "zoo", "ze", ""] {
            assert!(f.may_hold(q.as_bytes()), "{q}");
        }
        let absent = ["giraffe", "lion", "elephant", "okapi", "penguin", "walrus"];
        assert!(absent.iter().filter(|q| f.may_hold(q.as_bytes())).count() <= 1);
        assert!(!f.may_hold(b"a?\xffin"), "a match does not span two messages");
    }
}
