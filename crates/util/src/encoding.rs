//! SHA-256, hex and base64 (RFC 4648).

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
mod tests {
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
