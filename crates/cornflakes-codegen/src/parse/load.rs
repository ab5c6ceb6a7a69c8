//! Reads the files of a load: the inputs, then every file they import (found in the include
//! directories in order, else among protobuf's well-known types built into this crate),
//! parses each once and resolves names across them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use protobuf::descriptor::FileDescriptorProto;

use super::{parse, resolve, ParsedFile};
use crate::error::Error;
use crate::place::{Loc, Place};

/// `google/protobuf/*.proto` as shipped with protobuf, for imports no include directory has
/// (as protoc and prost-build provide them).
const WELL_KNOWN: &[(&str, &str)] = &[
    (
        "google/protobuf/any.proto",
        include_str!("../../protos/google/protobuf/any.proto"),
    ),
    (
        "google/protobuf/api.proto",
        include_str!("../../protos/google/protobuf/api.proto"),
    ),
    (
        "google/protobuf/descriptor.proto",
        include_str!("../../protos/google/protobuf/descriptor.proto"),
    ),
    (
        "google/protobuf/duration.proto",
        include_str!("../../protos/google/protobuf/duration.proto"),
    ),
    (
        "google/protobuf/compiler/plugin.proto",
        include_str!("../../protos/google/protobuf/compiler/plugin.proto"),
    ),
    (
        "google/protobuf/empty.proto",
        include_str!("../../protos/google/protobuf/empty.proto"),
    ),
    (
        "google/protobuf/field_mask.proto",
        include_str!("../../protos/google/protobuf/field_mask.proto"),
    ),
    (
        "google/protobuf/source_context.proto",
        include_str!("../../protos/google/protobuf/source_context.proto"),
    ),
    (
        "google/protobuf/struct.proto",
        include_str!("../../protos/google/protobuf/struct.proto"),
    ),
    (
        "google/protobuf/timestamp.proto",
        include_str!("../../protos/google/protobuf/timestamp.proto"),
    ),
    (
        "google/protobuf/type.proto",
        include_str!("../../protos/google/protobuf/type.proto"),
    ),
    (
        "google/protobuf/wrappers.proto",
        include_str!("../../protos/google/protobuf/wrappers.proto"),
    ),
];

/// The text of well-known type file `name` (`google/protobuf/timestamp.proto`), if it is one.
pub(crate) fn well_known(name: &str) -> Option<&'static str> {
    WELL_KNOWN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// One file of a load.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// Where it was read, as the caller named it (the import path for a built-in file).
    pub path: PathBuf,
    /// Its text.
    pub text: String,
    /// Named by the caller, not only imported.
    pub is_input: bool,
    /// Its descriptor, type names fully qualified.
    pub fd: FileDescriptorProto,
}

/// Reads, parses and resolves `inputs` (paths to read) and everything they import.
pub(crate) fn load(inputs: &[&Path], includes: &[&Path]) -> Result<Vec<Loaded>, Error> {
    let mut files: Vec<(Loaded, ParsedFile)> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for &input in inputs {
        let name = import_name(input, includes);
        if let Some(&i) = by_name.get(&name) {
            files[i].0.is_input = true;
            continue;
        }
        let text = match std::fs::read_to_string(input) {
            Ok(t) => t,
            Err(e) => match input.to_str().and_then(well_known) {
                Some(t) => t.to_string(),
                None => return Err(Error::io(input, e)),
            },
        };
        by_name.insert(name.clone(), files.len());
        files.push(read(name, input.to_path_buf(), text, true)?);
    }
    // A file reached under two import paths (`types.proto` from its own directory,
    // `a/b/types.proto` from the root) is read once: later names are aliases of the first.
    let mut by_path: HashMap<PathBuf, usize> = files
        .iter()
        .enumerate()
        .map(|(i, (l, _))| (canonical(&l.path), i))
        .collect();
    let mut next = 0;
    while next < files.len() {
        let imports = files[next].1.imports.clone();
        let importer = files[next].0.path.clone();
        for (name, loc) in imports {
            if by_name.contains_key(&name) {
                continue;
            }
            let (path, text) = find(&name, includes, &importer, loc)?;
            if let Some(&i) = by_path.get(&canonical(&path)).filter(|_| path.is_file()) {
                by_name.insert(name, i);
                continue;
            }
            by_name.insert(name.clone(), files.len());
            by_path.insert(canonical(&path), files.len());
            files.push(read(name, path, text, false)?);
        }
        next += 1;
    }
    // Dependencies by the name their file was read under.
    let names: Vec<String> = files.iter().map(|(_, p)| p.fd.name().to_string()).collect();
    for (_, p) in &mut files {
        for d in &mut p.fd.dependency {
            if let Some(&i) = by_name.get(d.as_str()) {
                d.clone_from(&names[i]);
            }
        }
    }
    let mut parsed: Vec<ParsedFile> = files.iter_mut().map(|(_, p)| std::mem::take(p)).collect();
    resolve::resolve(&mut parsed).map_err(|e| {
        Error::parse(
            Place {
                file: files[e.file].0.path.clone(),
                loc: e.loc,
            },
            &e.message,
        )
    })?;
    Ok(files
        .into_iter()
        .zip(parsed)
        .map(|((mut l, _), p)| {
            l.fd = p.fd;
            l
        })
        .collect())
}

/// Parses one file.
fn read(
    name: String,
    path: PathBuf,
    text: String,
    is_input: bool,
) -> Result<(Loaded, ParsedFile), Error> {
    let parsed = parse(&name, &text).map_err(|e| {
        Error::parse(
            Place {
                file: path.clone(),
                loc: e.loc,
            },
            &e.message,
        )
    })?;
    Ok((
        Loaded {
            path,
            text,
            is_input,
            fd: FileDescriptorProto::new(),
        },
        parsed,
    ))
}

/// An imported file: the first include directory that has it, else a well-known type.
fn find(
    name: &str,
    includes: &[&Path],
    importer: &Path,
    loc: Loc,
) -> Result<(PathBuf, String), Error> {
    let at = || Place {
        file: importer.to_path_buf(),
        loc,
    };
    for inc in includes {
        let p = inc.join(name);
        match std::fs::read_to_string(&p) {
            Ok(text) => return Ok((p, text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) if p.is_dir() => {
                let _ = e;
                continue;
            }
            Err(e) => {
                return Err(Error::parse(
                    at(),
                    &format!("could not read file `{}`: {e}", p.display()),
                ))
            }
        }
    }
    if let Some(text) = well_known(name) {
        return Ok((PathBuf::from(name), text.to_string()));
    }
    let dirs: Vec<String> = includes.iter().map(|p| p.display().to_string()).collect();
    Err(Error::parse(
        at(),
        &format!(
            "imported file `{name}` is not found in the include paths [{}]: add the directory \
             holding it to the include paths (the `includes` of `compile_protos` in build.rs, \
             `-I` on the command line)",
            dirs.join(", ")
        ),
    ))
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

/// An input's import path: relative to the first include directory that holds it (compared
/// resolved: `..` and symbolic links), else its file name; a built-in well-known type's is its
/// own.
fn import_name(input: &Path, includes: &[&Path]) -> String {
    if let Some(name) = input
        .to_str()
        .filter(|n| !input.exists() && well_known(n).is_some())
    {
        return name.to_string();
    }
    let resolve = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let abs = resolve(input);
    for inc in includes {
        if let Ok(rel) = abs.strip_prefix(resolve(inc)) {
            return rel.to_string_lossy().replace('\\', "/");
        }
    }
    input.file_name().map_or_else(
        || input.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
