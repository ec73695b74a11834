//! Percent-encoding, in one place: the strict decoder for `goose://` links, the lenient one for
//! request paths and queries (and `a=b&c` pairs), and the form encoder. Pure. The bytes are
//! decoded and encoded by the `percent-encoding` crate (already in the build through ureq);
//! what is ours is the strictness and the `+` rule.

use crate::Error;
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// Everything but RFC 3986's unreserved characters is escaped.
const NOT_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// `application/x-www-form-urlencoded`, strict: `+` → space, `%XX` → byte; a `%` not followed
/// by two hex digits, or bytes that are not UTF-8, are errors.
pub fn form_decode(raw: &str) -> Result<String, Error> {
    let b = raw.as_bytes();
    // The crate keeps a malformed escape as it is: refuse one first, naming it.
    if let Some(i) = (0..b.len()).find(|&i| {
        b[i] == b'%'
            && !(b.get(i + 1).is_some_and(u8::is_ascii_hexdigit) && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit))
    }) {
        return Err(Error::BadEscape { at: raw[i..].chars().take(3).collect() });
    }
    let spaced = raw.replace('+', " ");
    percent_decode_str(&spaced).decode_utf8().map(|s| s.into_owned()).map_err(|_| Error::NotUtf8)
}

/// Lenient, for paths and queries: a malformed escape is kept literally, `+` is kept, invalid
/// UTF-8 is replaced.
pub fn decode_lenient(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// `application/x-www-form-urlencoded` of one value: everything but the unreserved characters
/// (RFC 3986) as `%XX`.
pub fn form_encode(s: &str) -> String {
    utf8_percent_encode(s, NOT_UNRESERVED).to_string()
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
        assert_eq!(form_decode("%zz").unwrap_err(), Error::BadEscape { at: "%zz".into() });
        assert_eq!(form_decode("%ff").unwrap_err(), Error::NotUtf8);
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
