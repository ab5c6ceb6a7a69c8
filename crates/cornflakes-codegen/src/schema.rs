//! The front end: `.proto` files → a resolved, validated schema shared by the code generator and
//! the dynamic codec.
//!
//! Parsing and name resolution are done by the crate's own parser (`src/parse`, proto2, proto3
//! and editions); this module turns its descriptors into [`Schema`], rejects what the wire format cannot carry (each error names
//! the file, line and construct), and attaches positions and comments found by
//! the crate's source scanner.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use protobuf::descriptor::field_descriptor_proto::{Label, Type};
use protobuf::descriptor::{DescriptorProto, EnumDescriptorProto, FileDescriptorProto};

use crate::error::Error;
/// Where an error points (`crate::place`; named here too, as the generators import it).
pub(crate) use crate::place::Place;
use crate::place::{is_options_message, Loc};
use crate::source::{self, Decl, SourceInfo};

mod services;
pub use services::{MethodDef, ServiceDef, ServiceId, EXACTLY_ONCE_OPTION, METHOD_ID_OPTION};

/// Index of a message in [`Schema::messages`].
pub type MsgId = usize;
/// Index of an enum in [`Schema::enums`].
pub type EnumId = usize;

/// Fixed-size scalar field types. Each has one slot size on the wire (no varints).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScalarKind {
    Int32,
    Int64,
    Uint32,
    Uint64,
    Sint32,
    Sint64,
    Fixed32,
    Fixed64,
    Sfixed32,
    Sfixed64,
    Float,
    Double,
    Bool,
}

impl ScalarKind {
    /// Bytes of one value in a slot or packed array.
    pub fn size(self) -> usize {
        use ScalarKind::*;
        match self {
            Bool => 1,
            Int32 | Uint32 | Sint32 | Fixed32 | Sfixed32 | Float => 4,
            Int64 | Uint64 | Sint64 | Fixed64 | Sfixed64 | Double => 8,
        }
    }

    /// The Rust type holding a value.
    pub fn rust_type(self) -> &'static str {
        use ScalarKind::*;
        match self {
            Bool => "bool",
            Int32 | Sint32 | Sfixed32 => "i32",
            Uint32 | Fixed32 => "u32",
            Int64 | Sint64 | Sfixed64 => "i64",
            Uint64 | Fixed64 => "u64",
            Float => "f32",
            Double => "f64",
        }
    }

    /// The `.proto` spelling.
    pub fn proto_name(self) -> &'static str {
        use ScalarKind::*;
        match self {
            Int32 => "int32",
            Int64 => "int64",
            Uint32 => "uint32",
            Uint64 => "uint64",
            Sint32 => "sint32",
            Sint64 => "sint64",
            Fixed32 => "fixed32",
            Fixed64 => "fixed64",
            Sfixed32 => "sfixed32",
            Sfixed64 => "sfixed64",
            Float => "float",
            Double => "double",
            Bool => "bool",
        }
    }

    /// All scalar kinds.
    pub const ALL: [ScalarKind; 13] = [
        ScalarKind::Int32,
        ScalarKind::Int64,
        ScalarKind::Uint32,
        ScalarKind::Uint64,
        ScalarKind::Sint32,
        ScalarKind::Sint64,
        ScalarKind::Fixed32,
        ScalarKind::Fixed64,
        ScalarKind::Sfixed32,
        ScalarKind::Sfixed64,
        ScalarKind::Float,
        ScalarKind::Double,
        ScalarKind::Bool,
    ];
}

/// What a field holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    Scalar(ScalarKind),
    Enum(EnumId),
    String,
    Bytes,
    Message(MsgId),
}

impl FieldKind {
    /// Bytes of this field's slot when singular (repeated fields always take 8).
    pub fn slot_size(self) -> usize {
        match self {
            FieldKind::Scalar(s) => s.size(),
            FieldKind::Enum(_) => 4,
            FieldKind::String | FieldKind::Bytes | FieldKind::Message(_) => 8,
        }
    }
}

/// A proto2 `[default = …]`, already checked against the field type.
#[derive(Clone, Debug, PartialEq)]
pub enum DefaultValue {
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    Enum(i32),
    String(String),
    Bytes(Vec<u8>),
}

/// One field of a message.
#[derive(Clone, Debug)]
pub struct FieldDef {
    /// Name as written in the `.proto`.
    pub name: String,
    /// lowerCamelCase JSON name.
    pub json_name: String,
    pub number: u32,
    pub kind: FieldKind,
    pub repeated: bool,
    /// Index into [`MessageDef::oneofs`] for members of a real (not synthetic) oneof.
    pub oneof: Option<usize>,
    pub default: Option<DefaultValue>,
    pub doc: String,
    pub loc: Loc,
}

/// A `oneof`: its members' indices in [`MessageDef::fields`].
#[derive(Clone, Debug)]
pub struct OneofDef {
    pub name: String,
    pub fields: Vec<usize>,
    pub doc: String,
}

/// One message.
#[derive(Clone, Debug)]
pub struct MessageDef {
    pub name: String,
    /// `pkg.Outer.Inner`, no leading dot.
    pub full_name: String,
    pub package: String,
    /// Index into [`Schema::files`].
    pub file: usize,
    /// Enclosing messages, outermost first.
    pub parents: Vec<String>,
    pub nested_messages: Vec<MsgId>,
    pub nested_enums: Vec<EnumId>,
    /// Sorted by field number.
    pub fields: Vec<FieldDef>,
    pub oneofs: Vec<OneofDef>,
    /// A synthetic `map<K, V>` entry (`key = 1`, `value = 2`).
    pub map_entry: bool,
    pub doc: String,
    pub loc: Loc,
}

impl MessageDef {
    /// The highest field number, 0 without fields.
    pub fn max_field(&self) -> u32 {
        self.fields.last().map_or(0, |f| f.number)
    }

    /// The field numbered `n`.
    pub fn field_by_number(&self, n: u32) -> Option<&FieldDef> {
        self.fields
            .binary_search_by_key(&n, |f| f.number)
            .ok()
            .map(|i| &self.fields[i])
    }

    /// The field called `name` (as in the `.proto`, or its JSON name).
    pub fn field_by_name(&self, name: &str) -> Option<(usize, &FieldDef)> {
        self.fields
            .iter()
            .enumerate()
            .find(|(_, f)| f.name == name)
            .or_else(|| {
                self.fields
                    .iter()
                    .enumerate()
                    .find(|(_, f)| f.json_name == name)
            })
    }
}

/// One enum value.
#[derive(Clone, Debug)]
pub struct EnumValueDef {
    pub name: String,
    pub number: i32,
    pub doc: String,
}

/// One enum.
#[derive(Clone, Debug)]
pub struct EnumDef {
    pub name: String,
    pub full_name: String,
    pub package: String,
    pub file: usize,
    pub parents: Vec<String>,
    /// In declaration order; the first is the default.
    pub values: Vec<EnumValueDef>,
    pub doc: String,
}

impl EnumDef {
    /// The value numbered `n` (the first one, for aliases).
    pub fn value_by_number(&self, n: i32) -> Option<&EnumValueDef> {
        self.values.iter().find(|v| v.number == n)
    }
}

/// One `.proto` file.
#[derive(Clone, Debug)]
pub struct FileDef {
    /// Path relative to its include directory, as in `import`.
    pub name: String,
    /// Path on disk.
    pub path: PathBuf,
    pub package: String,
    /// Named on the command line / in `compile_protos` (not only imported).
    pub is_input: bool,
}

/// A set of parsed, resolved and validated `.proto` files.
#[derive(Clone, Debug, Default)]
pub struct Schema {
    pub files: Vec<FileDef>,
    pub messages: Vec<MessageDef>,
    pub enums: Vec<EnumDef>,
    /// Every file's services, in load order (generated for input files only).
    pub services: Vec<ServiceDef>,
    /// What was read and left out, each starting with `file:line:col` (an `extend` of a message
    /// that is not an options message). `compile_protos` prints them as Cargo warnings.
    pub notes: Vec<String>,
    /// Packages whose types live in another crate (`Config::extern_path`), longest first:
    /// (proto package prefix, Rust path). Set by the generator on its copy of the schema.
    pub(crate) extern_paths: Vec<(String, String)>,
    by_name: HashMap<String, MsgId>,
}

impl Schema {
    /// Parses `inputs` (searched in `includes`) and everything they import.
    pub fn load(
        inputs: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> Result<Schema, Error> {
        // An input is read where it is named (relative to the current directory) or, as
        // protoc does, looked up in the include directories in order.
        let mut resolved_inputs: Vec<PathBuf> = Vec::with_capacity(inputs.len());
        for p in inputs {
            let p = p.as_ref();
            let found = if p.is_file() {
                Some(p.to_path_buf())
            } else if p.is_relative() {
                includes
                    .iter()
                    .map(|i| i.as_ref().join(p))
                    .find(|q| q.is_file())
            } else {
                None
            };
            // A well-known type no include directory has: the copy built into this crate.
            let found = found.or_else(|| {
                let name = p.to_str()?;
                crate::parse::well_known(name).map(|_| p.to_path_buf())
            });
            match found {
                Some(q) => resolved_inputs.push(q),
                None => {
                    return Err(Error::io(
                        p,
                        std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "no such .proto file (looked for it from the current directory, which is the package directory in a build script, and in each include directory)",
                        ),
                    ))
                }
            }
        }
        let input_paths: Vec<&Path> = resolved_inputs.iter().map(|p| p.as_path()).collect();
        let mut include_paths: Vec<&Path> = includes.iter().map(|p| p.as_ref()).collect();
        // `import "cornflakes/options.proto"` finds the shipped copy after the caller's.
        let shipped = shipped_options(&input_paths, &include_paths)?;
        include_paths.extend(shipped.as_deref());
        // What would overflow the parser's stack (an abort, not a panic) is refused first.
        crate::imports::check(&input_paths, &include_paths)?;
        let loaded = crate::parse::load(&input_paths, &include_paths)?;
        let mut b = Builder::default();
        for l in loaded {
            let info = source::scan(&l.text);
            b.file(&l.fd, l.path, l.is_input, info)?;
        }
        b.resolve()
    }

    /// The message called `name` (`pkg.Outer.Inner`; a leading dot is accepted).
    pub fn message(&self, name: &str) -> Option<MsgId> {
        self.by_name.get(name.trim_start_matches('.')).copied()
    }

    /// The service called `name` (`pkg.Service`; a leading dot is accepted).
    pub fn service(&self, name: &str) -> Option<ServiceId> {
        let name = name.trim_start_matches('.');
        self.services.iter().position(|s| s.full_name == name)
    }

    /// Names of all messages, for error messages.
    pub fn message_names(&self) -> Vec<&str> {
        self.messages
            .iter()
            .filter(|m| !m.map_entry)
            .map(|m| m.full_name.as_str())
            .collect()
    }
}

/// The directory of the shipped `cornflakes/options.proto` when a file of the load (`inputs`
/// and what they import through `includes`) imports it and no include directory has it.
fn shipped_options(inputs: &[&Path], includes: &[&Path]) -> Result<Option<PathBuf>, Error> {
    let path = crate::options::OPTIONS_PROTO_PATH;
    if includes.iter().any(|i| i.join(path).is_file())
        || crate::imports::find_importer(path, inputs, includes).is_none()
    {
        return Ok(None);
    }
    crate::options::shipped_dir()
        .map(Some)
        .map_err(|(p, e)| Error::io(&p, e))
}

/// A field's `[default = …]` text and where it was written.
type PendingDefault = Option<(String, Place)>;

#[derive(Default)]
struct Builder {
    schema: Schema,
    /// Per message: unresolved type names of its fields (`.pkg.Name`).
    pending: Vec<Vec<(Type, String)>>,
    enum_by_name: HashMap<String, EnumId>,
    /// Per message: `[default = …]` texts of its fields, checked once types are resolved.
    defaults: Vec<(MsgId, Vec<PendingDefault>)>,
    /// Services, resolved once every file is loaded.
    services: Vec<services::Pending>,
    /// Method options declared by the loaded files: full name → field number.
    method_options: HashMap<String, u32>,
}

fn join(scope: &str, name: &str) -> String {
    if name.is_empty() {
        scope.to_string()
    } else if scope.is_empty() {
        name.to_string()
    } else {
        format!("{scope}.{name}")
    }
}

impl Builder {
    fn file(
        &mut self,
        fd: &FileDescriptorProto,
        path: PathBuf,
        is_input: bool,
        info: SourceInfo,
    ) -> Result<(), Error> {
        let file = self.schema.files.len();
        let package = fd.package().to_string();
        self.schema.files.push(FileDef {
            name: fd.name().to_string(),
            path: path.clone(),
            package: package.clone(),
            is_input,
        });
        self.services_of(fd, file, &path, &info);
        self.note_extensions(fd, &info, &path);
        let ctx = FileCtx {
            file,
            package: &package,
            info: &info,
            path: &path,
        };
        for e in &fd.enum_type {
            self.enumeration(&ctx, e, &[])?;
        }
        for m in &fd.message_type {
            self.message(&ctx, m, &[])?;
        }
        Ok(())
    }

    /// Records the services of `fd` and the method options it declares.
    fn services_of(
        &mut self,
        fd: &FileDescriptorProto,
        file: usize,
        path: &Path,
        info: &SourceInfo,
    ) {
        self.method_options
            .extend(services::method_option_numbers(fd));
        self.services.extend(services::read(fd, file, path, info));
    }

    /// A note per `extend` of a message that is not an options message: its fields are read
    /// and left out, as prost-build does (the Cornflakes wire has no extensions).
    fn note_extensions(&mut self, fd: &FileDescriptorProto, info: &SourceInfo, path: &Path) {
        let mut extendees: Vec<&str> = Vec::new();
        let mut all = fd.extension.iter().collect::<Vec<_>>();
        let mut stack: Vec<&DescriptorProto> = fd.message_type.iter().collect();
        while let Some(m) = stack.pop() {
            all.extend(m.extension.iter());
            stack.extend(m.nested_type.iter());
        }
        for x in all {
            if !is_options_message(x.extendee()) && !extendees.contains(&x.extendee()) {
                extendees.push(x.extendee());
            }
        }
        let mut locs = info
            .blocks
            .iter()
            .filter(|(what, _)| *what == "extend")
            .map(|&(_, l)| l);
        for x in extendees {
            let place = Place {
                file: path.to_path_buf(),
                loc: locs.next().unwrap_or_default(),
            };
            self.schema.notes.push(format!(
                "{place}: `extend {}` left out: the Cornflakes wire format has no extensions (prost-build leaves them out too); declare the fields in the message to send them",
                x.trim_start_matches('.')
            ));
        }
    }

    fn enumeration(
        &mut self,
        ctx: &FileCtx<'_>,
        e: &EnumDescriptorProto,
        parents: &[String],
    ) -> Result<EnumId, Error> {
        let scope = join(ctx.package, &parents.join("."));
        let full_name = join(&scope, e.name());
        let decl = ctx.info.enums.get(&full_name).cloned().unwrap_or_default();
        let values = e
            .value
            .iter()
            .map(|v| EnumValueDef {
                name: v.name().to_string(),
                number: v.number(),
                doc: ctx
                    .info
                    .values
                    .get(&join(&full_name, v.name()))
                    .map(|d| d.doc.clone())
                    .unwrap_or_default(),
            })
            .collect();
        let id = self.schema.enums.len();
        self.schema.enums.push(EnumDef {
            name: e.name().to_string(),
            full_name: full_name.clone(),
            package: ctx.package.to_string(),
            file: ctx.file,
            parents: parents.to_vec(),
            values,
            doc: decl.doc,
        });
        self.enum_by_name.insert(full_name, id);
        Ok(id)
    }

    fn message(
        &mut self,
        ctx: &FileCtx<'_>,
        m: &DescriptorProto,
        parents: &[String],
    ) -> Result<MsgId, Error> {
        let scope = join(ctx.package, &parents.join("."));
        let full_name = join(&scope, m.name());
        let decl = ctx
            .info
            .messages
            .get(&full_name)
            .cloned()
            .unwrap_or_default();
        let place = |loc: Loc| Place {
            file: ctx.path.to_path_buf(),
            loc,
        };
        let map_entry = m.options.map_entry();
        let id = self.schema.messages.len();
        self.schema.messages.push(MessageDef {
            name: m.name().to_string(),
            full_name: full_name.clone(),
            package: ctx.package.to_string(),
            file: ctx.file,
            parents: parents.to_vec(),
            nested_messages: Vec::new(),
            nested_enums: Vec::new(),
            fields: Vec::new(),
            oneofs: Vec::new(),
            map_entry,
            doc: decl.doc.clone(),
            loc: decl.loc,
        });
        self.pending.push(Vec::new());
        self.schema.by_name.insert(full_name.clone(), id);

        let mut inner_parents = parents.to_vec();
        inner_parents.push(m.name().to_string());
        let mut nested_enums = Vec::new();
        for e in &m.enum_type {
            nested_enums.push(self.enumeration(ctx, e, &inner_parents)?);
        }
        let mut nested_messages = Vec::new();
        for n in &m.nested_type {
            nested_messages.push(self.message(ctx, n, &inner_parents)?);
        }

        // Real oneofs: those with a member that is not a proto3 `optional`.
        let mut oneof_map: HashMap<i32, usize> = HashMap::new();
        let mut oneofs = Vec::new();
        for f in &m.field {
            if let Some(i) = f.oneof_index {
                if !f.proto3_optional() && !oneof_map.contains_key(&i) {
                    let name = m
                        .oneof_decl
                        .get(i as usize)
                        .map(|o| o.name().to_string())
                        .unwrap_or_default();
                    let doc = ctx
                        .info
                        .oneofs
                        .get(&join(&full_name, &name))
                        .map(|d| d.doc.clone())
                        .unwrap_or_default();
                    oneof_map.insert(i, oneofs.len());
                    oneofs.push(OneofDef {
                        name,
                        fields: Vec::new(),
                        doc,
                    });
                }
            }
        }

        let mut fields = Vec::new();
        let mut pending = Vec::new();
        for f in &m.field {
            let fdecl: Decl = ctx
                .info
                .fields
                .get(&join(&full_name, f.name()))
                .cloned()
                .unwrap_or(Decl {
                    loc: decl.loc,
                    doc: String::new(),
                });
            let here = place(fdecl.loc);
            let what = format!("field `{}.{}`", full_name, f.name());
            if f.number() < 1 {
                return Err(Error::unsupported(
                    here,
                    format!("{what}: field numbers start at 1"),
                ));
            }
            let kind = match f.type_() {
                Type::TYPE_DOUBLE => FieldKind::Scalar(ScalarKind::Double),
                Type::TYPE_FLOAT => FieldKind::Scalar(ScalarKind::Float),
                Type::TYPE_INT64 => FieldKind::Scalar(ScalarKind::Int64),
                Type::TYPE_UINT64 => FieldKind::Scalar(ScalarKind::Uint64),
                Type::TYPE_INT32 => FieldKind::Scalar(ScalarKind::Int32),
                Type::TYPE_FIXED64 => FieldKind::Scalar(ScalarKind::Fixed64),
                Type::TYPE_FIXED32 => FieldKind::Scalar(ScalarKind::Fixed32),
                Type::TYPE_BOOL => FieldKind::Scalar(ScalarKind::Bool),
                Type::TYPE_STRING => FieldKind::String,
                Type::TYPE_BYTES => FieldKind::Bytes,
                Type::TYPE_UINT32 => FieldKind::Scalar(ScalarKind::Uint32),
                Type::TYPE_SFIXED32 => FieldKind::Scalar(ScalarKind::Sfixed32),
                Type::TYPE_SFIXED64 => FieldKind::Scalar(ScalarKind::Sfixed64),
                Type::TYPE_SINT32 => FieldKind::Scalar(ScalarKind::Sint32),
                Type::TYPE_SINT64 => FieldKind::Scalar(ScalarKind::Sint64),
                // Resolved once every file is loaded.
                Type::TYPE_MESSAGE => FieldKind::Message(usize::MAX),
                Type::TYPE_ENUM => FieldKind::Enum(usize::MAX),
                // A proto2 group is its nested message on the Cornflakes wire (which has no
                // group encoding; docs/wire-format.md).
                Type::TYPE_GROUP => FieldKind::Message(usize::MAX),
            };
            pending.push((f.type_(), f.type_name().to_string()));
            let oneof = f.oneof_index.and_then(|i| oneof_map.get(&i).copied());
            if let Some(o) = oneof {
                oneofs[o].fields.push(fields.len());
            }
            let default = if f.has_default_value() {
                Some((f.default_value().to_string(), here.clone()))
            } else {
                None
            };
            fields.push((
                FieldDef {
                    name: f.name().to_string(),
                    json_name: if f.has_json_name() {
                        f.json_name().to_string()
                    } else {
                        crate::parse::json_name(f.name())
                    },
                    number: f.number() as u32,
                    kind,
                    repeated: f.label() == Label::LABEL_REPEATED,
                    oneof,
                    default: None,
                    doc: fdecl.doc,
                    loc: fdecl.loc,
                },
                default,
            ));
        }
        // Sort by number, keeping oneof member indices right.
        let mut order: Vec<usize> = (0..fields.len()).collect();
        order.sort_by_key(|&i| fields[i].0.number);
        let mut new_index = vec![0; fields.len()];
        for (new, &old) in order.iter().enumerate() {
            new_index[old] = new;
        }
        for o in &mut oneofs {
            for i in &mut o.fields {
                *i = new_index[*i];
            }
            o.fields.sort_unstable();
        }
        let mut sorted_fields = Vec::new();
        let mut sorted_pending = Vec::new();
        let mut defaults = Vec::new();
        for &i in &order {
            sorted_fields.push(fields[i].0.clone());
            sorted_pending.push(pending[i].clone());
            defaults.push(fields[i].1.clone());
        }
        let msg = &mut self.schema.messages[id];
        msg.nested_enums = nested_enums;
        msg.nested_messages = nested_messages;
        msg.fields = sorted_fields;
        msg.oneofs = oneofs;
        self.pending[id] = sorted_pending;
        self.defaults.push((id, defaults));
        Ok(id)
    }

    fn resolve(mut self) -> Result<Schema, Error> {
        for id in 0..self.schema.messages.len() {
            for (i, (ty, name)) in self.pending[id].clone().into_iter().enumerate() {
                let key = name.trim_start_matches('.');
                let f = &mut self.schema.messages[id].fields[i];
                match ty {
                    Type::TYPE_MESSAGE | Type::TYPE_GROUP => {
                        f.kind =
                            FieldKind::Message(*self.schema.by_name.get(key).ok_or_else(|| {
                                Error::internal(format!("unresolved message type `{name}`"))
                            })?)
                    }
                    Type::TYPE_ENUM => {
                        f.kind = FieldKind::Enum(*self.enum_by_name.get(key).ok_or_else(|| {
                            Error::internal(format!("unresolved enum type `{name}`"))
                        })?)
                    }
                    _ => {}
                }
            }
        }
        let pending = std::mem::take(&mut self.services);
        self.schema.services = services::resolve(&self.schema, pending, &self.method_options)?;
        for (id, defaults) in std::mem::take(&mut self.defaults) {
            for (i, d) in defaults.into_iter().enumerate() {
                if let Some((text, place)) = d {
                    let value = self.default_value(id, i, &text, &place)?;
                    self.schema.messages[id].fields[i].default = Some(value);
                }
            }
        }
        Ok(self.schema)
    }

    fn default_value(
        &self,
        id: MsgId,
        i: usize,
        text: &str,
        place: &Place,
    ) -> Result<DefaultValue, Error> {
        let m = &self.schema.messages[id];
        let f = &m.fields[i];
        let bad = |why: &str| {
            Error::unsupported(
                place.clone(),
                format!(
                    "`[default = {text}]` of field `{}.{}`: {why}",
                    m.full_name, f.name
                ),
            )
        };
        let float = |t: &str| -> Option<f64> {
            match t {
                "inf" => Some(f64::INFINITY),
                "-inf" => Some(f64::NEG_INFINITY),
                "nan" => Some(f64::NAN),
                _ => t.parse().ok(),
            }
        };
        Ok(match f.kind {
            FieldKind::Scalar(ScalarKind::Bool) => {
                DefaultValue::Bool(text.parse().map_err(|_| bad("not a bool"))?)
            }
            FieldKind::Scalar(ScalarKind::Float | ScalarKind::Double) => {
                DefaultValue::Float(float(text).ok_or_else(|| bad("not a number"))?)
            }
            FieldKind::Scalar(
                ScalarKind::Uint32 | ScalarKind::Uint64 | ScalarKind::Fixed32 | ScalarKind::Fixed64,
            ) => DefaultValue::Uint(text.parse().map_err(|_| bad("not an unsigned integer"))?),
            FieldKind::Scalar(_) => {
                DefaultValue::Int(text.parse().map_err(|_| bad("not an integer"))?)
            }
            FieldKind::Enum(e) => DefaultValue::Enum(
                self.schema.enums[e]
                    .values
                    .iter()
                    .find(|v| v.name == text)
                    .map(|v| v.number)
                    .ok_or_else(|| bad("no such enum value"))?,
            ),
            FieldKind::String => DefaultValue::String(text.to_string()),
            FieldKind::Bytes => DefaultValue::Bytes(crate::parse::c_unescape(text)),
            FieldKind::Message(_) => return Err(bad("messages have no default")),
        })
    }
}

struct FileCtx<'a> {
    file: usize,
    package: &'a str,
    info: &'a SourceInfo,
    path: &'a Path,
}
