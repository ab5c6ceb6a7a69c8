//! Errors of the schema compiler: what went wrong, where, and how to fix it.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::schema::Place;

/// What kind of problem an [`Error`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A `.proto` file does not parse or type-check.
    Parse,
    /// A construct the Cornflakes wire format or this compiler does not support.
    Unsupported,
    /// Reading or writing a file failed.
    Io,
    /// A bug in the compiler.
    Internal,
}

/// An error from [`Config::compile_protos`](crate::Config::compile_protos) or
/// [`Schema::load`](crate::Schema::load). `Display` starts with `file:line:col` when the
/// problem has a position.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    /// The kind of problem.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    pub(crate) fn unsupported(place: Place, what: String) -> Error {
        Error {
            kind: ErrorKind::Unsupported,
            message: format!("{place}: unsupported {what}"),
        }
    }

    pub(crate) fn io(path: &Path, e: std::io::Error) -> Error {
        Error {
            kind: ErrorKind::Io,
            message: format!("{}: {e}", path.display()),
        }
    }

    pub(crate) fn internal(message: String) -> Error {
        Error {
            kind: ErrorKind::Internal,
            message: format!("internal error in cornflakes-codegen: {message}"),
        }
    }

    /// Rewrites protobuf-parse's "error in `f.proto`: at 3:5: msg" as "f.proto:3:5: msg".
    pub(crate) fn from_parser(e: impl fmt::Display) -> Error {
        let text = format!("{e:#}");
        Error {
            kind: ErrorKind::Parse,
            message: reformat_parser_error(&text),
        }
    }

    /// The .proto parser (protobuf-parse) panicked on `inputs`: a parse error naming them and
    /// what the parser said, with the likely cause.
    pub(crate) fn parser_panicked(inputs: &[&Path], panic: &(dyn std::any::Any + Send)) -> Error {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_owned());
        let files: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
        Error {
            kind: ErrorKind::Parse,
            message: format!(
                "{}: the .proto parser failed on this input ({what}); look for two definitions \
                 of one name or fields that do not match their message",
                files.join(", ")
            ),
        }
    }

    /// A parser error about an import it could not find names no file: prefix the file and
    /// `line:col` of the `import` that asked for it, found from `inputs` through their imports
    /// (resolved in `includes`), with the offending line.
    pub(crate) fn name_importer(mut self, inputs: &[&Path], includes: &[&Path]) -> Error {
        let Some(missing) = missing_import(&self.message) else {
            return self;
        };
        if let Some((file, pos)) = find_importer(missing, inputs, includes) {
            let file = file.display().to_string();
            let snip = snippet(&file, &pos);
            self.message = format!("{file}:{pos}: {}{snip}", self.message);
        } else {
            // The scanner did not find the statement the parser read: still say which load
            // failed.
            let files: Vec<String> = inputs.iter().map(|p| p.display().to_string()).collect();
            self.message = format!(
                "{} (or a file it imports): {}",
                files.join(", "),
                self.message
            );
        }
        self
    }
}

/// The path quoted in protobuf-parse's "protobuf path `x.proto` is not found ..." (or "...
/// must reside in include path").
fn missing_import(message: &str) -> Option<&str> {
    if !message.contains("is not found in import path")
        && !message.contains("must reside in include path")
    {
        return None;
    }
    let rest = &message[message.find('`')? + 1..];
    Some(&rest[..rest.find('`')?])
}

/// The first file, from `inputs` through the imports that resolve in `includes`, that imports
/// `missing`, with the `line:col` of that import.
fn find_importer(missing: &str, inputs: &[&Path], includes: &[&Path]) -> Option<(PathBuf, String)> {
    let mut queue: std::collections::VecDeque<PathBuf> =
        inputs.iter().map(|p| p.to_path_buf()).collect();
    let mut seen = std::collections::HashSet::new();
    while let Some(file) = queue.pop_front() {
        if !seen.insert(file.clone()) || seen.len() > 1000 {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (path, loc) in crate::source::imports(&text) {
            if path == missing {
                return Some((file, format!("{}:{}", loc.line, loc.col)));
            }
            if let Some(found) = includes.iter().map(|i| i.join(&path)).find(|p| p.is_file()) {
                queue.push_back(found);
            }
        }
    }
    None
}

fn reformat_parser_error(text: &str) -> String {
    let text = text.strip_prefix("using pure parser: ").unwrap_or(text);
    if text.contains("must reside in include path") || text.contains("is not found in import path")
    {
        return format!("{text}: add the directory holding it to the include paths (`-I`)");
    }
    let Some(start) = text.find("error in `") else {
        return text.to_string();
    };
    let rest = &text[start + "error in `".len()..];
    let Some((file, rest)) = rest.split_once("`: ") else {
        return text.to_string();
    };
    // "at 3:15: incorrect input: at 3:15: incorrect input: incorrect input"
    let mut pos = None;
    let mut parts: Vec<&str> = Vec::new();
    for part in rest.split(": ") {
        if let Some(p) = part.strip_prefix("at ") {
            if p.split(':').all(|n| n.parse::<u32>().is_ok()) {
                pos.get_or_insert(p.to_string());
                continue;
            }
        }
        if parts.last() != Some(&part) && !parts.contains(&part) {
            parts.push(part);
        }
    }
    let msg = parts.join(": ");
    match pos {
        Some(p) => {
            let mut out = format!("{file}:{p}: {msg}");
            out.push_str(&snippet(file, &p));
            out
        }
        None => match locate_name(file, &msg) {
            // Type-check errors carry no position: point at the name they quote.
            Some(p) => format!("{file}:{p}: {msg}{}", snippet(file, &p)),
            None => format!("{file}: {msg}"),
        },
    }
}

/// `line:col` of the first use, outside comments, of the last `name` quoted in `msg`.
fn locate_name(file: &str, msg: &str) -> Option<String> {
    let name = msg.rsplit('`').nth(1)?.rsplit('.').next()?;
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut from = 0;
        while let Some(k) = code[from..].find(name) {
            let at = from + k;
            let before = code[..at].chars().next_back();
            let after = code[at + name.len()..].chars().next();
            let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            if !word(before) && !word(after) && before != Some('"') {
                return Some(format!("{}:{}", i + 1, code[..at].chars().count() + 1));
            }
            from = at + name.len();
        }
    }
    None
}

/// The offending line of `file` with a caret under column `pos` (`line:col`).
fn snippet(file: &str, pos: &str) -> String {
    let mut it = pos.split(':').filter_map(|n| n.parse::<usize>().ok());
    let (Some(line), Some(col)) = (it.next(), it.next()) else {
        return String::new();
    };
    let Ok(text) = std::fs::read_to_string(file) else {
        return String::new();
    };
    let Some(src) = text.lines().nth(line.saturating_sub(1)) else {
        return String::new();
    };
    let num = line.to_string();
    format!(
        "\n{num} | {src}\n{} | {}^",
        " ".repeat(num.len()),
        " ".repeat(col.saturating_sub(1))
    )
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        std::io::Error::other(e.to_string())
    }
}

/// The path that failed, for I/O errors built by callers.
pub(crate) fn io_at(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |e| Error::io(&path, e)
}

#[cfg(test)]
mod tests {
    #[test]
    fn missing_imports_are_read_from_the_parser_error() {
        assert_eq!(
            super::missing_import(
                "protobuf path `common/t.proto` is not found in import path [\"/x\"]"
            ),
            Some("common/t.proto")
        );
        assert_eq!(super::missing_import("a.proto:1:1: expecting `;`"), None);
    }

    #[test]
    fn a_missing_import_names_the_file_and_line_that_imports_it() {
        let dir = std::env::temp_dir().join(format!("cf-codegen-import-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("a.proto");
        let b = dir.join("b.proto");
        std::fs::write(
            &a,
            "syntax = \"proto3\";\nimport \"b.proto\";\nmessage A { B b = 1; }\n",
        )
        .unwrap();
        std::fs::write(
            &b,
            "syntax = \"proto3\";\n\nimport \"gone/c.proto\";\nmessage B {}\n",
        )
        .unwrap();
        // Directly: b.proto imports the missing file.
        let err = crate::Schema::load(&[&b], &[&dir]).err().unwrap();
        let text = err.to_string();
        assert_eq!(err.kind(), crate::ErrorKind::Parse, "{text}");
        assert!(
            text.starts_with(&format!("{}:3:1: ", b.display())),
            "{text}"
        );
        assert!(
            text.contains("gone/c.proto") && text.contains("(`-I`)"),
            "{text}"
        );
        assert!(text.contains("3 | import \"gone/c.proto\";"), "{text}");
        // Through an import: a.proto is fine, the file it imports is not.
        let text = crate::Schema::load(&[&a], &[&dir])
            .err()
            .unwrap()
            .to_string();
        assert!(
            text.starts_with(&format!("{}:3:1: ", b.display())),
            "{text}"
        );
        // However the import is written: single quotes, split literals, a comment, a line break
        // (forms the proto_parse fuzz target found that a line scanner missed).
        let c = dir.join("c.proto");
        std::fs::write(
            &c,
            "syntax = \"proto3\"; message C {}\nimport /* x */\n  'gone/' \"d.proto\";\n",
        )
        .unwrap();
        let text = crate::Schema::load(&[&c], &[&dir])
            .err()
            .unwrap()
            .to_string();
        assert!(
            text.starts_with(&format!("{}:2:1: ", c.display())),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_parser_panic_is_an_error_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("cf-codegen-panic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("twice.proto");
        // protobuf-parse 3.7 panics (an unwrap in its option resolver) on two messages of one
        // name with different fields; found by the proto_parse fuzz target.
        std::fs::write(
            &a,
            "syntax = \"proto3\";\nmessage M {\n  uint32 id = 1;\n  repeated bytes p = 4;\n}\nmessage M {\n  uint32 id = 1;\n  string k = 2;\n}\n",
        )
        .unwrap();
        let err = crate::Schema::load(&[&a], &[&dir]).err().unwrap();
        let text = err.to_string();
        assert_eq!(err.kind(), crate::ErrorKind::Parse, "{text}");
        assert!(text.starts_with(&format!("{}: ", a.display())), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn parser_errors_start_with_file_line_col() {
        assert_eq!(
            super::reformat_parser_error("error in `a/b.proto`: at 3:14: expecting `;`"),
            "a/b.proto:3:14: expecting `;`"
        );
        assert_eq!(
            super::reformat_parser_error(
                "using pure parser: error in `x.proto`: at 3:15: incorrect input: at 3:15: incorrect input: incorrect input"
            ),
            "x.proto:3:15: incorrect input"
        );
    }
}
