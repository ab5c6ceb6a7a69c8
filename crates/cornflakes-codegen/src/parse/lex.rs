//! Tokens of a `.proto` file, each with its position: identifiers, numbers, string literals
//! (escapes decoded, adjacent literals left to the parser) and single-character symbols.
//! Comments and white space are skipped; a malformed token is an error at its position.

use crate::place::Loc;

/// What a token is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    /// `[A-Za-z_][A-Za-z0-9_]*`
    Ident(String),
    /// An integer literal as written (decimal, `0x…` or octal `0…`), without sign.
    Int(String),
    /// A floating-point literal as written, without sign.
    Float(String),
    /// A string literal's bytes (escapes decoded).
    Str(Vec<u8>),
    /// Any other printable character: `{ } [ ] ( ) < > ; , = . - + :` …
    Sym(char),
}

#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub tok: Tok,
    pub loc: Loc,
}

/// A token that does not lex, and where.
#[derive(Debug)]
pub(crate) struct LexError {
    pub loc: Loc,
    pub message: String,
}

/// The tokens of `src`.
pub(crate) fn tokens(src: &str) -> Result<Vec<Token>, LexError> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    // Advances over `n` bytes (columns count characters, not bytes).
    let advance = |i: &mut usize, line: &mut u32, col: &mut u32, n: usize| {
        for _ in 0..n {
            if *i >= b.len() {
                return;
            }
            if b[*i] == b'\n' {
                *line += 1;
                *col = 1;
            } else if b[*i] & 0xC0 != 0x80 {
                *col += 1;
            }
            *i += 1;
        }
    };
    while i < b.len() {
        let c = b[i];
        let loc = Loc { line, col };
        if c.is_ascii_whitespace() {
            advance(&mut i, &mut line, &mut col, 1);
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            let n = b[i..]
                .iter()
                .position(|&x| x == b'\n')
                .unwrap_or(b.len() - i);
            advance(&mut i, &mut line, &mut col, n);
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let Some(n) = src[i + 2..].find("*/") else {
                return Err(LexError {
                    loc,
                    message: "unterminated comment: `/*` without `*/`".into(),
                });
            };
            advance(&mut i, &mut line, &mut col, n + 4);
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let n = b[i..]
                .iter()
                .position(|x| !(x.is_ascii_alphanumeric() || *x == b'_'))
                .unwrap_or(b.len() - i);
            out.push(Token {
                tok: Tok::Ident(src[i..i + n].to_string()),
                loc,
            });
            advance(&mut i, &mut line, &mut col, n);
        } else if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            let (tok, n) = number(&b[i..]).ok_or_else(|| LexError {
                loc,
                message: format!(
                    "malformed number `{}`",
                    String::from_utf8_lossy(&b[i..i + word_len(&b[i..])])
                ),
            })?;
            out.push(Token { tok, loc });
            advance(&mut i, &mut line, &mut col, n);
        } else if c == b'"' || c == b'\'' {
            let (bytes, n) = string(&b[i..]).map_err(|message| LexError { loc, message })?;
            out.push(Token {
                tok: Tok::Str(bytes),
                loc,
            });
            advance(&mut i, &mut line, &mut col, n);
        } else if c.is_ascii_graphic() {
            out.push(Token {
                tok: Tok::Sym(c as char),
                loc,
            });
            advance(&mut i, &mut line, &mut col, 1);
        } else {
            let ch = src[i..].chars().next().unwrap_or('?');
            return Err(LexError {
                loc,
                message: format!("unexpected character {ch:?}"),
            });
        }
    }
    Ok(out)
}

/// Bytes of the identifier-like run at the start of `b`.
fn word_len(b: &[u8]) -> usize {
    b.iter()
        .position(|x| !(x.is_ascii_alphanumeric() || matches!(x, b'_' | b'.')))
        .unwrap_or(b.len())
        .max(1)
}

/// A number at the start of `b`: its token and length.
fn number(b: &[u8]) -> Option<(Tok, usize)> {
    let text = |n: usize| String::from_utf8_lossy(&b[..n]).into_owned();
    if b.len() > 1 && b[0] == b'0' && (b[1] == b'x' || b[1] == b'X') {
        let n = 2 + b[2..].iter().take_while(|c| c.is_ascii_hexdigit()).count();
        if n == 2
            || b.get(n)
                .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            return None;
        }
        return Some((Tok::Int(text(n)), n));
    }
    let mut n = b.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut float = false;
    if b.get(n) == Some(&b'.') {
        float = true;
        n += 1;
        n += b[n..].iter().take_while(|c| c.is_ascii_digit()).count();
    }
    if matches!(b.get(n), Some(b'e' | b'E')) {
        let mut k = n + 1;
        if matches!(b.get(k), Some(b'+' | b'-')) {
            k += 1;
        }
        let digits = b[k..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        float = true;
        n = k + digits;
    }
    if b.get(n)
        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
    {
        return None;
    }
    let t = text(n);
    if !float && t.len() > 1 && t.starts_with('0') && !t.bytes().all(|c| (b'0'..=b'7').contains(&c))
    {
        return None;
    }
    Some((if float { Tok::Float(t) } else { Tok::Int(t) }, n))
}

/// A quoted string at the start of `b` (either quote, C escapes): its bytes and length.
fn string(b: &[u8]) -> Result<(Vec<u8>, usize), String> {
    let quote = b[0];
    let mut out = Vec::new();
    let mut i = 1;
    let digits = |from: usize, radix: u32, max: usize| {
        let n = b[from..]
            .iter()
            .take(max)
            .take_while(|c| (**c as char).is_digit(radix))
            .count();
        let v = b[from..from + n].iter().fold(0u32, |v, c| {
            v * radix + (*c as char).to_digit(radix).unwrap_or(0)
        });
        (v, n)
    };
    loop {
        let Some(&c) = b.get(i) else {
            return Err("unterminated string literal".into());
        };
        match c {
            b'\n' => return Err("string literal not closed on its line".into()),
            _ if c == quote => return Ok((out, i + 1)),
            b'\\' => {
                let Some(&e) = b.get(i + 1) else {
                    return Err("unterminated string literal".into());
                };
                i += 2;
                match e {
                    b'a' => out.push(7),
                    b'b' => out.push(8),
                    b'f' => out.push(12),
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'v' => out.push(11),
                    b'\\' | b'\'' | b'"' | b'?' => out.push(e),
                    b'x' | b'X' => {
                        let (v, n) = digits(i, 16, 2);
                        if n == 0 {
                            return Err("`\\x` without hex digits in a string literal".into());
                        }
                        out.push(v as u8);
                        i += n;
                    }
                    b'0'..=b'7' => {
                        let (v, n) = digits(i - 1, 8, 3);
                        if v > 255 {
                            return Err("octal escape above \\377 in a string literal".into());
                        }
                        out.push(v as u8);
                        i += n - 1;
                    }
                    b'u' | b'U' => {
                        let want = if e == b'u' { 4 } else { 8 };
                        let (v, n) = digits(i, 16, want);
                        let ch = char::from_u32(v).filter(|_| n == want).ok_or_else(|| {
                            format!("bad `\\{}` escape in a string literal", e as char)
                        })?;
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        i += n;
                    }
                    _ => return Err(format!("unknown escape `\\{}`", e as char)),
                }
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        tokens(src).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn numbers_strings_and_positions() {
        assert_eq!(
            toks("x = 0x1F 017 1.5e3 .5 \"a\\x41\\101\\n\" 'q'"),
            vec![
                Tok::Ident("x".into()),
                Tok::Sym('='),
                Tok::Int("0x1F".into()),
                Tok::Int("017".into()),
                Tok::Float("1.5e3".into()),
                Tok::Float(".5".into()),
                Tok::Str(b"aAA\n".to_vec()),
                Tok::Str(b"q".to_vec()),
            ]
        );
        let t = tokens("// c\n/* a\n b */ message é").unwrap_err();
        assert_eq!((t.loc.line, t.loc.col), (3, 15));
        let t = tokens("a\n  b").unwrap();
        assert_eq!((t[1].loc.line, t[1].loc.col), (2, 3));
        for bad in ["09", "0x", "1e", "\"open", "\"\\q\"", "/* x", "12ab"] {
            assert!(tokens(bad).is_err(), "{bad}");
        }
    }
}
