//! Errors of the schema compiler: what went wrong, where, and how to fix it.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::place::{Loc, Place};

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
    /// Two elements of the schema map to the same generated Rust name (a message `Foo`
    /// beside a message `FooView`, say: `FooView` is `Foo`'s view).
    NameClash,
    /// The schema is valid protobuf but breaks a rule of Cornflakes services (a method number
    /// out of range, two methods of one service with the same number).
    Invalid,
    /// A setting of [`Config`](crate::Config) is not usable (a runtime, rpc or extern path
    /// that is not a Rust path).
    Config,
}

impl ErrorKind {
    /// Whether this is a refusal a schema that loads can earn from the generator: a construct
    /// it does not support (`Unsupported`), two elements whose Rust names meet (`NameClash`),
    /// or a broken rule of Cornflakes services (`Invalid`; only generation judges method
    /// numbers, since [`Config::method_id`](crate::Config::method_id) may renumber). The
    /// schema (or the build script's `method_id` settings) needs fixing; any other kind from
    /// [`Config::generate`](crate::Config::generate) on a loaded schema is a problem of the
    /// build or of the compiler.
    pub fn is_generation_refusal(self) -> bool {
        matches!(
            self,
            ErrorKind::Unsupported | ErrorKind::NameClash | ErrorKind::Invalid
        )
    }
}

/// An error from [`Config::compile_protos`](crate::Config::compile_protos) or
/// [`Schema::load`](crate::Schema::load). `Display` starts with `file:line:col` when the
/// problem has a position. `Debug` prints the same text (the offending line and caret on
/// lines of their own), so a build script's `main() -> Result<(), Box<dyn Error>>` shows the
/// message as written, not a struct on one line; `{:#?}` gives the fields.
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

    pub(crate) fn invalid(place: Place, what: String) -> Error {
        Error {
            kind: ErrorKind::Invalid,
            message: format!("{place}: {what}"),
        }
    }

    pub(crate) fn io(path: &Path, e: std::io::Error) -> Error {
        Error {
            kind: ErrorKind::Io,
            message: format!("{}: {e}", path.display()),
        }
    }

    pub(crate) fn config(message: String) -> Error {
        Error {
            kind: ErrorKind::Config,
            message: format!("invalid Config: {message}"),
        }
    }

    pub(crate) fn internal(message: String) -> Error {
        Error {
            kind: ErrorKind::Internal,
            message: format!("internal error in cornflakes-codegen: {message}"),
        }
    }

    /// A `.proto` file does not parse or its names do not resolve: `file:line:col: message`,
    /// then the line and a caret under the column.
    pub(crate) fn parse(place: Place, message: &str) -> Error {
        let file = place.file.display().to_string();
        let text = if place.loc.line == 0 {
            format!("{file}: {message}")
        } else {
            let pos = format!("{}:{}", place.loc.line, place.loc.col);
            format!("{file}:{pos}: {message}{}", snippet(&file, &pos))
        };
        Error {
            kind: ErrorKind::Parse,
            message: text,
        }
    }

    /// `file` nests brackets deeper than `max` levels, the first time at `loc`.
    pub(crate) fn too_deep(file: &Path, loc: Loc, max: usize) -> Error {
        let file = file.display().to_string();
        let pos = format!("{}:{}", loc.line, loc.col);
        Error {
            kind: ErrorKind::Parse,
            message: format!(
                "{file}:{pos}: nested more than {max} levels deep (messages, blocks, option \
                 values or brackets); flatten the schema{}",
                snippet(&file, &pos)
            ),
        }
    }

    /// The generated Rust item `what` is defined twice in `scope` (`package`'s code).
    pub(crate) fn name_clash(package: &str, scope: &str, what: &str) -> Error {
        let package = if package.is_empty() {
            "the package-less files".to_owned()
        } else {
            format!("package `{package}`")
        };
        Error {
            kind: ErrorKind::NameClash,
            message: format!(
                "{package}: two schema elements generate {what} in {scope}; Rust names are \
                 derived from proto names (a message `Foo` also generates `FooView` and \
                 `FooOwned`; a string field `x` also generates `get_x_bytes`; `foo_bar` and \
                 `fooBar` both become `foo_bar`), so rename one of them in the .proto"
            ),
        }
    }

    /// Two members (`first`, `second`: "field `x`", "oneof `o`") of message `message`
    /// generate the accessor `method`.
    pub(crate) fn name_clash_in_message(
        message: &str,
        first: &str,
        second: &str,
        method: &str,
    ) -> Error {
        Error {
            kind: ErrorKind::NameClash,
            message: format!(
                "message `{message}`: {first} and {second} both generate the Rust method \
                 `{method}` (accessor names are snake_case: `foo_bar` and `fooBar` meet, and a \
                 string field `x` also has `get_x_bytes`); rename one of them in the .proto"
            ),
        }
    }

    /// The import at `loc` of `file` closes `cycle` (a file importing itself, directly or
    /// through others; the first and last entries are the same file).
    pub(crate) fn import_cycle(file: &Path, loc: Loc, cycle: &[&Path]) -> Error {
        let file = file.display().to_string();
        let pos = format!("{}:{}", loc.line, loc.col);
        let chain: Vec<String> = cycle.iter().map(|p| p.display().to_string()).collect();
        Error {
            kind: ErrorKind::Parse,
            message: format!(
                "{file}:{pos}: import cycle: {}; a file may not import itself, directly or \
                 through other files{}",
                chain.join(" → "),
                snippet(&file, &pos)
            ),
        }
    }
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

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if f.alternate() {
            f.debug_struct("Error")
                .field("kind", &self.kind)
                .field("message", &self.message)
                .finish()
        } else {
            f.write_str(&self.message)
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> std::io::Error {
        std::io::Error::other(e.to_string())
    }
}

/// The path that failed, for I/O errors built by callers.
/// Something generation left out and why, starting with `file:line:col` of its declaration
/// (a streaming rpc, say). [`Config::compile_protos`](crate::Config::compile_protos) prints
/// each as `cargo:warning=…` in a build script and as `warning: …` on standard error
/// otherwise; [`Config::generate_with_warnings`](crate::Config::generate_with_warnings)
/// returns them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    message: String,
}

impl Warning {
    pub(crate) fn new(place: Place, what: String) -> Warning {
        Warning {
            message: format!("{place}: {what}"),
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

pub(crate) fn io_at(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |e| Error::io(&path, e)
}

#[cfg(test)]
mod tests {
    use super::ErrorKind;

    /// The fuzz target's oracle and its replay test take exactly these as a schema's fault.
    #[test]
    fn generation_refusals_are_the_schemas_kinds_only() {
        use ErrorKind::*;
        for (kind, refusal) in [
            (Unsupported, true),
            (NameClash, true),
            (Invalid, true),
            (Parse, false),
            (Io, false),
            (Internal, false),
            (Config, false),
        ] {
            assert_eq!(kind.is_generation_refusal(), refusal, "{kind:?}");
        }
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
            text.contains("gone/c.proto")
                && text.contains("the `includes` of `compile_protos` in build.rs")
                && text.contains("`-I` on the command line"),
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
        // A path the parser cannot read (here: it holds a NUL byte) is located the same way.
        std::fs::write(&c, "syntax = \"proto3\";\n\nimport \"x\\0y.proto\";\n").unwrap();
        let text = crate::Schema::load(&[&c], &[&dir])
            .err()
            .unwrap()
            .to_string();
        assert!(
            text.starts_with(&format!("{}:3:1: could not read file", c.display())),
            "{text}"
        );
        // Also when the include directory is named through a symbolic link (the parser is
        // given it resolved).
        let link =
            std::env::temp_dir().join(format!("cf-codegen-import-link-{}", std::process::id()));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let c_linked = link.join("c.proto");
        let text = crate::Schema::load(&[&c_linked], &[&link])
            .err()
            .unwrap()
            .to_string();
        assert!(
            text.starts_with(&format!("{}:3:1: could not read file", c_linked.display())),
            "{text}"
        );
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn two_messages_of_one_name_are_an_error_at_the_second() {
        let dir = std::env::temp_dir().join(format!("cf-codegen-panic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("twice.proto");
        // protobuf-parse 3.7, the parser before this one, panicked here (found by the
        // proto_parse fuzz target).
        std::fs::write(
            &a,
            "syntax = \"proto3\";\nmessage M {\n  uint32 id = 1;\n  repeated bytes p = 4;\n}\nmessage M {\n  uint32 id = 1;\n  string k = 2;\n}\n",
        )
        .unwrap();
        let err = crate::Schema::load(&[&a], &[&dir]).err().unwrap();
        let text = err.to_string();
        assert_eq!(err.kind(), crate::ErrorKind::Parse, "{text}");
        assert!(
            text.starts_with(&format!(
                "{}:6:9: `M` is defined twice (first at 2:9)",
                a.display()
            )),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
