//! Percent-encoding, in one place: the strict decoder for `goose://` links, the lenient one for
//! request paths and queries (and `a=b&c` pairs), and the form encoder. Pure.

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Why a strict decode failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PercentError {
    /// A `%` not followed by two hex digits; `at` is the text from the `%` (up to 3 chars).
    BadEscape { at: String },
    /// The decoded bytes are not UTF-8.
    NotUtf8,
}

impl std::fmt::Display for PercentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PercentError::BadEscape { at } => write!(f, "has an invalid percent escape {at:?}; write % as %25"),
            PercentError::NotUtf8 => write!(f, "decodes to bytes that are not UTF-8; percent-encode text as UTF-8"),
        }
    }
}

/// `application/x-www-form-urlencoded`, strict: `+` → space, `%XX` → byte; a `%` not followed
/// by two hex digits, or bytes that are not UTF-8, are errors.
pub fn form_decode(raw: &str) -> Result<String, PercentError> {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => match (b.get(i + 1).copied().and_then(hex), b.get(i + 2).copied().and_then(hex)) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 3;
                }
                _ => return Err(PercentError::BadEscape { at: raw[i..].chars().take(3).collect() }),
            },
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| PercentError::NotUtf8)
}

/// Lenient, for paths and queries: a malformed escape is kept literally, `+` is kept, invalid
/// UTF-8 is replaced.
pub fn decode_lenient(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `application/x-www-form-urlencoded` of one value: everything but the unreserved characters
/// (RFC 3986) as `%XX`.
pub fn form_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(b as char),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// `a=b&c=d` split and decoded leniently, `+` read as a space (query strings, form bodies).
pub fn form_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode_lenient(&k.replace('+', " ")), decode_lenient(&v.replace('+', " ")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_and_lenient() {
        assert_eq!(form_decode("a+b%20c%2B").unwrap(), "a b c+");
        assert_eq!(form_decode("%zz").unwrap_err(), PercentError::BadEscape { at: "%zz".into() });
        assert_eq!(form_decode("%ff").unwrap_err(), PercentError::NotUtf8);
        assert_eq!(decode_lenient("My%20Tool"), "My Tool");
        assert_eq!(decode_lenient("100%"), "100%");
        assert_eq!(decode_lenient("%zz%4"), "%zz%4");
        assert_eq!(decode_lenient("a+b"), "a+b");
        assert_eq!(form_encode("a b&c=/é~"), "a%20b%26c%3D%2F%C3%A9~");
        assert_eq!(form_decode(&form_encode("a b&c=/é+")).unwrap(), "a b&c=/é+");
        assert_eq!(
            form_pairs("secret=a%2Bb&x=1+2&flag&&code=a%20b+c"),
            [
                ("secret".into(), "a+b".into()),
                ("x".into(), "1 2".into()),
                ("flag".into(), String::new()),
                ("code".into(), "a b c".into())
            ]
        );
    }
}
