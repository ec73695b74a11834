//! Name lists (`"PATH LC_* *_PROXY"`): the one notation of the lists the trust policy, the
//! child environment and the secret rules keep; and text made safe to print on a terminal.

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

#[cfg(test)]
mod tests {
    use super::*;

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
