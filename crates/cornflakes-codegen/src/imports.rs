//! The files of a load and their imports, read before the parser runs.
//!
//! The parser recurses once per nesting level of a file: nesting deeper than a stack holds
//! would be an abort that no `catch_unwind` stops, which would kill a build script or the
//! `cornflakes` command. This walk refuses it first, and import cycles (a file importing
//! itself, or `a` → `b` → `a`), naming the file and line. It reads the files as [`source`](crate::source)
//! does and never decides what they mean: an import it cannot resolve is left to the parser,
//! which reports it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::place::Loc;
use crate::source;

/// The deepest nesting of brackets (messages, blocks, option values, `[]`, `()`, `<>`) a file
/// may have; 100 is also the default recursion limit of protobuf's binary decoders. Real
/// schemas nest a handful of levels.
pub(crate) const MAX_NESTING: usize = 100;

/// Checks `inputs` and every file they import (resolved in `includes`) for nesting deeper than
/// [`MAX_NESTING`] and for import cycles.
pub(crate) fn check(inputs: &[&Path], includes: &[&Path]) -> Result<(), Error> {
    let mut walk = Walk {
        includes,
        state: HashMap::new(),
        chain: Vec::new(),
    };
    for p in inputs {
        walk.visit(p)?;
    }
    Ok(())
}

/// The first file, from `inputs` through the imports that resolve in `includes`, that imports
/// `missing` (the path as written, or joined to an include directory), with the position of
/// that import.
pub(crate) fn find_importer(
    missing: &str,
    inputs: &[&Path],
    includes: &[&Path],
) -> Option<(PathBuf, Loc)> {
    let mut queue: std::collections::VecDeque<PathBuf> =
        inputs.iter().map(|p| p.to_path_buf()).collect();
    let mut seen = std::collections::HashSet::new();
    while let Some(file) = queue.pop_front() {
        if !seen.insert(file.clone()) || seen.len() > 10_000 {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for (path, loc) in source::imports(&text) {
            // The parser names an unreadable file by its resolved include directory.
            let resolved_is_missing = |i: &&Path| {
                i.join(&path) == Path::new(missing)
                    || i.canonicalize()
                        .is_ok_and(|c| c.join(&path) == Path::new(missing))
            };
            if path == missing || includes.iter().any(resolved_is_missing) {
                return Some((file, loc));
            }
            if let Some(found) = resolve(&path, includes) {
                queue.push_back(found);
            }
        }
    }
    None
}

/// Where the parser finds an imported `path`: the first include directory that has it.
fn resolve(path: &str, includes: &[&Path]) -> Option<PathBuf> {
    includes.iter().map(|i| i.join(path)).find(|p| p.is_file())
}

/// One name per file, however it was reached.
fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// On the current chain of imports.
    Open,
    Done,
}

struct Walk<'a> {
    includes: &'a [&'a Path],
    /// By canonical path.
    state: HashMap<PathBuf, State>,
    /// The files being visited, outermost first, as named (by the caller or an import).
    chain: Vec<PathBuf>,
}

impl Walk<'_> {
    fn visit(&mut self, file: &Path) -> Result<(), Error> {
        let key = canonical(file);
        if self.state.contains_key(&key) {
            return Ok(());
        }
        // An unreadable file is the parser's to report.
        let Ok(text) = std::fs::read_to_string(file) else {
            return Ok(());
        };
        if let Some(loc) = source::too_deep(&text, MAX_NESTING) {
            return Err(Error::too_deep(file, loc, MAX_NESTING));
        }
        self.state.insert(key.clone(), State::Open);
        self.chain.push(file.to_path_buf());
        for (path, loc) in source::imports(&text) {
            let Some(found) = resolve(&path, self.includes) else {
                continue;
            };
            let found_key = canonical(&found);
            if self.state.get(&found_key) == Some(&State::Open) {
                let start = self
                    .chain
                    .iter()
                    .position(|f| canonical(f) == found_key)
                    .unwrap_or(0);
                let mut cycle: Vec<&Path> =
                    self.chain[start..].iter().map(|p| p.as_path()).collect();
                cycle.push(&found);
                return Err(Error::import_cycle(file, loc, &cycle));
            }
            self.visit(&found)?;
        }
        self.chain.pop();
        self.state.insert(key, State::Done);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::ErrorKind;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("cf-codegen-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_file_importing_itself_is_a_cycle_not_a_stack_overflow() {
        let d = dir("self-import");
        let a = d.join("a.proto");
        // Found by the proto_parse fuzz target: protobuf-parse recursed until the stack
        // overflowed, which aborts the process.
        std::fs::write(
            &a,
            "syntax = \"proto3\";\nimport \"a.proto\";\nmessage A {}\n",
        )
        .unwrap();
        let err = crate::Schema::load(&[&a], &[&d]).err().unwrap();
        let text = err.to_string();
        assert_eq!(err.kind(), ErrorKind::Parse, "{text}");
        assert!(
            text.starts_with(&format!("{}:2:1: import cycle: ", a.display())),
            "{text}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_longer_cycle_is_named_file_by_file() {
        let d = dir("cycle");
        let (a, b, c) = (d.join("a.proto"), d.join("b.proto"), d.join("c.proto"));
        std::fs::write(&a, "syntax = \"proto3\";\nimport \"b.proto\";\n").unwrap();
        std::fs::write(
            &b,
            "syntax = \"proto3\";\nimport 'c.proto';\nimport \"c.proto\";\n",
        )
        .unwrap();
        std::fs::write(&c, "syntax = \"proto3\";\n\n  import public \"b.proto\";\n").unwrap();
        let text = crate::Schema::load(&[&a], &[&d]).err().unwrap().to_string();
        assert!(
            text.starts_with(&format!("{}:3:3: ", c.display())),
            "{text}"
        );
        assert!(
            text.contains(&format!(
                "{} → {} → {}",
                b.display(),
                c.display(),
                d.join("b.proto").display()
            )),
            "{text}"
        );
        // A diamond (two files importing one) is no cycle.
        std::fs::write(&c, "syntax = \"proto3\";\nmessage C {}\n").unwrap();
        std::fs::write(&a, "syntax = \"proto3\";\nimport \"b.proto\";\nimport \"c.proto\";\nmessage A { C c = 1; }\n").unwrap();
        crate::Schema::load(&[&a], &[&d]).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn nesting_beyond_the_limit_is_refused_where_it_starts() {
        let d = dir("deep");
        let a = d.join("deep.proto");
        let depth = super::MAX_NESTING + 1;
        let text = format!(
            "syntax = \"proto3\";\n{}{}\n",
            "message M { ".repeat(depth),
            "}".repeat(depth)
        );
        std::fs::write(&a, text).unwrap();
        let err = crate::Schema::load(&[&a], &[&d]).err().unwrap();
        let text = err.to_string();
        assert_eq!(err.kind(), ErrorKind::Parse, "{text}");
        let col = 12 * super::MAX_NESTING + 11;
        assert!(
            text.starts_with(&format!("{}:2:{col}: ", a.display())),
            "{text}"
        );
        // At the limit it loads (and the parser's recursion fits a test thread's stack).
        let depth = super::MAX_NESTING;
        std::fs::write(
            &a,
            format!(
                "syntax = \"proto3\";\n{}{}\n",
                "message M { ".repeat(depth),
                "}".repeat(depth)
            ),
        )
        .unwrap();
        crate::Schema::load(&[&a], &[&d]).unwrap();
        std::fs::remove_dir_all(&d).unwrap();
    }
}
