//! Positions in `.proto` files, which the scanner, the parser, the model and the errors all
//! use (one home, so none of them imports another for it).

use std::fmt;
use std::path::PathBuf;

/// A 1-based line and column in a `.proto` file (line 0: no position).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Loc {
    pub line: u32,
    pub col: u32,
}

/// Where an error points: a file and, when known, a position in it.
#[derive(Clone, Debug)]
pub(crate) struct Place {
    pub file: PathBuf,
    pub loc: Loc,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.loc.line == 0 {
            write!(f, "{}", self.file.display())
        } else {
            write!(
                f,
                "{}:{}:{}",
                self.file.display(),
                self.loc.line,
                self.loc.col
            )
        }
    }
}

/// Whether `name` (as written after `extend`, or a descriptor's extendee) is one of
/// protobuf's option messages (`google.protobuf.FieldOptions`, …, and `FeatureSet`):
/// extending them declares custom options or features, which only annotate the schema and
/// have no place in the wire format, so they are read and left out (as prost does).
pub(crate) fn is_options_message(name: &str) -> bool {
    const OPTIONS: [&str; 10] = [
        "FileOptions",
        "MessageOptions",
        "FieldOptions",
        "OneofOptions",
        "EnumOptions",
        "EnumValueOptions",
        "ServiceOptions",
        "MethodOptions",
        "ExtensionRangeOptions",
        "FeatureSet",
    ];
    name.trim_start_matches('.')
        .strip_prefix("google.protobuf.")
        .is_some_and(|n| OPTIONS.contains(&n))
}
