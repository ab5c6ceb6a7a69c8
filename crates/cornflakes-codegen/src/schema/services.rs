//! Services and their methods in the schema model: read from the descriptors, with positions
//! and comments from the source scanner and the method options of `cornflakes/options.proto`,
//! then resolved once every file is loaded.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use protobuf::descriptor::{FileDescriptorProto, MethodOptions};
use protobuf::UnknownValueRef;

use super::{join, MsgId, Place, Schema};
use crate::error::Error;
use crate::source::{Loc, SourceInfo};

/// Index of a service in [`Schema::services`].
pub type ServiceId = usize;

/// The full name of the method option that pins a method's number
/// (`option (cornflakes.method_id) = 11;`).
pub const METHOD_ID_OPTION: &str = "cornflakes.method_id";
/// The full name of the method option that asks for exactly-once execution
/// (`option (cornflakes.exactly_once) = true;`).
pub const EXACTLY_ONCE_OPTION: &str = "cornflakes.exactly_once";

/// One `rpc` of a service.
#[derive(Clone, Debug)]
pub struct MethodDef {
    /// Name as written in the `.proto`.
    pub name: String,
    /// `pkg.Service.Method`, no leading dot.
    pub full_name: String,
    /// The request message.
    pub input: MsgId,
    /// The reply message.
    pub output: MsgId,
    /// `rpc M(stream A) …`.
    pub client_streaming: bool,
    /// `rpc M(A) returns (stream B)`.
    pub server_streaming: bool,
    /// The number from `option (cornflakes.method_id) = N;`, if pinned.
    pub pinned_id: Option<u16>,
    /// `option (cornflakes.exactly_once) = true;`.
    pub exactly_once: bool,
    pub doc: String,
    pub loc: Loc,
}

impl MethodDef {
    /// Whether either side streams (such methods are not generated; see `Config`).
    pub fn is_streaming(&self) -> bool {
        self.client_streaming || self.server_streaming
    }
}

/// One `service`.
#[derive(Clone, Debug)]
pub struct ServiceDef {
    pub name: String,
    /// `pkg.Service`, no leading dot.
    pub full_name: String,
    pub package: String,
    /// Index into [`Schema::files`].
    pub file: usize,
    /// In declaration order.
    pub methods: Vec<MethodDef>,
    pub doc: String,
    pub loc: Loc,
}

/// A service as read from one file: its methods' types and options are resolved once every
/// file is loaded (an option's extension may be declared in a file read later).
pub(super) struct Pending {
    def: ServiceDef,
    path: PathBuf,
    /// Per method: (input type, output type) as in the descriptor (`.pkg.Name`).
    types: Vec<(String, String)>,
    options: Vec<MethodOptions>,
}

/// The services of `fd` (file number `file`, read from `path`, scanned as `info`).
pub(super) fn read(
    fd: &FileDescriptorProto,
    file: usize,
    path: &Path,
    info: &SourceInfo,
) -> Vec<Pending> {
    let package = fd.package();
    fd.service
        .iter()
        .map(|s| {
            let full_name = join(package, s.name());
            let decl = info.services.get(&full_name).cloned().unwrap_or_default();
            let mut types = Vec::with_capacity(s.method.len());
            let mut options = Vec::with_capacity(s.method.len());
            let methods = s
                .method
                .iter()
                .map(|m| {
                    let method_name = join(&full_name, m.name());
                    let mdecl = info.methods.get(&method_name).cloned().unwrap_or_else(|| {
                        crate::source::Decl {
                            loc: decl.loc,
                            doc: String::new(),
                        }
                    });
                    types.push((m.input_type().to_string(), m.output_type().to_string()));
                    options.push(m.options.clone().unwrap_or_default());
                    MethodDef {
                        name: m.name().to_string(),
                        full_name: method_name,
                        input: usize::MAX,
                        output: usize::MAX,
                        client_streaming: m.client_streaming(),
                        server_streaming: m.server_streaming(),
                        pinned_id: None,
                        exactly_once: false,
                        doc: mdecl.doc,
                        loc: mdecl.loc,
                    }
                })
                .collect();
            Pending {
                def: ServiceDef {
                    name: s.name().to_string(),
                    full_name,
                    package: package.to_string(),
                    file,
                    methods,
                    doc: decl.doc,
                    loc: decl.loc,
                },
                path: path.to_path_buf(),
                types,
                options,
            }
        })
        .collect()
}

/// The method options `fd` declares (`extend google.protobuf.MethodOptions { … }`, at file
/// level or inside a message): full name → field number.
pub(super) fn method_option_numbers(fd: &FileDescriptorProto) -> Vec<(String, u32)> {
    let is_method_options =
        |extendee: &str| extendee.trim_start_matches('.') == "google.protobuf.MethodOptions";
    let mut out: Vec<(String, u32)> = fd
        .extension
        .iter()
        .filter(|x| is_method_options(x.extendee()))
        .map(|x| (join(fd.package(), x.name()), x.number() as u32))
        .collect();
    // Declared inside a message: `message Outer { extend … { … } }` names it `pkg.Outer.x`.
    let mut stack: Vec<(String, &protobuf::descriptor::DescriptorProto)> = fd
        .message_type
        .iter()
        .map(|m| (join(fd.package(), m.name()), m))
        .collect();
    while let Some((scope, m)) = stack.pop() {
        out.extend(
            m.extension
                .iter()
                .filter(|x| is_method_options(x.extendee()))
                .map(|x| (join(&scope, x.name()), x.number() as u32)),
        );
        stack.extend(m.nested_type.iter().map(|n| (join(&scope, n.name()), n)));
    }
    out
}

/// Resolves the methods' types against `schema` and reads their Cornflakes options, whose
/// field numbers are in `option_numbers` (full name → number, from every loaded file).
pub(super) fn resolve(
    schema: &Schema,
    pending: Vec<Pending>,
    option_numbers: &HashMap<String, u32>,
) -> Result<Vec<ServiceDef>, Error> {
    let id_field = option_numbers.get(METHOD_ID_OPTION).copied();
    let once_field = option_numbers.get(EXACTLY_ONCE_OPTION).copied();
    let mut out = Vec::with_capacity(pending.len());
    for p in pending {
        let mut def = p.def;
        for ((m, (input, output)), options) in def.methods.iter_mut().zip(p.types).zip(p.options) {
            let message = |name: &str| {
                schema.message(name).ok_or_else(|| {
                    Error::internal(format!(
                        "unresolved message type `{name}` of method `{}`",
                        m.full_name
                    ))
                })
            };
            m.input = message(&input)?;
            m.output = message(&output)?;
            let place = || Place {
                file: p.path.clone(),
                loc: m.loc,
            };
            if let Some(v) = id_field.and_then(|n| last_varint(&options, n)) {
                m.pinned_id = Some(
                    u16::try_from(v)
                        .ok()
                        .filter(|&n| n != 0)
                        .ok_or_else(|| {
                            Error::invalid(
                                place(),
                                format!(
                                    "method `{}`: `({METHOD_ID_OPTION}) = {v}` is not a message type; method numbers are 1 to 65535",
                                    m.full_name
                                ),
                            )
                        })?,
                );
            }
            m.exactly_once = once_field
                .and_then(|n| last_varint(&options, n))
                .is_some_and(|v| v != 0);
        }
        out.push(def);
    }
    Ok(out)
}

/// The value of option field `number` if it is set (the last one written wins, as protobuf
/// reads a repeated scalar).
fn last_varint(options: &MethodOptions, number: u32) -> Option<u64> {
    options
        .special_fields
        .unknown_fields()
        .iter()
        .filter(|(n, _)| *n == number)
        .filter_map(|(_, v)| match v {
            UnknownValueRef::Varint(v) => Some(v),
            _ => None,
        })
        .last()
}
