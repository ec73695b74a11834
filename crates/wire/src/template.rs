//! The `${VAR}` grammar of extension header values and environment references, in one place.
//!
//! A reference is `${NAME}` (spaces allowed inside the braces: `${ NAME }`) or `$NAME`, where
//! NAME is `[A-Za-z_][A-Za-z0-9_]*`, as goose substitutes them. Anything else containing `$`
//! (`$5`, `${}`, `${A-B}`, a lone `$`) is literal text. Pure: where values come from is the
//! caller's business (`extensions::runtime` reads the secrets store, never the process env).

fn is_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_cont(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// One piece of a value: literal text, or a reference to a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece<'a> {
    Text(&'a str),
    Var(&'a str),
}

/// Splits `v` into literal text and variable references, in order.
pub fn pieces(v: &str) -> Vec<Piece<'_>> {
    let b = v.as_bytes();
    let mut out = Vec::new();
    let mut lit = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'$' {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        let found = if b.get(j) == Some(&b'{') {
            j += 1;
            while b.get(j) == Some(&b' ') {
                j += 1;
            }
            let s = j;
            if b.get(j).is_some_and(|c| is_start(*c)) {
                while b.get(j).is_some_and(|c| is_cont(*c)) {
                    j += 1;
                }
                let e = j;
                while b.get(j) == Some(&b' ') {
                    j += 1;
                }
                (b.get(j) == Some(&b'}')).then(|| (s, e, j + 1))
            } else {
                None
            }
        } else if b.get(j).is_some_and(|c| is_start(*c)) {
            let s = j;
            while b.get(j).is_some_and(|c| is_cont(*c)) {
                j += 1;
            }
            Some((s, j, j))
        } else {
            None
        };
        match found {
            Some((s, e, next)) => {
                if lit < i {
                    out.push(Piece::Text(&v[lit..i]));
                }
                out.push(Piece::Var(&v[s..e]));
                i = next;
                lit = next;
            }
            None => i += 1,
        }
    }
    if lit < b.len() {
        out.push(Piece::Text(&v[lit..]));
    }
    out
}

/// The variables `v` refers to, each once, in order.
pub fn vars(v: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in pieces(v) {
        if let Piece::Var(n) = p {
            if !out.iter().any(|o| o == n) {
                out.push(n.to_string());
            }
        }
    }
    out
}

/// A variable `substitute`'s lookup does not know: its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownVar(pub String);

/// `v` with every reference replaced by `lookup(NAME)`; `Err` names the first variable `lookup`
/// does not know.
pub fn substitute(v: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, UnknownVar> {
    let mut out = String::with_capacity(v.len());
    for p in pieces(v) {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Var(n) => out.push_str(&lookup(n).ok_or_else(|| UnknownVar(n.to_string()))?),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar() {
        assert_eq!(vars("Bearer ${TOKEN}"), ["TOKEN"]);
        assert_eq!(vars("${ A } $B-$C ${A} $1 ${} $"), ["A", "B", "C"]);
        assert_eq!(vars("${A-B} ${ 1A } $"), Vec::<String>::new());
        assert!(vars("plain=value==").is_empty());
        let look = |n: &str| match n {
            "TOKEN" => Some("abc".to_string()),
            "A_1" => Some("x".to_string()),
            _ => None,
        };
        assert_eq!(substitute("Bearer ${TOKEN}", &look).unwrap(), "Bearer abc");
        assert_eq!(substitute("Bearer ${ TOKEN }", &look).unwrap(), "Bearer abc");
        assert_eq!(substitute("cost $5 and $ and ${", &look).unwrap(), "cost $5 and $ and ${");
        assert_eq!(substitute("${TOKEN}${A_1}$TOKEN.x", &look).unwrap(), "abcxabc.x");
        assert_eq!(substitute("a ${NOPE} b", &look).unwrap_err(), UnknownVar("NOPE".into()));
        // A value is substituted once: `$` in a value is not expanded again.
        let dollar = |_: &str| Some("$TOKEN".to_string());
        assert_eq!(substitute("${X}", &dollar).unwrap(), "$TOKEN");
    }
}
