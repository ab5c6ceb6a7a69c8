//! One message: its struct, accessors, `CornflakesObj` (and the datapaths' `SendObject` through
//! `send_object_methods!`), `DecodeObj` and `Debug`.
//!
//! The shape follows `cornflakes::handwritten`: a presence bitmap stored per bitmap word that
//! holds a field of the message, per-slot-size masks so the header length is a few popcounts,
//! and the walks of the wire format (`docs/wire-format.md`) unrolled field by field.

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

mod extras;
mod view;
pub(crate) use extras::oneof_value_enum;
pub(crate) use view::view_name;

use super::names::{self, doc_attrs, enum_path, ident, ident_avoiding, message_path, snake};
use crate::schema::{DefaultValue, FieldDef, FieldKind, MessageDef, MsgId, ScalarKind, Schema};

/// Struct fields every message may have; proto fields with these names get a `_` suffix.
const INTERNAL: &[&str] = &["arena", "p", "_arena"];

struct Field<'s> {
    def: &'s FieldDef,
    /// Storage field of the struct.
    store: proc_macro2::Ident,
    /// Base of accessor names (`has_<base>`).
    base: String,
    /// Index of the stored bitmap word, and the bit.
    word: usize,
    mask: Literal,
    /// Number of the field's bit in the stored words (`Presence` indexes by it): the field
    /// number itself unless the message's field numbers are sparse.
    bit_number: u32,
    /// Bytes of the slot.
    slot: usize,
}

fn hex(v: u32) -> Literal {
    format!("{v:#x}")
        .parse::<Literal>()
        .unwrap_or_else(|_| Literal::u32_unsuffixed(v))
}

/// An unsuffixed integer literal (`4`, not `4usize`).
fn lit(n: usize) -> Literal {
    Literal::usize_unsuffixed(n)
}

/// Most nested objects a message's decode reads with every nested decode inline for it to be
/// forced inline itself. Measured on the `benches` trees (docs/performance.md, "Choices the
/// instruction counts rest on"): `Tree4` (14 nested objects) was faster forced inline, `Tree5`
/// (30) slower.
const INLINE_NESTED: usize = 14;

/// Most fields a message has for its `emit_with` to write an object with every field present
/// through one bounds check (`MessageGen::emit_full`): past it, the values kept live until the
/// header is written would only spill.
const FULL_HEADER_FIELDS: usize = 8;

/// How many nested objects decoding message `id` reads when every nested decode is inline
/// (each message field counted once, repeated or not); `None` for a recursive message or one
/// above `limit`.
fn nested_weight(schema: &Schema, id: MsgId, limit: usize, seen: &mut Vec<MsgId>) -> Option<usize> {
    if seen.contains(&id) {
        return None;
    }
    seen.push(id);
    let mut w = 0usize;
    for f in &schema.messages[id].fields {
        if let FieldKind::Message(child) = f.kind {
            w += 1 + nested_weight(schema, child, limit, seen)?;
            if w > limit {
                seen.pop();
                return None;
            }
        }
    }
    seen.pop();
    Some(w)
}

fn word_array(v: &[u32]) -> TokenStream {
    let items = v.iter().map(|&w| hex(w));
    quote!([#(#items),*])
}

pub(crate) struct MessageGen<'s> {
    schema: &'s Schema,
    id: MsgId,
    msg: &'s MessageDef,
    /// Module holding the struct.
    module: Vec<String>,
    fields: Vec<Field<'s>>,
    /// Wire bitmap word index of each stored word, ascending.
    words: Vec<u32>,
    needs_arena: bool,
    uses_lifetime: bool,
}

impl<'s> MessageGen<'s> {
    pub fn new(schema: &'s Schema, id: MsgId) -> Self {
        let msg = &schema.messages[id];
        let module = names::scope_modules(&msg.package, &msg.parents);
        let mut words: Vec<u32> = msg.fields.iter().map(|f| (f.number - 1) / 32).collect();
        words.dedup();
        let fields = msg
            .fields
            .iter()
            .map(|f| {
                let base = snake(&f.name);
                let w = (f.number - 1) / 32;
                Field {
                    def: f,
                    store: ident_avoiding(&base, INTERNAL),
                    base,
                    word: words.iter().position(|&x| x == w).unwrap_or(0),
                    mask: hex(1u32 << ((f.number - 1) % 32)),
                    bit_number: words.iter().position(|&x| x == w).unwrap_or(0) as u32 * 32
                        + (f.number - 1) % 32
                        + 1,
                    slot: if f.repeated { 8 } else { f.kind.slot_size() },
                }
            })
            .collect::<Vec<_>>();
        let needs_arena = msg
            .fields
            .iter()
            .any(|f| f.repeated || matches!(f.kind, FieldKind::Message(_)));
        let uses_lifetime = needs_arena
            || msg
                .fields
                .iter()
                .any(|f| matches!(f.kind, FieldKind::String | FieldKind::Bytes));
        MessageGen {
            schema,
            id,
            msg,
            module,
            fields,
            words,
            needs_arena,
            uses_lifetime,
        }
    }

    fn dense(&self) -> bool {
        self.words.iter().enumerate().all(|(i, &w)| i as u32 == w)
    }

    fn name(&self) -> proc_macro2::Ident {
        ident(&names::upper_camel(&self.msg.name))
    }

    /// `Outer.Inner`, for decode error paths.
    /// How a getter's doc names its field: `` `name` (field N[, oneof `o`]) ``, on the
    /// object and on the view alike.
    fn field_label(&self, d: &FieldDef) -> String {
        let mut label = format!(" `{}` (field {}", d.name, d.number);
        if let Some(o) = d.oneof {
            label.push_str(&format!(", oneof `{}`", self.msg.oneofs[o].name));
        }
        label.push(')');
        label
    }

    fn proto_path(&self) -> String {
        let mut p = self.msg.parents.join(".");
        if !p.is_empty() {
            p.push('.');
        }
        p.push_str(&self.msg.name);
        p
    }

    fn msg_type(&self, id: MsgId) -> TokenStream {
        let p = message_path(self.schema, &self.module, id);
        quote!(#p<'a>)
    }

    fn scalar_type(k: ScalarKind) -> TokenStream {
        let t = ident(k.rust_type());
        quote!(#t)
    }

    /// The type of the storage field.
    fn store_type(&self, f: &FieldDef) -> TokenStream {
        let elem = match f.kind {
            FieldKind::Scalar(k) => Self::scalar_type(k),
            FieldKind::Enum(_) => quote!(i32),
            FieldKind::String => quote!(cf::CFString<'a>),
            FieldKind::Bytes => quote!(cf::CFBytes<'a>),
            FieldKind::Message(id) => self.msg_type(id),
        };
        match (f.repeated, f.kind) {
            (false, FieldKind::Message(_)) => {
                quote!(::core::option::Option<cf::bumpalo::boxed::Box<'a, #elem>>)
            }
            (false, _) => elem,
            (true, FieldKind::Scalar(_) | FieldKind::Enum(_)) => quote!(cf::PackedList<'a, #elem>),
            (true, FieldKind::String | FieldKind::Bytes) => quote!(cf::LeafList<'a, #elem>),
            (true, FieldKind::Message(_)) => quote!(cf::MessageList<'a, #elem>),
        }
    }

    /// The value of an absent field (`arena` names the arena in scope).
    fn empty_value(&self, f: &FieldDef, arena: &TokenStream) -> TokenStream {
        if f.repeated {
            return match f.kind {
                FieldKind::Scalar(_) | FieldKind::Enum(_) => {
                    quote!(cf::PackedList::with_capacity_in(0, #arena))
                }
                FieldKind::String | FieldKind::Bytes => {
                    quote!(cf::LeafList::with_capacity_in(0, #arena))
                }
                FieldKind::Message(_) => quote!(cf::MessageList::with_capacity_in(0, #arena)),
            };
        }
        match (&f.kind, &f.default) {
            (FieldKind::Message(_), _) => quote!(::core::option::Option::None),
            (FieldKind::Bytes, Some(DefaultValue::Bytes(b))) if !b.is_empty() => {
                let lit = Literal::byte_string(b);
                quote!(cf::CFBytes(cf::CFPtr::borrowed(#lit)))
            }
            (FieldKind::Bytes, _) => quote!(cf::CFBytes::default()),
            (FieldKind::String, Some(DefaultValue::String(s))) if !s.is_empty() => {
                let lit = Literal::byte_string(s.as_bytes());
                quote!(cf::CFString::from_ptr_unchecked_utf8(cf::CFPtr::borrowed(#lit)))
            }
            (FieldKind::String, _) => quote!(cf::CFString::default()),
            (FieldKind::Enum(e), d) => {
                let n = match d {
                    Some(DefaultValue::Enum(n)) => *n,
                    _ => self.schema.enums[*e].values.first().map_or(0, |v| v.number),
                };
                int_lit(n as i64)
            }
            (FieldKind::Scalar(k), d) => scalar_default(*k, d.as_ref()),
        }
    }

    pub fn generate(&self) -> TokenStream {
        let name = self.name();
        let doc = if self.msg.doc.is_empty() {
            let d = format!(" Message `{}`.", self.msg.full_name);
            quote!(#[doc = #d])
        } else {
            doc_attrs(&self.msg.doc)
        };
        let k = lit(self.words.len());
        let mut storage = Vec::new();
        let mut init = Vec::new();
        let arena_tok = quote!(arena);
        if self.needs_arena {
            storage.push(quote!(arena: &'a cf::Arena,));
            init.push(quote!(arena,));
        } else if !self.uses_lifetime {
            storage.push(quote!(_arena: ::core::marker::PhantomData<&'a cf::Arena>,));
            init.push(quote!(_arena: ::core::marker::PhantomData,));
        }
        storage.push(quote!(p: cf::wire::Presence<#k>,));
        init.push(quote!(p: cf::wire::Presence::default(),));
        for f in &self.fields {
            let s = &f.store;
            let t = self.store_type(f.def);
            storage.push(quote!(#s: #t,));
            let v = self.empty_value(f.def, &arena_tok);
            init.push(quote!(#s: #v,));
        }
        let arena_param = if self.needs_arena {
            quote!(arena)
        } else {
            quote!(_arena)
        };

        let mut known = vec![0u32; self.words.len()];
        for f in &self.fields {
            known[f.word] |= 1u32 << ((f.def.number - 1) % 32);
        }
        let known_t = word_array(&known);
        let words_const = if self.dense() {
            quote!()
        } else {
            let items = self.words.iter().map(|&w| Literal::u32_unsuffixed(w));
            let w = quote!([#(#items),*]);
            quote! {
                /// Wire bitmap word of each stored word (field numbers are sparse).
                const WORDS: [u32; #k] = #w;
            }
        };
        let header_len = if self.dense() {
            quote!(self.p.header_len())
        } else {
            quote!(cf::wire::header_len(
                cf::wire::sparse_used_words(&self.p.words, &Self::WORDS),
                self.p.slot_bytes(),
            ))
        };

        let accessors = self.fields.iter().map(|f| self.accessors(f));
        let oneof_fns = self.oneof_fns();
        let sizes = self.sizes_fn();
        let emit = self.emit_fn();
        let zc = self.zero_copy_fn();
        let decode = self.decode_fn();
        let decode_fields = self.decode_fields_fn();
        let debug = self.debug_fn();
        let extras = self.extras();
        let view = self.view();
        let new_doc = format!(" An empty `{}` (no field present).", self.msg.name);

        quote! {
            #doc
            #[allow(dead_code, non_camel_case_types)]
            pub struct #name<'a> {
                #(#storage)*
            }

            #[allow(dead_code)]
            impl<'a> #name<'a> {
                const KNOWN: [u32; #k] = #known_t;
                #words_const

                #[doc = #new_doc]
                #[inline]
                pub fn new_in(#arena_param: &'a cf::Arena) -> Self {
                    #name { #(#init)* }
                }

                #(#accessors)*
                #oneof_fns

                /// Bytes of this object's own header: `W`, the bitmap and the slots.
                #[inline]
                fn own_header_len(&self) -> usize {
                    #header_len
                }

                #decode_fields

                /// Decodes from plain bytes; string and bytes values borrow `buf`.
                #[inline]
                pub fn deserialize(buf: &'a [u8], arena: &'a cf::Arena) -> ::core::result::Result<Self, cf::DecodeError> {
                    <Self as cf::DecodeObj<'a>>::deserialize_bytes(buf, arena)
                }

                /// Decodes from a received packet: values at least the arena's threshold long
                /// reference `pkt` (zero-copy), shorter ones borrow it.
                #[inline]
                pub fn deserialize_rcbuf(pkt: &'a cf::RcBuf, arena: &'a cf::Arena) -> ::core::result::Result<Self, cf::DecodeError> {
                    <Self as cf::DecodeObj<'a>>::deserialize_rcbuf(pkt, arena)
                }
            }

            impl cf::CornflakesObj for #name<'_> {
                #sizes
                #emit
                #zc
            }

            impl cf::datapath::SendObject for #name<'_> {
                cf::send_object_methods!();
            }

            impl<'a> cf::DecodeObj<'a> for #name<'a> {
                #decode
            }

            impl ::core::fmt::Debug for #name<'_> {
                #debug
            }

            #extras
            #view
        }
    }

    fn has(&self, f: &Field<'_>) -> TokenStream {
        let has = format_ident!("has_{}", f.base);
        quote!(self.#has())
    }

    fn set_bit(f: &Field<'_>) -> TokenStream {
        Self::set_bit_on(quote!(self), f)
    }

    fn set_bit_on(recv: TokenStream, f: &Field<'_>) -> TokenStream {
        let (n, sz) = (
            Literal::u32_unsuffixed(f.bit_number),
            Literal::u32_unsuffixed(f.slot as u32),
        );
        quote!(#recv.p.set(#n, #sz);)
    }

    fn clear_bit(f: &Field<'_>) -> TokenStream {
        let (n, sz) = (
            Literal::u32_unsuffixed(f.bit_number),
            Literal::u32_unsuffixed(f.slot as u32),
        );
        quote!(self.p.clear(#n, #sz);)
    }

    /// Statements clearing the other members of `f`'s oneof.
    fn clear_siblings(&self, f: &Field<'_>) -> TokenStream {
        self.clear_siblings_on(quote!(self), f)
    }

    /// [`clear_siblings`](Self::clear_siblings) on the object `recv`.
    fn clear_siblings_on(&self, recv: TokenStream, f: &Field<'_>) -> TokenStream {
        let Some(o) = f.def.oneof else {
            return quote!();
        };
        let calls = self.msg.oneofs[o]
            .fields
            .iter()
            .filter(|&&i| self.msg.fields[i].number != f.def.number)
            .map(|&i| {
                let c = format_ident!("clear_{}", self.fields[i].base);
                quote!(#recv.#c();)
            });
        quote!(#(#calls)*)
    }

    fn accessors(&self, f: &Field<'_>) -> TokenStream {
        let body = self.accessors_without_clear(f);
        let clear = self.clear_fn(f);
        quote!(#body #clear)
    }

    fn clear_fn(&self, f: &Field<'_>) -> TokenStream {
        let s = &f.store;
        let clear = format_ident!("clear_{}", f.base);
        let empty = self.empty_value(f.def, &quote!(self.arena));
        let clear_bit = Self::clear_bit(f);
        let clear_doc = format!(" Clears `{}` (makes it absent).", f.def.name);
        quote! {
            #[doc = #clear_doc]
            pub fn #clear(&mut self) {
                self.#s = #empty;
                #clear_bit
            }
        }
    }

    fn accessors_without_clear(&self, f: &Field<'_>) -> TokenStream {
        let d = f.def;
        let s = &f.store;
        let b = &f.base;
        let has = format_ident!("has_{b}");
        let get = format_ident!("get_{b}");
        let set = format_ident!("set_{b}");
        let (w, m) = (lit(f.word), &f.mask);
        let set_bit = Self::set_bit(f);
        let siblings = self.clear_siblings(f);
        let get_doc = self.field_label(d);
        let proto_doc = doc_attrs(&d.doc);
        let has_doc = if d.repeated {
            format!(
                " Whether `{}` is present (initialised, possibly empty).",
                d.name
            )
        } else {
            format!(" Whether `{}` is set.", d.name)
        };
        let common = quote! {
            #[doc = #has_doc]
            #[inline]
            pub fn #has(&self) -> bool {
                self.p.words[#w] & #m != 0
            }
        };

        if d.repeated {
            let init = format_ident!("init_{b}");
            let get_mut = format_ident!("get_mut_{b}");
            let t = self.store_type(d);
            let cap_ctor = match d.kind {
                FieldKind::Scalar(_) | FieldKind::Enum(_) => quote!(cf::PackedList),
                FieldKind::String | FieldKind::Bytes => quote!(cf::LeafList),
                FieldKind::Message(_) => quote!(cf::MessageList),
            };
            // A string/bytes list is emptied in place (the usual case: the fresh list of
            // `new_in`, no allocation to replace, nothing to drop).
            let init_body = match d.kind {
                FieldKind::String | FieldKind::Bytes => {
                    quote!(self.#s.reset_with_capacity(cap);)
                }
                _ => quote!(self.#s = #cap_ctor::with_capacity_in(cap, self.arena);),
            };
            let enum_note = if let FieldKind::Enum(e) = d.kind {
                format!(
                    " Elements are raw `{}` numbers (unknown numbers are kept).",
                    self.schema.enums[e].name
                )
            } else {
                String::new()
            };
            let get_doc = format!("{get_doc}; empty when absent.{enum_note}");
            let init_doc = format!(
                " Makes `{}` present and empty, with room for `cap` elements.",
                d.name
            );
            let mut_doc = format!(
                " `{}`, mutably; makes the field present (empty) when absent, so what is appended is always sent.",
                d.name
            );
            return quote! {
                #common
                #[doc = #get_doc]
                #proto_doc
                #[inline]
                pub fn #get(&self) -> &#t {
                    &self.#s
                }
                #[doc = #init_doc]
                #[inline]
                pub fn #init(&mut self, cap: usize) {
                    #init_body
                    #set_bit
                }
                #[doc = #mut_doc]
                #[inline]
                pub fn #get_mut(&mut self) -> &mut #t {
                    #set_bit
                    &mut self.#s
                }
            };
        }
        match d.kind {
            FieldKind::Scalar(k) => {
                let t = Self::scalar_type(k);
                let get_doc = format!("{get_doc}, or its default when absent.");
                let set_doc = format!(" Sets `{}`.", d.name);
                quote! {
                    #common
                    #[doc = #get_doc]
                    #proto_doc
                    #[inline]
                    pub fn #get(&self) -> #t {
                        self.#s
                    }
                    #[doc = #set_doc]
                    #[inline]
                    pub fn #set(&mut self, v: #t) {
                        #siblings
                        self.#s = v;
                        #set_bit
                    }
                }
            }
            FieldKind::Enum(e) => {
                let et = enum_path(self.schema, &self.module, e);
                let get_raw = format_ident!("get_{b}_raw");
                let set_raw = format_ident!("set_{b}_raw");
                let get_doc = format!(
                    "{get_doc}, or its default when absent; `Err(n)` for a number `{}` does not know.",
                    self.schema.enums[e].name
                );
                let raw_doc = format!(" `{}` as its raw number.", d.name);
                let set_doc = format!(" Sets `{}`.", d.name);
                let set_raw_doc = format!(" Sets `{}` to any number, known or not.", d.name);
                quote! {
                    #common
                    #[doc = #get_doc]
                    #proto_doc
                    #[inline]
                    pub fn #get(&self) -> ::core::result::Result<#et, i32> {
                        #et::try_from(self.#s)
                    }
                    #[doc = #raw_doc]
                    #[inline]
                    pub fn #get_raw(&self) -> i32 {
                        self.#s
                    }
                    #[doc = #set_doc]
                    #[inline]
                    pub fn #set(&mut self, v: #et) {
                        self.#set_raw(v as i32);
                    }
                    #[doc = #set_raw_doc]
                    pub fn #set_raw(&mut self, v: i32) {
                        #siblings
                        self.#s = v;
                        #set_bit
                    }
                }
            }
            FieldKind::String | FieldKind::Bytes => {
                let t = if d.kind == FieldKind::String {
                    quote!(cf::CFString<'a>)
                } else {
                    quote!(cf::CFBytes<'a>)
                };
                let get_doc = format!("{get_doc}; empty (or its default) when absent.");
                let set_doc = format!(
                    " Sets `{}`; build the value with `{}::new(data, arena)` so the copy or zero-copy choice is made now.",
                    d.name,
                    if d.kind == FieldKind::String { "CFString" } else { "CFBytes" }
                );
                quote! {
                    #common
                    #[doc = #get_doc]
                    #proto_doc
                    #[inline]
                    pub fn #get(&self) -> &#t {
                        &self.#s
                    }
                    #[doc = #set_doc]
                    #[inline]
                    pub fn #set(&mut self, v: #t) {
                        #siblings
                        self.#s = v;
                        #set_bit
                    }
                }
            }
            FieldKind::Message(id) => {
                let t = self.msg_type(id);
                let path = message_path(self.schema, &self.module, id);
                let get_mut = format_ident!("get_mut_{b}");
                let get_doc = format!("{get_doc}, if set.");
                let mut_doc = format!(
                    " `{}`, mutably; set to an empty message first when absent.",
                    d.name
                );
                let set_doc = format!(" Sets `{}`.", d.name);
                quote! {
                    #common
                    #[doc = #get_doc]
                    #proto_doc
                    #[inline]
                    pub fn #get(&self) -> ::core::option::Option<&#t> {
                        self.#s.as_deref()
                    }
                    #[doc = #mut_doc]
                    pub fn #get_mut(&mut self) -> &mut #t {
                        if !self.#has() {
                            #siblings
                            #set_bit
                        }
                        let arena = self.arena;
                        self.#s.get_or_insert_with(|| {
                            cf::bumpalo::boxed::Box::new_in(#path::new_in(arena), arena.bump())
                        })
                    }
                    #[doc = #set_doc]
                    #[inline]
                    pub fn #set(&mut self, v: #t) {
                        #siblings
                        self.#s = ::core::option::Option::Some(cf::bumpalo::boxed::Box::new_in(v, self.arena.bump()));
                        #set_bit
                    }
                }
            }
        }
    }

    fn oneof_fns(&self) -> TokenStream {
        let fns = self.msg.oneofs.iter().enumerate().map(|(oi, o)| {
            let which = format_ident!("which_{}", snake(&o.name));
            let case = names::oneof_case_name(self.schema, self.id, oi);
            let mut module = self.module.clone();
            module.push(names::module_name(&self.msg.name));
            let case_path = names::relative_path(&self.module, &module, &case);
            let arms = o.fields.iter().map(|&i| {
                let has = format_ident!("has_{}", self.fields[i].base);
                let v = ident(&names::upper_camel(&self.msg.fields[i].name));
                quote!(if self.#has() { return ::core::option::Option::Some(#case_path::#v); })
            });
            let doc = format!(" Which member of oneof `{}` is set, if any.", o.name);
            let proto_doc = doc_attrs(&o.doc);
            quote! {
                #[doc = #doc]
                #proto_doc
                pub fn #which(&self) -> ::core::option::Option<#case_path> {
                    #(#arms)*
                    ::core::option::Option::None
                }
            }
        });
        quote!(#(#fns)*)
    }

    fn sizes_fn(&self) -> TokenStream {
        let mut parts = Vec::new();
        for f in &self.fields {
            let s = &f.store;
            let has = self.has(f);
            match (f.def.repeated, f.def.kind) {
                (true, _) => parts.push(quote!(if #has { s += self.#s.sizes(); })),
                (false, FieldKind::String | FieldKind::Bytes) => {
                    parts.push(quote!(if #has { s.add_leaf(self.#s.ptr()); }))
                }
                (false, FieldKind::Message(_)) => parts.push(
                    quote!(if let ::core::option::Option::Some(m) = &self.#s { s += m.sizes(); }),
                ),
                _ => {}
            }
        }
        let own = quote!(cf::Sizes {
            header: self.own_header_len(),
            ..cf::Sizes::default()
        });
        let body = if parts.is_empty() {
            own
        } else {
            quote! {
                let mut s = #own;
                #(#parts)*
                s
            }
        };
        quote! {
            #[inline]
            fn sizes(&self) -> cf::Sizes {
                #body
            }
        }
    }

    fn emit_fn(&self) -> TokenStream {
        let bitmap = if self.dense() {
            quote!(enc.presence(pos, &self.p))
        } else {
            quote!(enc.sparse_bitmap(pos, &self.p.words, &Self::WORDS))
        };
        let n = self.fields.len();
        let last_placed = self.last_placed();
        let mut stmts = Vec::new();
        let mut has_sub = false;
        let mut uses_sink = false;
        // The nested objects of the last field placing a value are written after the header,
        // by one statement both paths share (only scalar slots follow it, which move no cursor).
        let mut shared = None;
        for (i, f) in self.fields.iter().enumerate() {
            let s = &f.store;
            let has = self.has(f);
            let step = if i + 1 == n {
                quote!()
            } else {
                let sz = lit(f.slot);
                quote!(slot += #sz;)
            };
            let body = match (f.def.repeated, f.def.kind) {
                (true, FieldKind::Scalar(_) | FieldKind::Enum(_)) => {
                    quote!(enc.packed(slot, &self.#s);)
                }
                (true, _) => {
                    has_sub = true;
                    uses_sink = true;
                    if Some(i) == last_placed {
                        shared = Some(quote! {
                            if #has {
                                sub = self.#s.emit_with(enc, sub, sink);
                            }
                        });
                        quote!(enc.put_pair(slot, self.#s.len(), sub);)
                    } else {
                        quote! {
                            enc.put_pair(slot, self.#s.len(), sub);
                            sub = self.#s.emit_with(enc, sub, sink);
                        }
                    }
                }
                (false, FieldKind::String | FieldKind::Bytes) => {
                    uses_sink = true;
                    quote!(enc.leaf_with(slot, self.#s.ptr(), sink);)
                }
                (false, FieldKind::Message(_)) => {
                    has_sub = true;
                    uses_sink = true;
                    if Some(i) == last_placed {
                        shared = Some(quote! {
                            if let ::core::option::Option::Some(m) = &self.#s {
                                sub = m.emit_with(enc, sub, sink);
                            }
                        });
                        stmts.push(quote! {
                            if self.#s.is_some() {
                                enc.put_pair(slot, 0, sub);
                                #step
                            }
                        });
                    } else {
                        stmts.push(quote! {
                            if let ::core::option::Option::Some(m) = &self.#s {
                                enc.put_pair(slot, 0, sub);
                                sub = m.emit_with(enc, sub, sink);
                                #step
                            }
                        });
                    }
                    continue;
                }
                (false, _) => quote!(enc.put(slot, self.#s);),
            };
            stmts.push(quote! {
                if #has {
                    #body
                    #step
                }
            });
        }
        let head = match n {
            0 => quote!(#bitmap;),
            1 => quote!(let slot = #bitmap;),
            _ => quote!(let mut slot = #bitmap;),
        };
        let sink = if uses_sink {
            quote!(sink)
        } else {
            quote!(_sink)
        };
        let body = match (self.emit_full(), has_sub) {
            (Some((cond, full)), true) => quote! {
                let mut sub;
                if #cond {
                    #full
                } else {
                    #head
                    sub = pos + self.own_header_len();
                    #(#stmts)*
                }
                #shared
                sub
            },
            (Some((cond, full)), false) => quote! {
                if #cond {
                    #full
                } else {
                    #head
                    #(#stmts)*
                    pos + self.own_header_len()
                }
            },
            (None, true) => quote! {
                #head
                let mut sub = pos + self.own_header_len();
                #(#stmts)*
                #shared
                sub
            },
            (None, false) => quote! {
                #head
                #(#stmts)*
                pos + self.own_header_len()
            },
        };
        quote! {
            #[inline]
            fn emit(&self, enc: &mut cf::wire::Encoder<'_>, pos: usize) -> usize {
                self.emit_with(enc, pos, &mut |_| {})
            }

            #[inline]
            fn emit_with<S: FnMut(cf::PinnedRef<'_>)>(
                &self,
                enc: &mut cf::wire::Encoder<'_>,
                pos: usize,
                #sink: &mut S,
            ) -> usize {
                #body
            }
        }
    }

    /// Index of the last field whose slot depends on the encoder's cursors (a string or bytes
    /// value, a repeated field); only scalar slots follow it.
    fn last_placed(&self) -> Option<usize> {
        self.fields.iter().rposition(|f| {
            f.def.repeated
                || matches!(
                    f.def.kind,
                    FieldKind::String | FieldKind::Bytes | FieldKind::Message(_)
                )
        })
    }

    /// `emit_with`'s path for an object with every field present, in a message where that
    /// fixes the own header's length (one bitmap word, no oneof, no singular message field,
    /// at most [`FULL_HEADER_FIELDS`] fields): the condition, and the statements that write
    /// the header through one bounds check (`Encoder::header_bytes`), each word at a constant
    /// offset, after the values whose slots depend on the cursors (copied and zero-copy
    /// leaves, packed arrays, nested objects) were placed in field order — the same bytes the
    /// general path writes. With nested objects the statements set `sub` (the last field's
    /// objects are written after them by the statement both paths share); without, they end
    /// in the object's end. `None` when the message has no such path.
    fn emit_full(&self) -> Option<(TokenStream, TokenStream)> {
        let eligible = self.dense()
            && self.words.len() == 1
            && self.msg.oneofs.is_empty()
            && !self.fields.is_empty()
            && self.fields.len() <= FULL_HEADER_FIELDS
            && self.fields.iter().all(|f| f.def.oneof.is_none());
        if !eligible {
            return None;
        }
        let mask = self
            .fields
            .iter()
            .fold(0u32, |m, f| m | 1 << ((f.def.number - 1) % 32));
        let len: usize = 8 + self.fields.iter().map(|f| f.slot).sum::<usize>();
        let last_placed = self.last_placed();
        let mut pre = Vec::new();
        let mut writes = Vec::new();
        let mut has_sub = false;
        let mut msgs = Vec::new();
        let mut at = 8;
        for (i, f) in self.fields.iter().enumerate() {
            let s = &f.store;
            let (a, b) = (lit(at), lit(at + f.slot));
            let (l, o) = (format_ident!("cf_len{}", i), format_ident!("cf_off{}", i));
            match (f.def.repeated, f.def.kind) {
                (true, FieldKind::Scalar(_) | FieldKind::Enum(_)) => {
                    pre.push(quote!(let (#l, #o) = enc.packed_value(&self.#s);));
                    writes.push(quote!(cf::wire::write_pair(&mut h[#a..#b], #l, #o);));
                }
                (true, _) => {
                    has_sub = true;
                    pre.push(quote!(let (#l, #o) = (self.#s.len(), sub);));
                    writes.push(quote!(cf::wire::write_pair(&mut h[#a..#b], #l, #o);));
                    if Some(i) != last_placed {
                        pre.push(quote!(sub = self.#s.emit_with(enc, sub, sink);));
                    }
                }
                (false, FieldKind::Message(_)) => {
                    has_sub = true;
                    msgs.push(quote!(self.#s.is_some()));
                    pre.push(quote!(let (#l, #o) = (0, sub);));
                    writes.push(quote!(cf::wire::write_pair(&mut h[#a..#b], #l, #o);));
                    if Some(i) != last_placed {
                        pre.push(quote! {
                            if let ::core::option::Option::Some(m) = &self.#s {
                                sub = m.emit_with(enc, sub, sink);
                            }
                        });
                    }
                }
                (false, FieldKind::String | FieldKind::Bytes) => {
                    pre.push(quote!(let (#l, #o) = enc.leaf_value(self.#s.ptr(), sink);));
                    writes.push(quote!(cf::wire::write_pair(&mut h[#a..#b], #l, #o);));
                }
                _ => writes.push(quote!(cf::wire::Scalar::write_le(self.#s, &mut h[#a..#b]);)),
            }
            at += f.slot;
        }
        let word: Literal = format!("{mask:#x}_u32")
            .parse()
            .unwrap_or_else(|_| Literal::u32_suffixed(mask));
        let (lenl, mask) = (lit(len), hex(mask));
        let (sub_init, tail) = if has_sub {
            (quote!(sub = pos + #lenl;), quote!())
        } else {
            (quote!(), quote!(pos + #lenl))
        };
        Some((
            quote!(self.p.words[0] == #mask #(&& #msgs)*),
            quote! {
                #sub_init
                #(#pre)*
                let h = enc.header_bytes::<#lenl>(pos);
                h[..4].copy_from_slice(&1u32.to_le_bytes());
                h[4..8].copy_from_slice(&#word.to_le_bytes());
                #(#writes)*
                #tail
            },
        ))
    }

    fn zero_copy_fn(&self) -> TokenStream {
        let mut stmts = Vec::new();
        for f in &self.fields {
            let s = &f.store;
            let has = self.has(f);
            match (f.def.repeated, f.def.kind) {
                (true, FieldKind::String | FieldKind::Bytes | FieldKind::Message(_)) => {
                    stmts.push(quote!(if #has { self.#s.for_each_zero_copy(demote, f); }))
                }
                (false, FieldKind::String | FieldKind::Bytes) => stmts.push(quote! {
                    if #has {
                        if let ::core::option::Option::Some(b) = self.#s.ptr().as_pinned() {
                            if demote.keep_zero_copy(b.len()) {
                                f(b);
                            }
                        }
                    }
                }),
                (false, FieldKind::Message(_)) => stmts.push(quote! {
                    if let ::core::option::Option::Some(m) = &self.#s {
                        m.for_each_zero_copy(demote, f);
                    }
                }),
                _ => {}
            }
        }
        if stmts.is_empty() {
            quote! {
                #[inline]
                fn for_each_zero_copy<F: FnMut(cf::PinnedRef<'_>)>(&self, _demote: &mut cf::wire::Demote, _f: &mut F) {}
            }
        } else {
            quote! {
                #[inline]
                fn for_each_zero_copy<F: FnMut(cf::PinnedRef<'_>)>(&self, demote: &mut cf::wire::Demote, f: &mut F) {
                    #(#stmts)*
                }
            }
        }
    }

    fn decode_fn(&self) -> TokenStream {
        let name = self.name();
        let path = self.proto_path();
        let max = Literal::u32_unsuffixed(self.msg.max_field());
        let check = if self.dense() {
            quote!(h.check_fields(&Self::KNOWN, #max))
        } else {
            quote!(h.check_fields_sparse(&Self::KNOWN, &Self::WORDS, #max))
        };
        if self.fields.is_empty() {
            return quote! {
                #[inline]
                fn decode_from(h: cf::wire::HeaderReader<'_, 'a>, arena: &'a cf::Arena) -> ::core::result::Result<Self, cf::DecodeError> {
                    #check.map_err(|e| e.within(#path))?;
                    ::core::result::Result::Ok(#name::new_in(arena))
                }
            };
        }
        // The fields are read by `cf_decode_fields`; its error is returned after the object is
        // dropped: a `?` in `decode_from` itself would write the error into
        // the returned place while the object is live, which keeps LLVM from building the
        // object in that place (it would be copied there whole at the end).
        // (`drop` of an object without drop glue is still what orders the error's write after
        // the object's death, hence the allowed lint.)
        // A message whose decode, with every nested message's decode inline, reads at most
        // `INLINE_NESTED` nested objects is decoded inline wherever it is: its objects are
        // then built where the caller keeps them and the decoder's state stays in registers.
        // Larger (or recursive) messages are left to LLVM, and read a singular message field
        // whose message is forced inline but not a leaf through an out-of-line call
        // (`decode_reads`), which bounds the size of any one function.
        let inline = if self.inlines_nested() {
            quote!(#[inline(always)])
        } else {
            quote!(#[inline])
        };
        quote! {
            #inline
            #[allow(clippy::drop_non_drop)]
            fn decode_from(mut h: cf::wire::HeaderReader<'_, 'a>, arena: &'a cf::Arena) -> ::core::result::Result<Self, cf::DecodeError> {
                #check.map_err(|e| e.within(#path))?;
                let mut m = #name::new_in(arena);
                match Self::cf_decode_fields(&mut m, &mut h, arena) {
                    ::core::result::Result::Ok(()) => ::core::result::Result::Ok(m),
                    ::core::result::Result::Err(e) => {
                        ::core::mem::drop(m);
                        ::core::result::Result::Err(e)
                    }
                }
            }

        }
    }

    /// Whether this message's decode is forced inline with its nested messages' (see
    /// [`INLINE_NESTED`]).
    fn inlines_nested(&self) -> bool {
        nested_weight(self.schema, self.id, INLINE_NESTED, &mut Vec::new()).is_some()
    }

    /// One read per field, in field order, into `m` from `h`.
    fn decode_reads(&self) -> Vec<TokenStream> {
        let path = self.proto_path();
        self.fields
            .iter()
            .map(|f| {
                let n = Literal::u32_unsuffixed(f.def.number);
                let s = &f.store;
                let b = &f.base;
                let set = format_ident!("set_{b}");
                let label = format!("{path}.{}", f.def.name);
                let within = quote!(.map_err(|e| e.within(#label))?);
                let body = match (f.def.repeated, f.def.kind) {
                    (true, FieldKind::Scalar(k)) => {
                        let t = Self::scalar_type(k);
                        let set_bit = Self::set_bit_on(quote!(m), f);
                        quote! {
                            let (bytes, n) = h.packed::<#t>()#within;
                            m.#s = cf::PackedList::from_le_bytes(bytes, n, arena);
                            #set_bit
                        }
                    }
                    (true, FieldKind::Enum(_)) => {
                        let set_bit = Self::set_bit_on(quote!(m), f);
                        quote! {
                            let (bytes, n) = h.packed::<i32>()#within;
                            m.#s = cf::PackedList::from_le_bytes(bytes, n, arena);
                            #set_bit
                        }
                    }
                    (true, FieldKind::String | FieldKind::Bytes) => {
                        let init = format_ident!("init_{b}");
                        let wrap = if f.def.kind == FieldKind::String {
                            quote!(cf::CFString::from_ptr_unchecked_utf8)
                        } else {
                            quote!(cf::CFBytes)
                        };
                        quote! {
                            let mut it = h.leaf_list()#within;
                            m.#init(it.len());
                            while let ::core::option::Option::Some(v) = it.next_leaf() {
                                m.#s.append(#wrap(v #within));
                            }
                        }
                    }
                    (true, FieldKind::Message(id)) => {
                        let init = format_ident!("init_{b}");
                        let p = message_path(self.schema, &self.module, id);
                        quote! {
                            let mut it = h.message_list()#within;
                            m.#init(it.len());
                            while let ::core::option::Option::Some(sub) = it.next_header() {
                                let sub = sub #within;
                                m.#s.append(<#p as cf::DecodeObj>::decode_from(sub, arena)#within);
                            }
                        }
                    }
                    (false, FieldKind::Scalar(_)) => quote!(m.#set(h.scalar()#within);),
                    (false, FieldKind::Enum(_)) => {
                        let set_raw = format_ident!("set_{b}_raw");
                        quote!(m.#set_raw(h.scalar()#within);)
                    }
                    (false, FieldKind::String) => quote! {
                        m.#set(cf::CFString::from_ptr_unchecked_utf8(h.leaf()#within));
                    },
                    (false, FieldKind::Bytes) => quote!(m.#set(cf::CFBytes(h.leaf()#within));),
                    (false, FieldKind::Message(id)) => {
                        // What `set_*` does, with the box made by `DecodeObj::decode_boxed`.
                        let p = message_path(self.schema, &self.module, id);
                        let siblings = self.clear_siblings_on(quote!(m), f);
                        let set_bit = Self::set_bit_on(quote!(m), f);
                        // A nested message forced inline that has nested messages of its own
                        // is read out of line by a message not forced inline: the size of
                        // one function stays bounded (a leaf message stays inline).
                        let child = nested_weight(self.schema, id, INLINE_NESTED, &mut Vec::new());
                        let boxed = if !self.inlines_nested() && child.is_some_and(|w| w > 0) {
                            quote!(decode_boxed_out_of_line)
                        } else {
                            quote!(decode_boxed)
                        };
                        quote! {
                            let sub = h.nested()#within;
                            let b = <#p as cf::DecodeObj>::#boxed(sub, arena)#within;
                            #siblings
                            m.#s = ::core::option::Option::Some(b);
                            #set_bit
                        }
                    }
                };
                quote! {
                    if h.has(#n) {
                        #body
                    }
                }
            })
            .collect()
    }

    /// The fields' reads of `decode_from`, an associated function of the message (nothing
    /// for a message without fields).
    fn decode_fields_fn(&self) -> TokenStream {
        if self.fields.is_empty() {
            return quote!();
        }
        let reads = self.decode_reads();
        quote! {
            /// Reads the fields present in `h` into `m`, a new object (`DecodeObj::decode_from`,
            /// after the fields were checked).
            #[inline(always)]
            #[allow(unused_variables)]
            fn cf_decode_fields(m: &mut Self, h: &mut cf::wire::HeaderReader<'_, 'a>, arena: &'a cf::Arena) -> ::core::result::Result<(), cf::DecodeError> {
                #(#reads)*
                ::core::result::Result::Ok(())
            }
        }
    }

    fn debug_fn(&self) -> TokenStream {
        let name_str = self.msg.name.as_str();
        if self.fields.is_empty() {
            return quote! {
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    f.debug_struct(#name_str).finish()
                }
            };
        }
        let parts = self.fields.iter().map(|f| {
            let s = &f.store;
            let n = f.def.name.as_str();
            let has = self.has(f);
            match (f.def.repeated, f.def.kind) {
                (false, FieldKind::Message(_)) => quote! {
                    if let ::core::option::Option::Some(m) = &self.#s {
                        d.field(#n, &**m);
                    }
                },
                (false, FieldKind::Enum(_)) => {
                    let get = format_ident!("get_{}", f.base);
                    quote!(if #has { d.field(#n, &self.#get()); })
                }
                _ => quote!(if #has { d.field(#n, &self.#s); }),
            }
        });
        quote! {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                let mut d = f.debug_struct(#name_str);
                #(#parts)*
                d.finish()
            }
        }
    }
}

pub(crate) fn int_lit(v: i64) -> TokenStream {
    let abs = Literal::u64_unsuffixed(v.unsigned_abs());
    if v < 0 {
        quote!(-#abs)
    } else {
        quote!(#abs)
    }
}

fn scalar_default(k: ScalarKind, d: Option<&DefaultValue>) -> TokenStream {
    match (k, d) {
        (ScalarKind::Bool, Some(DefaultValue::Bool(true))) => quote!(true),
        (ScalarKind::Bool, _) => quote!(false),
        (ScalarKind::Float | ScalarKind::Double, d) => {
            let v = match d {
                Some(DefaultValue::Float(v)) => *v,
                Some(DefaultValue::Int(v)) => *v as f64,
                Some(DefaultValue::Uint(v)) => *v as f64,
                _ => 0.0,
            };
            let t = ident(k.rust_type());
            if v.is_nan() {
                quote!(#t::NAN)
            } else if v == f64::INFINITY {
                quote!(#t::INFINITY)
            } else if v == f64::NEG_INFINITY {
                quote!(#t::NEG_INFINITY)
            } else {
                let lit = if k == ScalarKind::Float {
                    Literal::f32_unsuffixed(v.abs() as f32)
                } else {
                    Literal::f64_unsuffixed(v.abs())
                };
                if v.is_sign_negative() {
                    quote!(-#lit)
                } else {
                    quote!(#lit)
                }
            }
        }
        (_, Some(DefaultValue::Int(v))) => int_lit(*v),
        (_, Some(DefaultValue::Uint(v))) => {
            let l = Literal::u64_unsuffixed(*v);
            quote!(#l)
        }
        _ => quote!(0),
    }
}
