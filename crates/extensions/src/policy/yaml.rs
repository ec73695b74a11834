//! goose's allowlist YAML (`GOOSE_ALLOWLIST`): only the block form `extensions:` / `- command: …`
//! with plain, single- or double-quoted scalars on one line. Pure: no I/O.

use crate::error::{Malformed, YamlProblem};

/// Parses goose's allowlist YAML: a top-level `extensions:` list whose items carry `command:`
/// (plain, single- or double-quoted scalars). Only that block form is understood; anything that
/// would leave an item without a command is an error rather than a silently shorter list.
pub(crate) fn parse_allowlist_yaml(text: &str) -> Result<Vec<String>, Malformed> {
    let mut in_list = false;
    let mut seen_key = false;
    let mut items: Vec<Option<String>> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim_end();
        let body = line.trim_start();
        if body.is_empty() || body.starts_with('#') || body == "---" {
            continue;
        }
        let indent = line.len() - body.len();
        if indent == 0 && !body.starts_with('-') {
            in_list = false;
            if let Some(rest) = body.strip_prefix("extensions:") {
                seen_key = true;
                let rest = strip_comment(rest).trim();
                match rest {
                    "" => in_list = true,
                    "[]" => {}
                    _ => return Err(Malformed::Line(n + 1, YamlProblem::NotBlockForm)),
                }
            }
            continue;
        }
        if !in_list {
            continue;
        }
        let mut entry = body;
        if let Some(rest) = body.strip_prefix('-') {
            if !(rest.is_empty() || rest.starts_with(' ')) {
                return Err(Malformed::Line(n + 1, YamlProblem::BadListItem));
            }
            items.push(None);
            entry = rest.trim_start();
            if entry.is_empty() {
                continue;
            }
        }
        if entry.starts_with('{') {
            return Err(Malformed::Line(n + 1, YamlProblem::FlowMapping));
        }
        if let Some(value) = entry.strip_prefix("command:") {
            let cmd = yaml_scalar(value).map_err(|p| Malformed::Line(n + 1, p))?;
            match items.last_mut() {
                Some(slot) if slot.is_none() => *slot = Some(cmd),
                Some(_) => return Err(Malformed::Line(n + 1, YamlProblem::TwoCommands)),
                None => return Err(Malformed::Line(n + 1, YamlProblem::CommandOutsideItem)),
            }
        }
    }
    if !seen_key {
        return Err(Malformed::NoExtensionsKey);
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, c)| c.filter(|c| !c.trim().is_empty()).ok_or(Malformed::EmptyCommand(i + 1)))
        .collect()
}

fn strip_comment(s: &str) -> &str {
    match s.find(" #") {
        Some(i) => &s[..i],
        None if s.trim_start().starts_with('#') => "",
        None => s,
    }
}

/// A YAML scalar on one line: `'…'` (with `''`), `"…"` (with `\"`, `\\`), or plain.
fn yaml_scalar(v: &str) -> Result<String, YamlProblem> {
    let v = v.trim();
    if let Some(rest) = v.strip_prefix('\'') {
        let mut out = String::new();
        let mut chars = rest.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\'' {
                if chars.peek() == Some(&'\'') {
                    chars.next();
                    out.push('\'');
                } else {
                    return Ok(out);
                }
            } else {
                out.push(c);
            }
        }
        Err(YamlProblem::Unterminated('\''))
    } else if let Some(rest) = v.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => return Ok(out),
                '\\' => match chars.next() {
                    Some('"') => out.push('"'),
                    Some('\\') => out.push('\\'),
                    Some('t') => out.push('\t'),
                    Some('/') => out.push('/'),
                    Some(o) => return Err(YamlProblem::BadEscape(o)),
                    None => break,
                },
                c => out.push(c),
            }
        }
        Err(YamlProblem::Unterminated('"'))
    } else {
        Ok(strip_comment(v).trim().to_string())
    }
}
