//! The `.proto` parser: proto2, proto3 and editions (2023, 2024) text → protobuf's
//! `FileDescriptorProto`, every error with its line and column.
//!
//! It reads what protoc reads (option values of any shape, `extensions N [declaration = {…}]`,
//! every builtin option), maps editions onto the model the rest of the crate knows (field
//! presence, packing, enum openness and UTF-8 checks do not change the Cornflakes wire, see
//! docs/codegen.md) and refuses, by name, the features it does not know. Type names are left as
//! written; [`resolve`] makes them fully qualified once every file is read.

mod lex;
mod load;
mod resolve;

use std::collections::HashMap;

use protobuf::descriptor::field_descriptor_proto::{Label, Type};
use protobuf::descriptor::{
    DescriptorProto, EnumDescriptorProto, EnumValueDescriptorProto, FieldDescriptorProto,
    FileDescriptorProto, MessageOptions, MethodDescriptorProto, OneofDescriptorProto,
    ServiceDescriptorProto,
};

use crate::place::Loc;
use lex::{Tok, Token};
pub(crate) use load::{load, well_known};

/// A syntax or semantic error in one file, and where.
#[derive(Debug)]
pub(crate) struct ParseError {
    pub loc: Loc,
    pub message: String,
}

type PResult<T> = Result<T, ParseError>;

/// A file as parsed: its descriptor (type names as written) and where things are.
#[derive(Debug, Default)]
pub(crate) struct ParsedFile {
    pub fd: FileDescriptorProto,
    /// Position of each type reference and declaration, by key (see [`Parser::note_loc`]).
    pub locs: HashMap<String, Loc>,
    /// The imports, as written, with the position of each `import`.
    pub imports: Vec<(String, Loc)>,
    /// Custom options of each method (`pkg.Service.Method`), as written: set as unknown
    /// fields of its `MethodOptions` once their extensions are resolved (the services model
    /// reads `(cornflakes.method_id)` and `(cornflakes.exactly_once)` from there).
    pub method_options: Vec<(String, String, Const)>,
}

/// Which rules the file follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Syntax {
    Proto2,
    Proto3,
    Editions,
}

/// The features of protobuf editions this compiler knows, with their values. Every one of
/// them changes only protobuf's own binary encoding, JSON or generated API, none the
/// Cornflakes wire (which always tracks presence, packs repeated scalars, keeps unknown enum
/// numbers and carries a group as a nested message), so they are accepted and change nothing.
const FEATURES: &[(&str, &[&str])] = &[
    (
        "field_presence",
        &["EXPLICIT", "IMPLICIT", "LEGACY_REQUIRED"],
    ),
    ("enum_type", &["OPEN", "CLOSED"]),
    ("repeated_field_encoding", &["PACKED", "EXPANDED"]),
    ("utf8_validation", &["VERIFY", "NONE"]),
    ("message_encoding", &["LENGTH_PREFIXED", "DELIMITED"]),
    ("json_format", &["ALLOW", "LEGACY_BEST_EFFORT"]),
    (
        "enforce_naming_style",
        &["STYLE2024", "STYLE_LEGACY", "STYLE2026"],
    ),
    (
        "default_symbol_visibility",
        &["EXPORT_ALL", "EXPORT_TOP_LEVEL", "LOCAL_ALL", "STRICT"],
    ),
    (
        "enforce_proto_limits",
        &["LEGACY_NO_EXPLICIT_LIMITS", "PROTO_LIMITS2026"],
    ),
];

/// The editions this compiler reads.
const EDITIONS: &[&str] = &["2023", "2024", "2026"];

/// Parses one file's text (`name` is its import path).
pub(crate) fn parse(name: &str, src: &str) -> PResult<ParsedFile> {
    let toks = lex::tokens(src).map_err(|e| ParseError {
        loc: e.loc,
        message: e.message,
    })?;
    let end = toks.last().map_or(Loc { line: 1, col: 1 }, |t| t.loc);
    let mut p = Parser {
        toks: &toks,
        i: 0,
        end,
        syntax: Syntax::Proto2,
        package: String::new(),
        out: ParsedFile::default(),
    };
    p.out.fd.set_name(name.to_string());
    p.file()?;
    Ok(p.out)
}

/// The bytes of a `[default = …]` of a `bytes` field as stored in a descriptor (C escapes, as
/// protoc writes them).
pub(crate) fn c_unescape(text: &str) -> Vec<u8> {
    match lex::tokens(&format!("\"{text}\"")) {
        Ok(t) => match t.as_slice() {
            [Token {
                tok: Tok::Str(b), ..
            }] => b.clone(),
            _ => text.as_bytes().to_vec(),
        },
        Err(_) => text.as_bytes().to_vec(),
    }
}

/// `bytes` as protoc writes a bytes default: printable ASCII kept, the rest as octal escapes.
fn c_escape(bytes: &[u8]) -> String {
    let mut s = String::new();
    for &b in bytes {
        match b {
            b'\\' => s.push_str("\\\\"),
            b'"' => s.push_str("\\\""),
            b'\'' => s.push_str("\\'"),
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\{b:03o}")),
        }
    }
    s
}

/// protoc's JSON name of a field (`ToJsonName`): each `_` dropped and the letter after it
/// capitalised, `user_id` → `userId`.
pub(crate) fn json_name(name: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// protoc's name of a map field's entry message: `my_map` → `MyMapEntry`.
fn map_entry_name(field: &str) -> String {
    let camel = json_name(field);
    let mut cs = camel.chars();
    let first: String = cs
        .next()
        .map(|c| c.to_uppercase().collect())
        .unwrap_or_default();
    first + cs.as_str() + "Entry"
}

fn scalar_type(name: &str) -> Option<Type> {
    Some(match name {
        "double" => Type::TYPE_DOUBLE,
        "float" => Type::TYPE_FLOAT,
        "int64" => Type::TYPE_INT64,
        "uint64" => Type::TYPE_UINT64,
        "int32" => Type::TYPE_INT32,
        "fixed64" => Type::TYPE_FIXED64,
        "fixed32" => Type::TYPE_FIXED32,
        "bool" => Type::TYPE_BOOL,
        "string" => Type::TYPE_STRING,
        "bytes" => Type::TYPE_BYTES,
        "uint32" => Type::TYPE_UINT32,
        "sfixed32" => Type::TYPE_SFIXED32,
        "sfixed64" => Type::TYPE_SFIXED64,
        "sint32" => Type::TYPE_SINT32,
        "sint64" => Type::TYPE_SINT64,
        _ => return None,
    })
}

fn join(scope: &str, name: &str) -> String {
    if scope.is_empty() {
        name.to_string()
    } else {
        format!("{scope}.{name}")
    }
}

/// An option's value, as far as this compiler needs it.
#[derive(Clone, Debug)]
pub(crate) enum Const {
    /// An identifier (enum value, `true`, `inf`), possibly with a leading `-`.
    Ident(String),
    /// A number as text in decimal (integers) or as written (floats), with its sign.
    Number(String),
    Str(Vec<u8>),
    /// A `{ … }` message value (read and skipped).
    Aggregate,
}

struct Parser<'t> {
    toks: &'t [Token],
    i: usize,
    /// Position reported for "end of file".
    end: Loc,
    syntax: Syntax,
    package: String,
    out: ParsedFile,
}

impl Parser<'_> {
    // ---- tokens ----

    fn peek_at(&self, k: usize) -> Option<&Tok> {
        self.toks.get(self.i + k).map(|t| &t.tok)
    }

    fn peek(&self) -> Option<&Tok> {
        self.peek_at(0)
    }

    fn loc(&self) -> Loc {
        self.toks.get(self.i).map_or(self.end, |t| t.loc)
    }

    fn err<T>(&self, loc: Loc, message: impl Into<String>) -> PResult<T> {
        Err(ParseError {
            loc,
            message: message.into(),
        })
    }

    fn found(&self) -> String {
        match self.peek() {
            None => "end of file".into(),
            Some(Tok::Ident(s)) => format!("`{s}`"),
            Some(Tok::Int(s) | Tok::Float(s)) => format!("`{s}`"),
            Some(Tok::Str(_)) => "a string".into(),
            Some(Tok::Sym(c)) => format!("`{c}`"),
        }
    }

    fn expected<T>(&self, what: &str) -> PResult<T> {
        self.err(
            self.loc(),
            format!("expected {what}, found {}", self.found()),
        )
    }

    fn is_sym(&self, c: char) -> bool {
        self.peek() == Some(&Tok::Sym(c))
    }

    fn is_ident(&self, s: &str) -> bool {
        matches!(self.peek(), Some(Tok::Ident(x)) if x == s)
    }

    fn eat_sym(&mut self, c: char) -> bool {
        let yes = self.is_sym(c);
        if yes {
            self.i += 1;
        }
        yes
    }

    fn eat_ident(&mut self, s: &str) -> bool {
        let yes = self.is_ident(s);
        if yes {
            self.i += 1;
        }
        yes
    }

    fn sym(&mut self, c: char) -> PResult<()> {
        if self.eat_sym(c) {
            Ok(())
        } else {
            self.expected(&format!("`{c}`"))
        }
    }

    fn ident(&mut self) -> PResult<(String, Loc)> {
        let loc = self.loc();
        match self.peek() {
            Some(Tok::Ident(s)) => {
                let s = s.clone();
                self.i += 1;
                Ok((s, loc))
            }
            _ => self.expected("a name"),
        }
    }

    /// `a.b.c`
    fn full_ident(&mut self) -> PResult<String> {
        let (mut s, _) = self.ident()?;
        while self.is_sym('.') {
            self.i += 1;
            s.push('.');
            s.push_str(&self.ident()?.0);
        }
        Ok(s)
    }

    /// A type as written: `.a.B`, `a.B`, `B`.
    fn type_name(&mut self) -> PResult<String> {
        let dot = self.eat_sym('.');
        let name = self.full_ident()?;
        Ok(if dot { format!(".{name}") } else { name })
    }

    /// One or more adjacent string literals, joined.
    fn string(&mut self) -> PResult<Vec<u8>> {
        let mut out = Vec::new();
        let mut any = false;
        while let Some(Tok::Str(b)) = self.peek() {
            out.extend_from_slice(b);
            self.i += 1;
            any = true;
        }
        if any {
            Ok(out)
        } else {
            self.expected("a string")
        }
    }

    fn utf8(&self, b: Vec<u8>, loc: Loc) -> PResult<String> {
        String::from_utf8(b).or_else(|_| self.err(loc, "this string is not valid UTF-8"))
    }

    /// An integer with an optional sign.
    fn int(&mut self) -> PResult<(i128, Loc)> {
        let loc = self.loc();
        let neg = self.eat_sym('-');
        if !neg {
            self.eat_sym('+');
        }
        let Some(Tok::Int(text)) = self.peek() else {
            return self.expected("an integer");
        };
        let v = parse_int(text).ok_or(ParseError {
            loc,
            message: format!("integer `{text}` is too large"),
        })?;
        self.i += 1;
        Ok((if neg { -v } else { v }, loc))
    }

    /// A field number, 1 to 2^29 - 1.
    fn field_number(&mut self) -> PResult<i32> {
        let (n, loc) = self.int()?;
        check_number(n).map_err(|message| ParseError { loc, message })?;
        Ok(n as i32)
    }

    fn note_loc(&mut self, key: String, loc: Loc) {
        self.out.locs.entry(key).or_insert(loc);
    }

    /// Records where type `full` is declared; a second declaration in this file is refused.
    fn note_decl(&mut self, full: &str, loc: Loc) -> PResult<()> {
        let key = format!("decl:{full}");
        if let Some(first) = self.out.locs.get(&key) {
            return self.err(
                loc,
                format!(
                    "`{full}` is defined twice (first at {}:{})",
                    first.line, first.col
                ),
            );
        }
        self.out.locs.insert(key, loc);
        Ok(())
    }

    // ---- file ----

    fn file(&mut self) -> PResult<()> {
        if self.is_ident("syntax") || self.is_ident("edition") {
            let (kw, loc) = self.ident()?;
            self.sym('=')?;
            let vloc = self.loc();
            let v = self.string()?;
            let v = String::from_utf8_lossy(&v).into_owned();
            self.sym(';')?;
            if kw == "syntax" {
                self.syntax = match v.as_str() {
                    "proto2" => Syntax::Proto2,
                    "proto3" => Syntax::Proto3,
                    _ => {
                        return self.err(
                            vloc,
                            format!("unknown syntax \"{v}\": \"proto2\" or \"proto3\" (or `edition = \"2023\"`)"),
                        )
                    }
                };
                self.out.fd.set_syntax(v);
            } else {
                if !EDITIONS.contains(&v.as_str()) {
                    return self.err(
                        vloc,
                        format!(
                            "edition \"{v}\" is not supported (editions {} are)",
                            EDITIONS.join(", ")
                        ),
                    );
                }
                let _ = loc;
                self.syntax = Syntax::Editions;
                self.out.fd.set_syntax("editions".to_string());
            }
        }
        while let Some(tok) = self.peek() {
            let loc = self.loc();
            let Tok::Ident(kw) = tok else {
                if self.eat_sym(';') {
                    continue;
                }
                return self.expected(
                    "`message`, `enum`, `service`, `extend`, `import`, `package` or `option`",
                );
            };
            match kw.as_str() {
                "syntax" | "edition" => {
                    return self.err(
                        loc,
                        format!("`{kw}` must be the first statement of the file"),
                    )
                }
                "import" => {
                    self.i += 1;
                    let public = self.eat_ident("public");
                    if !public {
                        self.eat_ident("weak");
                    }
                    // `import option` (edition 2024): the file declares options only; its
                    // types are not visible, and options are not read, so it is not loaded.
                    let option_only =
                        matches!(self.peek_at(1), Some(Tok::Str(_))) && self.eat_ident("option");
                    let sloc = self.loc();
                    let path = self.string()?;
                    let path = self.utf8(path, sloc)?;
                    self.sym(';')?;
                    if option_only {
                        continue;
                    }
                    if public {
                        let n = self.out.fd.dependency.len() as i32;
                        self.out.fd.public_dependency.push(n);
                    }
                    self.out.fd.dependency.push(path.clone());
                    self.out.imports.push((path, loc));
                }
                "package" => {
                    self.i += 1;
                    if !self.package.is_empty() {
                        return self.err(loc, "a file has at most one `package`");
                    }
                    self.package = self.full_ident()?;
                    self.sym(';')?;
                    self.out.fd.set_package(self.package.clone());
                }
                "option" => {
                    self.option_statement()?;
                }
                "message" => {
                    let scope = self.package.clone();
                    let m = self.message(&scope)?;
                    self.out.fd.message_type.push(m);
                }
                "enum" => {
                    let scope = self.package.clone();
                    let e = self.enumeration(&scope)?;
                    self.out.fd.enum_type.push(e);
                }
                "service" => {
                    let s = self.service()?;
                    self.out.fd.service.push(s);
                }
                "extend" => {
                    let scope = self.package.clone();
                    let mut nested = Vec::new();
                    let x = self.extend(&scope, &mut nested)?;
                    self.out.fd.extension.extend(x);
                    self.out.fd.message_type.extend(nested);
                }
                "export" | "local" if self.syntax == Syntax::Editions => {
                    self.i += 1; // symbol visibility (edition 2024): nothing on the wire
                }
                _ => {
                    return self.expected(
                        "`message`, `enum`, `service`, `extend`, `import`, `package` or `option`",
                    )
                }
            }
        }
        Ok(())
    }

    // ---- options ----

    /// `option name = value;` (the keyword not yet read). Returns the name and value.
    fn option_statement(&mut self) -> PResult<(String, Const)> {
        self.i += 1;
        let (name, value) = self.option()?;
        self.sym(';')?;
        Ok((name, value))
    }

    /// `name = value`, checking `features.*`.
    fn option(&mut self) -> PResult<(String, Const)> {
        let loc = self.loc();
        let mut name = String::new();
        loop {
            if self.eat_sym('(') {
                let n = self.type_name()?;
                self.sym(')')?;
                name.push('(');
                name.push_str(&n);
                name.push(')');
            } else {
                name.push_str(&self.ident()?.0);
            }
            if !self.eat_sym('.') {
                break;
            }
            name.push('.');
        }
        self.sym('=')?;
        let vloc = self.loc();
        if name == "features" && self.is_sym('{') {
            // `features = { field_presence: EXPLICIT, … }`
            self.i += 1;
            while !self.eat_sym('}') {
                let floc = self.loc();
                let (f, _) = self.ident()?;
                self.sym(':')?;
                let vloc = self.loc();
                let v = self.constant()?;
                self.feature(&format!("features.{f}"), &v, floc, vloc)?;
                if !self.eat_sym(',') {
                    self.eat_sym(';');
                }
            }
            return Ok((name, Const::Aggregate));
        }
        let value = self.constant()?;
        if name == "features" || name.starts_with("features.") {
            self.feature(&name, &value, loc, vloc)?;
        }
        Ok((name, value))
    }

    /// Checks a `features.x = V` option.
    fn feature(&self, name: &str, value: &Const, loc: Loc, vloc: Loc) -> PResult<()> {
        if self.syntax != Syntax::Editions {
            return self.err(
                loc,
                format!("`{name}`: features are only valid in files with `edition = …`"),
            );
        }
        let Some(rest) = name.strip_prefix("features.") else {
            return self.err(loc, "`features` takes `{ name: VALUE … }`");
        };
        if rest.starts_with('(') {
            // A language's own features (`features.(pb.cpp).string_type`): options of its
            // code generator, read and left out like custom options.
            return Ok(());
        }
        let Some((_, values)) = FEATURES.iter().find(|(n, _)| *n == rest) else {
            let known: Vec<&str> = FEATURES.iter().map(|(n, _)| *n).collect();
            return self.err(
                loc,
                format!(
                    "unsupported feature `{name}` (cornflakes-codegen knows {})",
                    known.join(", ")
                ),
            );
        };
        match value {
            Const::Ident(v) if values.contains(&v.as_str()) => Ok(()),
            _ => self.err(vloc, format!("`{name}` takes one of {}", values.join(", "))),
        }
    }

    /// An option value.
    fn constant(&mut self) -> PResult<Const> {
        let loc = self.loc();
        if self.is_sym('{') {
            self.skip_aggregate()?;
            return Ok(Const::Aggregate);
        }
        if matches!(self.peek(), Some(Tok::Str(_))) {
            return Ok(Const::Str(self.string()?));
        }
        let neg = self.eat_sym('-');
        if !neg {
            self.eat_sym('+');
        }
        let sign = if neg { "-" } else { "" };
        match self.peek().cloned() {
            Some(Tok::Int(t)) => {
                let v = parse_int(&t).ok_or(ParseError {
                    loc,
                    message: format!("integer `{t}` is too large"),
                })?;
                self.i += 1;
                Ok(Const::Number(format!("{sign}{v}")))
            }
            Some(Tok::Float(t)) => {
                self.i += 1;
                Ok(Const::Number(format!("{sign}{t}")))
            }
            Some(Tok::Ident(_)) => {
                let id = self.full_ident()?;
                Ok(Const::Ident(format!("{sign}{id}")))
            }
            _ => self.expected("an option value"),
        }
    }

    /// A `{ … }` text-format value: balanced brackets, read and dropped.
    fn skip_aggregate(&mut self) -> PResult<()> {
        let start = self.loc();
        let mut depth = 0usize;
        loop {
            match self.peek() {
                None => return self.err(start, "`{` of this option value is never closed"),
                Some(Tok::Sym('{')) => depth += 1,
                Some(Tok::Sym('}')) => {
                    depth -= 1;
                    if depth == 0 {
                        self.i += 1;
                        return Ok(());
                    }
                }
                _ => {}
            }
            self.i += 1;
        }
    }

    /// `[a = b, …]` after a field or enum value, if any: the `default` and `json_name`
    /// pseudo-options, and the text of `default` as protoc stores it.
    fn field_options(&mut self, f: Option<&mut FieldDescriptorProto>) -> PResult<()> {
        if !self.eat_sym('[') {
            return Ok(());
        }
        let mut f = f;
        loop {
            let loc = self.loc();
            let (name, value) = self.option()?;
            if let Some(f) = f.as_deref_mut() {
                match name.as_str() {
                    "default" => {
                        if f.label() == Label::LABEL_REPEATED {
                            return self.err(loc, "a repeated field has no default");
                        }
                        if self.syntax == Syntax::Proto3 {
                            return self.err(loc, "proto3 fields have no `[default = …]`");
                        }
                        let text = match value {
                            Const::Str(b) if f.type_() == Type::TYPE_BYTES => c_escape(&b),
                            Const::Str(b) => self.utf8(b, loc)?,
                            Const::Ident(s) | Const::Number(s) => s,
                            Const::Aggregate => {
                                return self.err(loc, "a default is a value, not a message")
                            }
                        };
                        f.set_default_value(text);
                    }
                    "json_name" => match value {
                        Const::Str(b) => {
                            let s = self.utf8(b, loc)?;
                            f.set_json_name(s);
                        }
                        _ => return self.err(loc, "`json_name` takes a string"),
                    },
                    _ => {}
                }
            }
            if self.eat_sym(']') {
                return Ok(());
            }
            self.sym(',')?;
        }
    }

    // ---- messages ----

    /// Whether the tokens at the cursor start the declaration `kw Name …` (not a field whose
    /// type is called `kw`).
    fn at_decl(&self, kw: &str) -> bool {
        self.is_ident(kw)
            && matches!(self.peek_at(1), Some(Tok::Ident(_)))
            && !matches!(self.peek_at(2), Some(Tok::Sym('=')))
    }

    fn message(&mut self, scope: &str) -> PResult<DescriptorProto> {
        self.i += 1; // `message`
        let (name, loc) = self.ident()?;
        let full = join(scope, &name);
        self.note_decl(&full, loc)?;
        let mut m = DescriptorProto::new();
        m.set_name(name);
        self.sym('{')?;
        self.message_body(&full, &mut m)?;
        self.check_fields(&full, &m)?;
        Ok(m)
    }

    /// Fields numbered or named twice are refused where the second one is written.
    fn check_fields(&self, full: &str, m: &DescriptorProto) -> PResult<()> {
        let mut numbers: HashMap<i32, &str> = HashMap::new();
        let mut names: HashMap<&str, ()> = HashMap::new();
        for f in &m.field {
            let loc = self
                .out
                .locs
                .get(&format!("field:{full}.{}", f.name()))
                .copied()
                .unwrap_or(self.end);
            if let Some(first) = numbers.insert(f.number(), f.name()) {
                return self.err(
                    loc,
                    format!(
                        "field number {} of `{full}` is used twice (by `{first}` and `{}`)",
                        f.number(),
                        f.name()
                    ),
                );
            }
            if names.insert(f.name(), ()).is_some() {
                return self.err(
                    loc,
                    format!("`{full}` has two fields called `{}`", f.name()),
                );
            }
        }
        Ok(())
    }

    fn message_body(&mut self, full: &str, m: &mut DescriptorProto) -> PResult<()> {
        loop {
            match self.peek() {
                None => return self.expected("`}`"),
                Some(Tok::Sym('}')) => {
                    self.i += 1;
                    return Ok(());
                }
                Some(Tok::Sym(';')) => {
                    self.i += 1;
                    continue;
                }
                _ => {}
            }
            if self.syntax == Syntax::Editions
                && (self.is_ident("export") || self.is_ident("local"))
                && matches!(self.peek_at(1), Some(Tok::Ident(k)) if k == "message" || k == "enum")
            {
                self.i += 1;
                continue;
            }
            if self.at_decl("message") {
                let n = self.message(full)?;
                m.nested_type.push(n);
            } else if self.at_decl("enum") {
                let e = self.enumeration(full)?;
                m.enum_type.push(e);
            } else if self.at_decl("extend") {
                let mut nested = Vec::new();
                let x = self.extend(full, &mut nested)?;
                m.extension.extend(x);
                m.nested_type.extend(nested);
            } else if self.at_decl("oneof") {
                self.oneof(full, m)?;
            } else if self.is_ident("option") {
                self.option_statement()?;
            } else if self.is_ident("extensions") {
                self.i += 1;
                self.ranges()?;
                self.field_options(None)?;
                self.sym(';')?;
            } else if self.is_ident("reserved") {
                self.reserved()?;
            } else if self.is_ident("map") && self.peek_at(1) == Some(&Tok::Sym('<')) {
                self.map_field(full, m, None)?;
            } else {
                self.field(full, m, None, None)?;
            }
        }
    }

    /// `N`, `N to M`, `N to max`, separated by commas.
    fn ranges(&mut self) -> PResult<()> {
        loop {
            self.int()?;
            if self.eat_ident("to") && !self.eat_ident("max") {
                self.int()?;
            }
            if !self.eat_sym(',') {
                return Ok(());
            }
        }
    }

    fn reserved(&mut self) -> PResult<()> {
        self.i += 1;
        match self.peek() {
            Some(Tok::Str(_)) => loop {
                self.string()?;
                if !self.eat_sym(',') {
                    break;
                }
            },
            Some(Tok::Ident(_)) if self.syntax == Syntax::Editions => loop {
                self.ident()?;
                if !self.eat_sym(',') {
                    break;
                }
            },
            _ => self.ranges()?,
        }
        self.sym(';')
    }

    fn oneof(&mut self, full: &str, m: &mut DescriptorProto) -> PResult<()> {
        let loc = self.loc();
        self.i += 1;
        let (name, _) = self.ident()?;
        let index = m.oneof_decl.len() as i32;
        let mut o = OneofDescriptorProto::new();
        o.set_name(name.clone());
        m.oneof_decl.push(o);
        self.sym('{')?;
        let before = m.field.len();
        loop {
            match self.peek() {
                None => return self.expected("`}`"),
                Some(Tok::Sym('}')) => {
                    self.i += 1;
                    break;
                }
                Some(Tok::Sym(';')) => self.i += 1,
                _ if self.is_ident("option") => {
                    self.option_statement()?;
                }
                _ => {
                    if matches!(self.peek(), Some(Tok::Ident(l)) if l == "optional" || l == "required" || l == "repeated")
                        && !matches!(self.peek_at(1), Some(Tok::Sym('.')))
                        && matches!(self.peek_at(2), Some(Tok::Ident(_)))
                    {
                        return self.err(self.loc(), "fields of a oneof have no label");
                    }
                    if self.is_ident("map") && self.peek_at(1) == Some(&Tok::Sym('<')) {
                        return self.err(self.loc(), "a map cannot be a member of a oneof");
                    }
                    self.field(full, m, Some(index), None)?;
                }
            }
        }
        if m.field.len() == before {
            return self.err(loc, format!("oneof `{name}` has no fields"));
        }
        Ok(())
    }

    /// A field (or group) of a message, a oneof (`oneof`) or an extend block (`extendee`).
    fn field(
        &mut self,
        scope: &str,
        m: &mut DescriptorProto,
        oneof: Option<i32>,
        extendee: Option<&str>,
    ) -> PResult<()> {
        let start = self.loc();
        let mut label = None;
        if let Some(Tok::Ident(l)) = self.peek() {
            let l = l.clone();
            // A label, unless it is the type's name (`optional x = 1;` is a field of a type
            // called `optional`).
            if matches!(l.as_str(), "optional" | "required" | "repeated")
                && !matches!(self.peek_at(1), Some(Tok::Sym('=')))
                && !matches!(self.peek_at(2), Some(Tok::Sym('=')))
            {
                self.i += 1;
                label = Some((l, start));
            }
        }
        let mut f = FieldDescriptorProto::new();
        let mut proto3_optional = false;
        match (&label, self.syntax) {
            (None, Syntax::Proto2) if oneof.is_none() && !self.is_ident("group") => {
                return self.err(
                    start,
                    "a proto2 field needs a label: `optional`, `required` or `repeated`",
                )
            }
            (Some((l, loc)), Syntax::Editions) if l != "repeated" => {
                return self.err(
                    *loc,
                    format!(
                    "`{l}` is not a label in editions: presence is `[features.field_presence = …]`"
                ),
                )
            }
            (Some((l, loc)), Syntax::Proto3) if l == "required" => {
                return self.err(*loc, "proto3 has no `required` fields")
            }
            (Some((l, _)), Syntax::Proto3) if l == "optional" => proto3_optional = true,
            _ => {}
        }
        f.set_label(match label.as_ref().map(|(l, _)| l.as_str()) {
            Some("repeated") => Label::LABEL_REPEATED,
            Some("required") => Label::LABEL_REQUIRED,
            _ => Label::LABEL_OPTIONAL,
        });
        if self.is_ident("group") && matches!(self.peek_at(1), Some(Tok::Ident(_))) {
            return self.group(scope, m, f, oneof, extendee, start);
        }
        let tloc = self.loc();
        let ty = self.type_name()?;
        let (name, nloc) = self.ident()?;
        self.sym('=')?;
        let number = self.field_number()?;
        f.set_name(name.clone());
        f.set_number(number);
        match scalar_type(&ty) {
            Some(t) => f.set_type(t),
            None => f.set_type_name(ty),
        }
        if proto3_optional {
            f.set_proto3_optional(true);
        }
        if let Some(o) = oneof {
            f.set_oneof_index(o);
        }
        if let Some(x) = extendee {
            f.set_extendee(x.to_string());
        }
        self.field_options(Some(&mut f))?;
        self.sym(';')?;
        let key = field_key(scope, &name, extendee);
        self.note_loc(format!("type:{key}"), tloc);
        self.note_loc(format!("field:{key}"), nloc);
        if extendee.is_some() {
            m.extension.push(f);
        } else {
            m.field.push(f);
        }
        Ok(())
    }

    /// `label group Name = N { … }`: a field named `name` (lowercase) of the nested message
    /// `Name`, as protoc builds it.
    fn group(
        &mut self,
        scope: &str,
        m: &mut DescriptorProto,
        mut f: FieldDescriptorProto,
        oneof: Option<i32>,
        extendee: Option<&str>,
        start: Loc,
    ) -> PResult<()> {
        if self.syntax != Syntax::Proto2 {
            return self.err(
                start,
                "`group` is proto2 only (in editions: a message field with `[features.message_encoding = DELIMITED]`)",
            );
        }
        self.i += 1; // `group`
        let (gname, gloc) = self.ident()?;
        if !gname.starts_with(|c: char| c.is_ascii_uppercase()) {
            return self.err(gloc, "a group's name starts with a capital letter");
        }
        self.sym('=')?;
        let number = self.field_number()?;
        let name = gname.to_ascii_lowercase();
        f.set_name(name.clone());
        f.set_number(number);
        f.set_type(Type::TYPE_GROUP);
        f.set_type_name(format!(".{}", join(scope, &gname)));
        if let Some(o) = oneof {
            f.set_oneof_index(o);
        }
        if let Some(x) = extendee {
            f.set_extendee(x.to_string());
        }
        self.field_options(Some(&mut f))?;
        let full = join(scope, &gname);
        self.note_decl(&full, gloc)?;
        let mut g = DescriptorProto::new();
        g.set_name(gname);
        self.sym('{')?;
        self.message_body(&full, &mut g)?;
        self.check_fields(&full, &g)?;
        let key = field_key(scope, &name, extendee);
        self.note_loc(format!("field:{key}"), gloc);
        m.nested_type.push(g);
        if extendee.is_some() {
            m.extension.push(f);
        } else {
            m.field.push(f);
        }
        Ok(())
    }

    /// `map<K, V> name = N;`: a repeated field of the entry message `NameEntry`.
    fn map_field(
        &mut self,
        scope: &str,
        m: &mut DescriptorProto,
        _oneof: Option<i32>,
    ) -> PResult<()> {
        self.i += 2; // `map` `<`
        let kloc = self.loc();
        let (key, _) = self.ident()?;
        let key_type = scalar_type(&key)
            .filter(|t| !matches!(t, Type::TYPE_DOUBLE | Type::TYPE_FLOAT | Type::TYPE_BYTES));
        let Some(key_type) = key_type else {
            return self.err(
                kloc,
                format!("a map's key is an integer, `bool` or `string`, not `{key}`"),
            );
        };
        self.sym(',')?;
        let vloc = self.loc();
        let value = self.type_name()?;
        self.sym('>')?;
        let (name, nloc) = self.ident()?;
        self.sym('=')?;
        let number = self.field_number()?;
        let entry_name = map_entry_name(&name);
        let entry_full = join(scope, &entry_name);
        let mut f = FieldDescriptorProto::new();
        f.set_name(name.clone());
        f.set_number(number);
        f.set_label(Label::LABEL_REPEATED);
        f.set_type(Type::TYPE_MESSAGE);
        f.set_type_name(format!(".{entry_full}"));
        self.field_options(Some(&mut f))?;
        self.sym(';')?;
        let mut entry = DescriptorProto::new();
        entry.set_name(entry_name);
        let mut opts = MessageOptions::new();
        opts.set_map_entry(true);
        entry.options = protobuf::MessageField::some(opts);
        let mut k = FieldDescriptorProto::new();
        k.set_name("key".into());
        k.set_number(1);
        k.set_label(Label::LABEL_OPTIONAL);
        k.set_type(key_type);
        let mut v = FieldDescriptorProto::new();
        v.set_name("value".into());
        v.set_number(2);
        v.set_label(Label::LABEL_OPTIONAL);
        match scalar_type(&value) {
            Some(t) => v.set_type(t),
            None => v.set_type_name(value),
        }
        entry.field.push(k);
        entry.field.push(v);
        self.note_decl(&entry_full, nloc)?;
        self.note_loc(format!("type:{entry_full}.value"), vloc);
        self.note_loc(format!("field:{scope}.{name}"), nloc);
        m.nested_type.push(entry);
        m.field.push(f);
        Ok(())
    }

    /// `extend T { fields }` (the keyword at the cursor): the extension fields (with their
    /// extendee as written), and groups' messages into `nested`.
    fn extend(
        &mut self,
        scope: &str,
        nested: &mut Vec<DescriptorProto>,
    ) -> PResult<Vec<FieldDescriptorProto>> {
        self.i += 1;
        let tloc = self.loc();
        let extendee = self.type_name()?;
        self.note_loc(format!("extend:{scope}:{extendee}"), tloc);
        self.sym('{')?;
        let mut holder = DescriptorProto::new();
        loop {
            match self.peek() {
                None => return self.expected("`}`"),
                Some(Tok::Sym('}')) => {
                    self.i += 1;
                    break;
                }
                Some(Tok::Sym(';')) => self.i += 1,
                _ => self.field(scope, &mut holder, None, Some(&extendee))?,
            }
        }
        nested.append(&mut holder.nested_type);
        Ok(holder.extension)
    }

    // ---- enums ----

    fn enumeration(&mut self, scope: &str) -> PResult<EnumDescriptorProto> {
        let loc = self.loc();
        self.i += 1; // `enum`
        let (name, nloc) = self.ident()?;
        let full = join(scope, &name);
        self.note_decl(&full, nloc)?;
        let mut e = EnumDescriptorProto::new();
        e.set_name(name.clone());
        self.sym('{')?;
        loop {
            match self.peek() {
                None => return self.expected("`}`"),
                Some(Tok::Sym('}')) => {
                    self.i += 1;
                    break;
                }
                Some(Tok::Sym(';')) => self.i += 1,
                _ if self.is_ident("option") => {
                    self.option_statement()?;
                }
                _ if self.is_ident("reserved")
                    && !matches!(self.peek_at(1), Some(Tok::Sym('='))) =>
                {
                    self.reserved()?;
                }
                _ => {
                    let (vname, _) = self.ident()?;
                    self.sym('=')?;
                    let (n, nloc) = self.int()?;
                    let n = i32::try_from(n).or_else(|_| {
                        self.err(nloc, format!("enum value {n} does not fit in 32 bits"))
                    })?;
                    self.field_options(None)?;
                    self.sym(';')?;
                    let mut v = EnumValueDescriptorProto::new();
                    v.set_name(vname);
                    v.set_number(n);
                    e.value.push(v);
                }
            }
        }
        if e.value.is_empty() {
            return self.err(
                loc,
                format!("enum `{name}` has no values; it needs at least one"),
            );
        }
        Ok(e)
    }

    // ---- services ----

    fn service(&mut self) -> PResult<ServiceDescriptorProto> {
        self.i += 1; // `service`
        let (name, nloc) = self.ident()?;
        let full = join(&self.package, &name);
        self.note_decl(&full, nloc)?;
        let mut s = ServiceDescriptorProto::new();
        s.set_name(name);
        self.sym('{')?;
        loop {
            match self.peek() {
                None => return self.expected("`}`"),
                Some(Tok::Sym('}')) => {
                    self.i += 1;
                    return Ok(s);
                }
                Some(Tok::Sym(';')) => self.i += 1,
                _ if self.is_ident("option") => {
                    self.option_statement()?;
                }
                _ if self.is_ident("rpc") => {
                    self.i += 1;
                    let (mname, mloc) = self.ident()?;
                    // Two methods of one name would generate two handlers of one name, and
                    // protoc refuses them too.
                    self.note_decl(&format!("{full}.{mname}"), mloc)?;
                    let mut md = MethodDescriptorProto::new();
                    md.set_name(mname.clone());
                    for (k, which) in ["input", "output"].into_iter().enumerate() {
                        if k == 1 && !self.eat_ident("returns") {
                            return self.expected("`returns`");
                        }
                        self.sym('(')?;
                        let stream = self.is_ident("stream")
                            && !matches!(self.peek_at(1), Some(Tok::Sym(')')));
                        if stream {
                            self.i += 1;
                        }
                        let tloc = self.loc();
                        let t = self.type_name()?;
                        self.sym(')')?;
                        self.note_loc(format!("rpc:{full}.{mname}.{which}"), tloc);
                        if k == 0 {
                            md.set_input_type(t);
                            md.set_client_streaming(stream);
                        } else {
                            md.set_output_type(t);
                            md.set_server_streaming(stream);
                        }
                    }
                    if self.eat_sym('{') {
                        loop {
                            match self.peek() {
                                None => return self.expected("`}`"),
                                Some(Tok::Sym('}')) => {
                                    self.i += 1;
                                    break;
                                }
                                Some(Tok::Sym(';')) => self.i += 1,
                                _ if self.is_ident("option") => {
                                    let (name, value) = self.option_statement()?;
                                    if let Some(ext) =
                                        name.strip_prefix('(').and_then(|n| n.strip_suffix(')'))
                                    {
                                        let method = format!("{full}.{mname}");
                                        self.out.method_options.push((
                                            method,
                                            ext.to_string(),
                                            value,
                                        ));
                                    }
                                }
                                _ => return self.expected("`option` or `}`"),
                            }
                        }
                    } else {
                        self.sym(';')?;
                    }
                    s.method.push(md);
                }
                _ => return self.expected("`rpc`, `option` or `}`"),
            }
        }
    }
}

/// Key of a field in [`ParsedFile::locs`]: `scope.name`, or `scope.name@extendee` for an
/// extension.
fn field_key(scope: &str, name: &str, extendee: Option<&str>) -> String {
    match extendee {
        Some(x) => format!("{scope}.{name}@{x}"),
        None => format!("{scope}.{name}"),
    }
}

/// Field numbers are 1 to 2^29 - 1.
fn check_number(n: i128) -> Result<(), String> {
    if (1..=536_870_911).contains(&n) {
        Ok(())
    } else {
        Err(format!(
            "field number {n} is out of range: field numbers are 1 to 536870911"
        ))
    }
}

/// An integer literal's value (decimal, hex or octal), `None` if it does not fit 64 bits.
fn parse_int(text: &str) -> Option<i128> {
    let v = if let Some(h) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()?
    } else if text.len() > 1 && text.starts_with('0') {
        u64::from_str_radix(&text[1..], 8).ok()?
    } else {
        text.parse::<u64>().ok()?
    };
    Some(v as i128)
}

#[cfg(test)]
mod tests;
