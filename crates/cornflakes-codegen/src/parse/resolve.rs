//! Names across files: every type a field, extension or method names becomes fully qualified
//! (`.pkg.Outer.Inner`) by protobuf's scoping rules, looked up only in the files the file sees
//! (itself, its imports, and what those import publicly). Two definitions of one name are
//! refused here, where the second one is written.

use std::collections::{HashMap, HashSet};

use protobuf::descriptor::field_descriptor_proto::Type;
use protobuf::descriptor::{DescriptorProto, FieldDescriptorProto};
use protobuf::Message as _;

use super::{join, Const, ParsedFile};
use crate::place::Loc;

/// A name that does not resolve or is defined twice: in which file (an index into the files
/// given to [`resolve`]) and where.
#[derive(Debug)]
pub(crate) struct ResolveError {
    pub file: usize,
    pub loc: Loc,
    pub message: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Message,
    Enum,
    Service,
}

struct Symbols {
    defs: HashMap<String, (Kind, usize)>,
    packages: HashSet<String>,
    /// Extensions of `google.protobuf.MethodOptions`: full name → (field number, file).
    method_options: HashMap<String, (u32, usize)>,
}

/// Resolves the type names of `files` in place; `files[i].fd.dependency` name other files of
/// the slice (by `fd.name`).
pub(crate) fn resolve(files: &mut [ParsedFile]) -> Result<(), ResolveError> {
    let syms = symbols(files)?;
    let by_name: HashMap<String, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.fd.name().to_string(), i))
        .collect();
    let visible: Vec<HashSet<usize>> = (0..files.len())
        .map(|i| visible_from(files, &by_name, i))
        .collect();
    for (i, vis) in visible.iter().enumerate() {
        let names: Vec<String> = files.iter().map(|f| f.fd.name().to_string()).collect();
        let file = &mut files[i];
        let r = Resolver {
            syms: &syms,
            visible: vis,
            file: i,
            names: &names,
            locs: &file.locs,
        };
        let package = file.fd.package().to_string();
        for m in &mut file.fd.message_type {
            r.message(&package, m)?;
        }
        for x in &mut file.fd.extension {
            r.extension(&package, x)?;
        }
        let method_options = std::mem::take(&mut file.method_options);
        for s in &mut file.fd.service {
            let full = join(&package, s.name());
            for m in &mut s.method {
                let method = format!("{full}.{}", m.name());
                for (_, ext, value) in method_options.iter().filter(|(n, _, _)| *n == method) {
                    let Some(number) = r.method_option(&package, ext) else {
                        continue;
                    };
                    let v = match value {
                        Const::Number(t) => t.parse::<i128>().ok().map(|v| v as u64),
                        Const::Ident(t) if t == "true" => Some(1),
                        Const::Ident(t) if t == "false" => Some(0),
                        _ => None,
                    };
                    if let Some(v) = v {
                        m.options
                            .mut_or_insert_default()
                            .mut_unknown_fields()
                            .add_varint(number, v);
                    }
                }
                let key = format!("rpc:{full}.{}", m.name());
                let input = r.message_type(&package, m.input_type(), &format!("{key}.input"))?;
                m.set_input_type(input);
                let output = r.message_type(&package, m.output_type(), &format!("{key}.output"))?;
                m.set_output_type(output);
            }
        }
    }
    Ok(())
}

/// Every message, enum and service by full name, and every package and its prefixes.
fn symbols(files: &[ParsedFile]) -> Result<Symbols, ResolveError> {
    let mut syms = Symbols {
        defs: HashMap::new(),
        packages: HashSet::new(),
        method_options: HashMap::new(),
    };
    fn add(
        syms: &mut Symbols,
        files: &[ParsedFile],
        file: usize,
        full: String,
        kind: Kind,
    ) -> Result<(), ResolveError> {
        let loc_of = |f: usize| {
            files[f]
                .locs
                .get(&format!("decl:{full}"))
                .copied()
                .unwrap_or_default()
        };
        if let Some(&(_, first)) = syms.defs.get(&full) {
            let l = loc_of(first);
            return Err(ResolveError {
                file,
                loc: loc_of(file),
                message: format!(
                    "`{full}` is defined twice (first in {} at {}:{})",
                    files[first].fd.name(),
                    l.line,
                    l.col
                ),
            });
        }
        syms.defs.insert(full, (kind, file));
        Ok(())
    }
    fn message(
        syms: &mut Symbols,
        files: &[ParsedFile],
        file: usize,
        scope: &str,
        m: &DescriptorProto,
    ) -> Result<(), ResolveError> {
        let full = join(scope, m.name());
        add(syms, files, file, full.clone(), Kind::Message)?;
        for e in &m.enum_type {
            add(syms, files, file, join(&full, e.name()), Kind::Enum)?;
        }
        for n in &m.nested_type {
            message(syms, files, file, &full, n)?;
        }
        Ok(())
    }
    for (i, f) in files.iter().enumerate() {
        let package = f.fd.package();
        let mut p = String::new();
        for part in package.split('.').filter(|s| !s.is_empty()) {
            p = join(&p, part);
            syms.packages.insert(p.clone());
        }
        for e in &f.fd.enum_type {
            add(&mut syms, files, i, join(package, e.name()), Kind::Enum)?;
        }
        for m in &f.fd.message_type {
            message(&mut syms, files, i, package, m)?;
        }
        for s in &f.fd.service {
            add(&mut syms, files, i, join(package, s.name()), Kind::Service)?;
        }
        let mut scoped: Vec<(String, &FieldDescriptorProto)> =
            f.fd.extension
                .iter()
                .map(|x| (package.to_string(), x))
                .collect();
        let mut stack: Vec<(String, &DescriptorProto)> =
            f.fd.message_type
                .iter()
                .map(|m| (package.to_string(), m))
                .collect();
        while let Some((scope, m)) = stack.pop() {
            let full = join(&scope, m.name());
            scoped.extend(m.extension.iter().map(|x| (full.clone(), x)));
            stack.extend(m.nested_type.iter().map(|n| (full.clone(), n)));
        }
        for (scope, x) in scoped {
            let extendee = x.extendee().trim_start_matches('.');
            if extendee == "google.protobuf.MethodOptions" || extendee == "MethodOptions" {
                syms.method_options
                    .insert(join(&scope, x.name()), (x.number() as u32, i));
            }
        }
    }
    Ok(syms)
}

/// The files whose definitions file `i` may use: itself, its imports, and the public imports
/// of those, transitively.
fn visible_from(
    files: &[ParsedFile],
    by_name: &HashMap<String, usize>,
    i: usize,
) -> HashSet<usize> {
    let mut out = HashSet::from([i]);
    let mut queue: Vec<usize> = Vec::new();
    for d in &files[i].fd.dependency {
        if let Some(&j) = by_name.get(d) {
            if out.insert(j) {
                queue.push(j);
            }
        }
    }
    while let Some(j) = queue.pop() {
        let fd = &files[j].fd;
        for &k in &fd.public_dependency {
            let Some(&d) = fd.dependency.get(k as usize).and_then(|d| by_name.get(d)) else {
                continue;
            };
            if out.insert(d) {
                queue.push(d);
            }
        }
    }
    out
}

struct Resolver<'a> {
    syms: &'a Symbols,
    visible: &'a HashSet<usize>,
    file: usize,
    names: &'a [String],
    locs: &'a HashMap<String, Loc>,
}

impl Resolver<'_> {
    fn fail<T>(&self, key: &str, message: String) -> Result<T, ResolveError> {
        Err(ResolveError {
            file: self.file,
            loc: self.locs.get(key).copied().unwrap_or_default(),
            message,
        })
    }

    fn message(&self, scope: &str, m: &mut DescriptorProto) -> Result<(), ResolveError> {
        let full = join(scope, m.name());
        for f in &mut m.field {
            self.field(&full, f, &format!("type:{full}.{}", f.name()))?;
        }
        for x in &mut m.extension {
            self.extension(&full, x)?;
        }
        for n in &mut m.nested_type {
            self.message(&full, n)?;
        }
        Ok(())
    }

    fn extension(&self, scope: &str, x: &mut FieldDescriptorProto) -> Result<(), ResolveError> {
        let written = x.extendee().to_string();
        let key = format!("extend:{scope}:{written}");
        let (full, kind) = self.lookup(scope, &written, &key)?;
        if kind != Kind::Message {
            return self.fail(
                &key,
                format!("`extend {written}`: `{full}` is not a message"),
            );
        }
        x.set_extendee(format!(".{full}"));
        let tkey = format!("type:{scope}.{}@{written}", x.name());
        self.field(scope, x, &tkey)
    }

    fn field(
        &self,
        scope: &str,
        f: &mut FieldDescriptorProto,
        key: &str,
    ) -> Result<(), ResolveError> {
        if !f.has_type_name() {
            return Ok(());
        }
        let written = f.type_name().to_string();
        let (full, kind) = self.lookup(scope, &written, key)?;
        match (kind, f.has_type()) {
            (Kind::Message, false) => f.set_type(Type::TYPE_MESSAGE),
            (Kind::Enum, false) => f.set_type(Type::TYPE_ENUM),
            (Kind::Message, true) => {} // a group or a map's entry
            _ => {
                return self.fail(
                    key,
                    format!("`{written}` is a service, not a message or enum"),
                )
            }
        }
        f.set_type_name(format!(".{full}"));
        Ok(())
    }

    fn message_type(&self, scope: &str, written: &str, key: &str) -> Result<String, ResolveError> {
        let (full, kind) = self.lookup(scope, written, key)?;
        if kind != Kind::Message {
            return self.fail(key, format!("`{written}` is not a message"));
        }
        Ok(format!(".{full}"))
    }

    /// The field number of the method option `written` (`cornflakes.method_id`, as inside
    /// the parentheses), looked up from `scope` as a type name is, if a visible file declares
    /// it.
    fn method_option(&self, scope: &str, written: &str) -> Option<u32> {
        let visible = |full: &str| {
            self.syms
                .method_options
                .get(full)
                .filter(|(_, f)| self.visible.contains(f))
                .map(|(n, _)| *n)
        };
        if let Some(abs) = written.strip_prefix('.') {
            return visible(abs);
        }
        let parts: Vec<&str> = scope.split('.').filter(|s| !s.is_empty()).collect();
        (0..=parts.len())
            .rev()
            .find_map(|k| visible(&join(&parts[..k].join("."), written)))
    }

    fn defined(&self, full: &str) -> Option<(Kind, bool)> {
        self.syms
            .defs
            .get(full)
            .map(|&(k, f)| (k, self.visible.contains(&f)))
    }

    /// `written` as seen from `scope`: protobuf looks for its first component in `scope`, then
    /// in each enclosing scope, and resolves the rest inside the first match.
    fn lookup(
        &self,
        scope: &str,
        written: &str,
        key: &str,
    ) -> Result<(String, Kind), ResolveError> {
        if let Some(abs) = written.strip_prefix('.') {
            return match self.defined(abs) {
                Some((k, true)) => Ok((abs.to_string(), k)),
                Some((_, false)) => self.not_imported(abs, written, key),
                None => self.fail(key, format!("unknown type `{written}`")),
            };
        }
        let first = written.split('.').next().unwrap_or(written);
        let parts: Vec<&str> = scope.split('.').filter(|s| !s.is_empty()).collect();
        let mut hidden = None;
        for k in (0..=parts.len()).rev() {
            let prefix = parts[..k].join(".");
            let head = join(&prefix, first);
            if self.defined(&head).is_none() && !self.syms.packages.contains(&head) {
                continue;
            }
            let full = join(&prefix, written);
            match self.defined(&full) {
                Some((kind, true)) => return Ok((full, kind)),
                Some((_, false)) => {
                    hidden.get_or_insert(full);
                }
                None => {}
            }
        }
        if let Some(full) = hidden {
            return self.not_imported(&full, written, key);
        }
        let at = if scope.is_empty() {
            String::new()
        } else {
            format!(" from `{scope}`")
        };
        self.fail(
            key,
            format!("unknown type `{written}`: no message or enum of that name is visible{at}"),
        )
    }

    fn not_imported<T>(&self, full: &str, written: &str, key: &str) -> Result<T, ResolveError> {
        let file = self
            .syms
            .defs
            .get(full)
            .map_or("another file", |&(_, f)| self.names[f].as_str());
        self.fail(
            key,
            format!("`{written}` is defined in {file}, which this file does not import"),
        )
    }
}
