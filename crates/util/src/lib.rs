//! Small helpers std lacks: random tokens, SHA-256, hex, base64, RFC 3339 timestamps and the
//! one way a mutex is locked.
#![deny(unsafe_code)]

use ring::rand::SecureRandom;
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

/// Whether `name` matches one word of a name list (`"PATH LC_* *_PROXY"`): a word ending in `*`
/// is a prefix, one starting with `*` a suffix, any other the whole name. Compared as written.
pub fn word_matches(word: &str, name: &str) -> bool {
    match (word.strip_suffix('*'), word.strip_prefix('*')) {
        (Some(prefix), _) => name.starts_with(prefix),
        (_, Some(suffix)) => name.ends_with(suffix),
        _ => name == word,
    }
}

/// Whether `name` matches a word of `list`, a name list of space-separated words (see
/// `word_matches`): the one notation of the lists the trust policy, the child environment and
/// the secret rules keep.
pub fn in_words(list: &str, name: &str) -> bool {
    list.split_whitespace().any(|w| word_matches(w, name))
}

/// `s` with control and bidi-override characters escaped, safe to print on a terminal.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}') {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Locks `m`, taking it over from a thread that panicked while holding it: a panic (a bug on
/// one request's thread) must not make every later request that needs the same map, queue or
/// buffer panic too. The one place that decides what a poisoned lock means.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `n` random bytes from the OS (the getrandom system call through ring: no file descriptor,
/// so it works when descriptors run out).
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    // getrandom(2) fails only on kernels older than 3.17, which gosling does not run on.
    ring::rand::SystemRandom::new().fill(&mut buf).expect("getrandom(2) is available on Linux >= 3.17");
    buf
}

/// `random_bytes(n)`, hex-encoded.
pub fn random_hex(n: usize) -> String {
    hex(&random_bytes(n))
}

pub fn unix_secs() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// `2025-01-01T10:00:00Z` for a Unix time in seconds (UTC).
pub fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

pub fn now_rfc3339() -> String {
    rfc3339(unix_secs())
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's method).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_735_725_600), "2025-01-01T10:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(random_hex(4).len(), 8);
    }

    #[test]
    fn name_lists() {
        let list = "PATH LC_* *_PROXY";
        for name in ["PATH", "LC_ALL", "LC_", "HTTPS_PROXY", "_PROXY"] {
            assert!(in_words(list, name), "{name}");
        }
        for name in ["PATHEXT", "path", "XLC_ALL", "HTTPS_PROXY_X", "", "LC"] {
            assert!(!in_words(list, name), "{name}");
        }
    }
}

/// SHA-256, for argument hashes in the audit log and certificate fingerprints (ring's).
pub fn sha256(data: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, data).as_ref());
    out
}

pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

#[cfg(test)]
mod sha_tests {
    use super::*;

    #[test]
    fn vectors() {
        assert_eq!(hex(&sha256(b"")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        assert_eq!(hex(&sha256(b"abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(
            hex(&sha256(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        assert_eq!(hex(&sha256(&[b'a'; 1000])), "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
    }
}

/// Base64 (RFC 4648): the URL-safe alphabet without padding (§5; PKCE, random tokens) or the
/// standard one with padding (§4; HTTP Basic credentials). The `base64` crate (already in the
/// build through ureq) does the work.
pub fn base64_encode(data: &[u8], url_safe: bool) -> String {
    use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
    use base64::Engine;
    if url_safe {
        URL_SAFE_NO_PAD.encode(data)
    } else {
        STANDARD.encode(data)
    }
}

/// Decodes standard or URL-safe base64 (one alphabet per text), padded or not; whitespace is
/// ignored. `None` for anything else.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{GeneralPurpose, PAD_INDIFFERENT};
    use base64::{alphabet, Engine};
    const LENIENT: base64::engine::GeneralPurposeConfig = PAD_INDIFFERENT.with_decode_allow_trailing_bits(true);
    const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);
    const URL_SAFE: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, LENIENT);
    let text: String = s.chars().filter(|c| !matches!(c, ' ' | '\n' | '\r' | '\t')).collect();
    let engine = if text.contains(['-', '_']) { &URL_SAFE } else { &STANDARD };
    engine.decode(text).ok()
}

#[cfg(test)]
mod b64_tests {
    #[test]
    fn decodes() {
        assert_eq!(super::base64_decode("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(super::base64_decode("aGVsbG8").unwrap(), b"hello");
        assert_eq!(super::base64_decode("-_8=").unwrap(), [0xfb, 0xff]);
        assert!(super::base64_decode("a*b").is_none());
    }

    #[test]
    fn encodes_both_alphabets_and_round_trips() {
        use super::{base64_decode, base64_encode};
        assert_eq!(base64_encode(b"\xfb\xff", true), "-_8");
        assert_eq!(base64_encode(b"\xfb\xff", false), "+/8=");
        assert_eq!(base64_encode(b"ab", false), "YWI=");
        assert_eq!(base64_encode(b"abc", false), "YWJj");
        assert_eq!(base64_encode(b"a", false), "YQ==");
        let all: Vec<u8> = (0..=255).collect();
        for n in 0..all.len() {
            assert_eq!(base64_decode(&base64_encode(&all[..n], n % 2 == 0)).unwrap(), &all[..n]);
        }
    }
}

/// xorshift64*: a deterministic PRNG for the fuzz tests (a fixed seed gives the same inputs
/// on every run and machine). Not for anything secret: use `random_hex` for that.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// `seed` with 1–`max_edits` random edits: delete a byte, insert one from `alphabet`,
    /// overwrite one with any byte, or cut the tail.
    pub fn mutate(&mut self, seed: &[u8], alphabet: &[u8], max_edits: usize) -> Vec<u8> {
        let mut b = seed.to_vec();
        for _ in 0..=self.below(max_edits) {
            match self.below(4) {
                0 if !b.is_empty() => {
                    let at = self.below(b.len());
                    b.remove(at);
                }
                1 => {
                    let at = self.below(b.len() + 1);
                    b.insert(at, alphabet[self.below(alphabet.len())]);
                }
                2 if !b.is_empty() => {
                    let at = self.below(b.len());
                    b[at] = self.next_u64() as u8;
                }
                _ => {
                    let cut = self.below(b.len() + 1);
                    b.truncate(cut);
                }
            }
        }
        b
    }
}
