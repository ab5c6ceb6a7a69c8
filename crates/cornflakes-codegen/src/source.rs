//! Where declarations sit in a `.proto` file, and the comments written before them.
//!
//! The parser (`crate::parse`) yields descriptors and the positions of what it resolves, not
//! the comments or every declaration's place. This scanner walks the same text a second time, only far enough to find each
//! message, enum, enum value, field and oneof (and the constructs we reject), so errors can say
//! `file:line:col` and comments can become `///` docs. It never decides what a file means: a
//! declaration it misses just has no position or docs.

use std::collections::HashMap;

pub use crate::place::Loc;

/// A declaration's position and leading comment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decl {
    pub loc: Loc,
    pub doc: String,
}

/// What the scanner found in one file. Keys are fully qualified names without a leading dot:
/// `pkg.Outer.Inner` (messages, enums), `pkg.Outer.field` (fields), `pkg.Outer.Enum.VALUE`
/// (enum values), `pkg.Outer.choice` (oneofs), `pkg.Service` (services),
/// `pkg.Service.Method` (methods).
#[derive(Clone, Debug, Default)]
pub struct SourceInfo {
    pub messages: HashMap<String, Decl>,
    pub enums: HashMap<String, Decl>,
    pub values: HashMap<String, Decl>,
    pub fields: HashMap<String, Decl>,
    pub oneofs: HashMap<String, Decl>,
    pub services: HashMap<String, Decl>,
    pub methods: HashMap<String, Decl>,
    /// `extend` blocks other than custom options: (keyword, position).
    pub blocks: Vec<(&'static str, Loc)>,
}

#[derive(Clone, Debug)]
struct Token {
    text: String,
    loc: Loc,
    /// Comment lines directly above the token (no blank line in between).
    doc: String,
}

fn tokenize(src: &str) -> Vec<Token> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    let mut doc: Vec<String> = Vec::new();
    // Line of the last token, to tell trailing comments from leading ones.
    let mut last_tok_line = 0u32;
    // Line where the pending comment block ended (to drop it when a blank line follows).
    let mut doc_end_line = 0u32;
    macro_rules! bump {
        () => {{
            if chars[i] == '\n' {
                line += 1;
                col = 1;
            } else {
                col += 1;
            }
            i += 1;
        }};
    }
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            bump!();
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            let start_line = line;
            let mut text = String::new();
            bump!();
            bump!();
            while i < chars.len() && chars[i] != '\n' {
                text.push(chars[i]);
                bump!();
            }
            if start_line != last_tok_line {
                if !doc.is_empty() && start_line > doc_end_line + 1 {
                    doc.clear();
                }
                doc.push(text);
                doc_end_line = start_line;
            }
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'*') {
            let start_line = line;
            let mut text = String::new();
            bump!();
            bump!();
            while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                text.push(chars[i]);
                bump!();
            }
            if i < chars.len() {
                bump!();
                bump!();
            }
            if start_line != last_tok_line {
                if !doc.is_empty() && start_line > doc_end_line + 1 {
                    doc.clear();
                }
                for l in text.lines() {
                    let l = l.trim();
                    let l = l.strip_prefix('*').unwrap_or(l).trim_end();
                    if !(l.is_empty() && doc.is_empty()) {
                        doc.push(l.to_string());
                    }
                }
                doc_end_line = line;
            }
            continue;
        }
        let loc = Loc { line, col };
        let mut text = String::new();
        if c.is_alphanumeric() || c == '_' || c == '.' {
            while i < chars.len()
                && (chars[i].is_alphanumeric() || chars[i] == '_' || chars[i] == '.')
            {
                text.push(chars[i]);
                bump!();
            }
        } else if c == '"' || c == '\'' {
            text.push(c);
            bump!();
            while i < chars.len() && chars[i] != c && chars[i] != '\n' {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    text.push(chars[i]);
                    bump!();
                }
                text.push(chars[i]);
                bump!();
            }
            if i < chars.len() && chars[i] == c {
                text.push(c);
                bump!();
            }
        } else {
            text.push(c);
            bump!();
        }
        let attached = if !doc.is_empty() && loc.line <= doc_end_line + 1 {
            doc.join("\n")
        } else {
            String::new()
        };
        doc.clear();
        last_tok_line = line;
        out.push(Token {
            text,
            loc,
            doc: attached,
        });
    }
    out
}

/// The files `src` imports, each with the position of its `import` keyword, read as the parser
/// reads them: comments and line breaks anywhere, either quote, adjacent literals joined,
/// escapes decoded. (`import` followed by a string literal is an import wherever it stands: a
/// field or type called `import` is never followed by one.)
pub fn imports(src: &str) -> Vec<(String, Loc)> {
    let toks = tokenize(src);
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if t.text != "import" {
            continue;
        }
        let mut j = i + 1;
        if toks
            .get(j)
            .is_some_and(|t| t.text == "public" || t.text == "weak")
        {
            j += 1;
        }
        let mut path = Vec::new();
        let mut any = false;
        while let Some(lit) = toks.get(j).and_then(|t| string_literal(&t.text)) {
            path.extend(lit);
            any = true;
            j += 1;
        }
        if any {
            out.push((String::from_utf8_lossy(&path).into_owned(), t.loc));
        }
    }
    out
}

/// The first opening bracket (`{`, `(`, `[` or `<`, outside comments and strings) that nests
/// deeper than `max` levels.
pub fn too_deep(src: &str, max: usize) -> Option<Loc> {
    let mut depth = 0usize;
    for t in tokenize(src) {
        match t.text.as_str() {
            "{" | "(" | "[" | "<" => {
                depth += 1;
                if depth > max {
                    return Some(t.loc);
                }
            }
            "}" | ")" | "]" | ">" => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// The bytes of a quoted string token (either quote, C-style escapes), or `None` if `token` is
/// not a complete string literal.
fn string_literal(token: &str) -> Option<Vec<u8>> {
    let quote = token.chars().next().filter(|&q| q == '"' || q == '\'')?;
    let body = token.strip_prefix(quote)?.strip_suffix(quote)?;
    let b = body.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    // Up to `max` digits of `radix` starting at `i`: their value and how many there were.
    let digits = |i: usize, radix: u32, max: usize| {
        let n = b[i..]
            .iter()
            .take(max)
            .take_while(|c| (**c as char).is_digit(radix))
            .count();
        let v = b[i..i + n].iter().fold(0u32, |v, c| {
            v * radix + (*c as char).to_digit(radix).unwrap_or(0)
        });
        (v, n)
    };
    while i < b.len() {
        if b[i] != b'\\' || i + 1 == b.len() {
            out.push(b[i]);
            i += 1;
            continue;
        }
        i += 1;
        let simple = match b[i] {
            b'a' => Some(7),
            b'b' => Some(8),
            b'f' => Some(12),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'v' => Some(11),
            c @ (b'\\' | b'\'' | b'"' | b'?') => Some(c),
            _ => None,
        };
        if let Some(c) = simple {
            out.push(c);
            i += 1;
        } else if b[i] == b'x' || b[i] == b'X' {
            let (v, n) = digits(i + 1, 16, 2);
            out.push(v as u8);
            i += 1 + n;
        } else if b[i].is_ascii_digit() {
            let (v, n) = digits(i, 8, 3);
            out.push(v as u8);
            i += n.max(1);
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

#[derive(Debug)]
enum Frame {
    Message(String),
    Enum(String),
    Service(String),
    Oneof,
    Other,
}

/// Scans one file's text.
pub fn scan(src: &str) -> SourceInfo {
    let toks = tokenize(src);
    let mut info = SourceInfo::default();
    let mut package = String::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    let text = |i: usize| toks.get(i).map(|t| t.text.as_str()).unwrap_or("");
    // Skips to the end of the statement starting at `i` (past its `;`), over nested brackets.
    let skip_statement = |mut i: usize| {
        let mut depth = 0i32;
        while i < toks.len() {
            match toks[i].text.as_str() {
                "{" | "[" | "(" => depth += 1,
                "}" | "]" | ")" => depth -= 1,
                ";" if depth <= 0 => return i + 1,
                _ => {}
            }
            i += 1;
        }
        i
    };
    let scope = |stack: &[Frame], package: &str| {
        let mut s = package.to_string();
        for f in stack {
            if let Frame::Message(n) | Frame::Enum(n) | Frame::Service(n) = f {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(n);
            }
        }
        s
    };
    let join = |scope: &str, name: &str| {
        if scope.is_empty() {
            name.to_string()
        } else {
            format!("{scope}.{name}")
        }
    };
    while i < toks.len() {
        let t = &toks[i];
        let decl = Decl {
            loc: t.loc,
            doc: t.doc.clone(),
        };
        match t.text.as_str() {
            "}" => {
                stack.pop();
                i += 1;
                continue;
            }
            ";" => {
                i += 1;
                continue;
            }
            _ => {}
        }
        if matches!(stack.last(), Some(Frame::Other)) {
            if t.text == "{" {
                stack.push(Frame::Other);
            }
            i += 1;
            continue;
        }
        match t.text.as_str() {
            "syntax" | "edition" | "import" | "option" | "reserved" | "extensions" => {
                i = skip_statement(i);
            }
            "package" => {
                package = text(i + 1).to_string();
                i = skip_statement(i);
            }
            "message" | "enum" if text(i + 2) == "{" => {
                let name = text(i + 1).to_string();
                let full = join(&scope(&stack, &package), &name);
                if t.text == "message" {
                    info.messages.insert(full, decl);
                    stack.push(Frame::Message(name));
                } else {
                    info.enums.insert(full, decl);
                    stack.push(Frame::Enum(name));
                }
                i += 3;
            }
            "oneof" if text(i + 2) == "{" => {
                let full = join(&scope(&stack, &package), text(i + 1));
                info.oneofs.insert(full, decl);
                stack.push(Frame::Oneof);
                i += 3;
            }
            "extend" if crate::place::is_options_message(text(i + 1)) => {
                // Custom options (`extend google.protobuf.FieldOptions { … }`): read and left
                // out, as prost does; the fields inside are not message fields.
                while i < toks.len() && toks[i].text != "{" {
                    i += 1;
                }
                stack.push(Frame::Other);
                i += 1;
            }
            "service" if text(i + 2) == "{" && stack.is_empty() => {
                let name = text(i + 1).to_string();
                info.services.insert(join(&package, &name), decl);
                stack.push(Frame::Service(name));
                i += 3;
            }
            "rpc" if matches!(stack.last(), Some(Frame::Service(_))) => {
                let full = join(&scope(&stack, &package), text(i + 1));
                info.methods.insert(full, decl);
                // `rpc M(A) returns (B);` or `rpc M(A) returns (B) { option …; }`: to the `;`
                // or the `}` closing the body, whichever ends the statement.
                let mut depth = 0i32;
                while i < toks.len() {
                    match toks[i].text.as_str() {
                        "{" | "(" | "[" => depth += 1,
                        "}" | ")" | "]" => {
                            depth -= 1;
                            if depth == 0 && toks[i].text == "}" {
                                i += 1;
                                break;
                            }
                        }
                        ";" if depth <= 0 => {
                            i += 1;
                            break;
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            "service" | "extend" => {
                if t.text == "extend" {
                    info.blocks.push(("extend", t.loc));
                }
                while i < toks.len() && toks[i].text != "{" {
                    i += 1;
                }
                stack.push(Frame::Other);
                i += 1;
            }
            _ => match stack.last() {
                Some(Frame::Enum(_)) => {
                    let full = join(&scope(&stack, &package), &t.text);
                    info.values.insert(full, decl);
                    i = skip_statement(i);
                }
                Some(Frame::Message(_)) | Some(Frame::Oneof) => {
                    let mut j = i;
                    if matches!(text(j), "optional" | "required" | "repeated") {
                        j += 1;
                    }
                    if text(j) == "group" {
                        let name = text(j + 1).to_string();
                        let full = join(&scope(&stack, &package), &name.to_lowercase());
                        info.fields.insert(full, decl);
                        while i < toks.len() && toks[i].text != "{" {
                            i += 1;
                        }
                        stack.push(Frame::Message(name));
                        i += 1;
                        continue;
                    }
                    if text(j) == "map" {
                        // map < K , V > name
                        while j < toks.len() && toks[j].text != ">" {
                            j += 1;
                        }
                    }
                    let full = join(&scope(&stack, &package), text(j + 1));
                    info.fields.insert(full, decl);
                    i = skip_statement(i);
                }
                _ => i = skip_statement(i),
            },
        }
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_declarations_and_leading_comments() {
        let src = r#"syntax = "proto3";
package demo.v1;

// A request.
// Two lines.
message Req {
  // The id.
  uint32 id = 1; // trailing, not a doc
  map<string, int32> counts = 2;

  // detached

  repeated bytes vals = 3 [packed = false];
  message Sub { bool f = 1; }
  oneof choice {
    string a = 4;
  }
  enum Kind {
    KIND_A = 0; /* trailing */
    /* B */
    KIND_B = 1;
  }
}
// The service.
service S {
  option deprecated = true;
  // Reads.
  rpc Get(Req) returns (Req) { option deprecated = true; }
  rpc Watch(Req) returns (stream Req);
  // Writes.
  rpc Put(Req) returns (Req) {}
}
"#;
        let s = scan(src);
        let req = &s.messages["demo.v1.Req"];
        assert_eq!(req.loc, Loc { line: 6, col: 1 });
        assert_eq!(req.doc, " A request.\n Two lines.");
        assert_eq!(s.fields["demo.v1.Req.id"].doc, " The id.");
        assert_eq!(s.fields["demo.v1.Req.counts"].loc, Loc { line: 9, col: 3 });
        assert_eq!(s.fields["demo.v1.Req.counts"].doc, "");
        assert_eq!(s.fields["demo.v1.Req.vals"].doc, "");
        assert!(s.messages.contains_key("demo.v1.Req.Sub"));
        assert!(s.fields.contains_key("demo.v1.Req.Sub.f"));
        assert!(s.fields.contains_key("demo.v1.Req.a"));
        assert!(s.oneofs.contains_key("demo.v1.Req.choice"));
        assert_eq!(s.values["demo.v1.Req.Kind.KIND_B"].doc, "B");
        assert_eq!(s.values["demo.v1.Req.Kind.KIND_A"].doc, "");
        assert!(s.blocks.is_empty());
        assert_eq!(s.services["demo.v1.S"].loc, Loc { line: 25, col: 1 });
        assert_eq!(s.services["demo.v1.S"].doc, " The service.");
        assert_eq!(s.methods["demo.v1.S.Get"].doc, " Reads.");
        assert_eq!(s.methods["demo.v1.S.Get"].loc, Loc { line: 28, col: 3 });
        assert_eq!(s.methods["demo.v1.S.Watch"].doc, "");
        assert_eq!(s.methods["demo.v1.S.Put"].doc, " Writes.");
        assert_eq!(s.methods["demo.v1.S.Put"].loc, Loc { line: 31, col: 3 });
    }

    #[test]
    fn imports_are_read_as_the_parser_reads_them() {
        let src = "syntax = \"proto3\";\n// import \"no.proto\";\n  import public \"a/b.proto\";\n\
                   import \"c.proto\"; // x\nimport 'single.proto';\nimport\n  \"next_line.proto\";\n\
                   import /* c */ \"com\" 'bined.proto';\nimport \"esc\\x61pe\\056proto\";\n\
                   message M { string import = 1; }\n";
        let found: Vec<(String, (u32, u32))> = imports(src)
            .into_iter()
            .map(|(p, l)| (p, (l.line, l.col)))
            .collect();
        let want = [
            ("a/b.proto", (3, 3)),
            ("c.proto", (4, 1)),
            ("single.proto", (5, 1)),
            ("next_line.proto", (6, 1)),
            ("combined.proto", (8, 1)),
            ("escape.proto", (9, 1)),
        ];
        let want: Vec<(String, (u32, u32))> =
            want.iter().map(|(p, l)| (p.to_string(), *l)).collect();
        assert_eq!(found, want);
    }
}
