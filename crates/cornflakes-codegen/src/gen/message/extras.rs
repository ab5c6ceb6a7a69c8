//! What makes a message pleasant beyond the wire (issue 28): `PartialEq` by field value, an
//! owned form that outlives the arena, oneofs read with one `match`, keyed map lookup and
//! replace-on-insert, and a builder. Separate items built from the accessors, so the hot
//! paths (build, `emit`, decode) are untouched.

use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use super::super::names::{self, camel_base, enum_path, ident, snake, upper_camel};
use super::MessageGen;
use crate::schema::{FieldKind, MsgId, Schema};

impl MessageGen<'_> {
    /// The items generated next to the struct.
    pub(super) fn extras(&self) -> TokenStream {
        let eq = self.partial_eq();
        let owned = self.owned_form();
        let oneofs = self.oneof_value_fns();
        let maps = self.map_fns();
        let builder = self.builder();
        let name = self.name();
        quote! {
            #eq
            #owned
            #builder
            #[allow(dead_code)]
            impl<'a> #name<'a> {
                #oneofs
                #maps
            }
        }
    }

    /// Equal when the same fields are present with equal values (strings and bytes by their
    /// bytes, lists element by element, nested messages recursively); whether a value is
    /// copied or zero-copy does not matter.
    fn partial_eq(&self) -> TokenStream {
        let name = self.name();
        let parts = self.fields.iter().map(|f| {
            let s = &f.store;
            match (f.def.repeated, f.def.kind) {
                (false, FieldKind::Message(_)) => {
                    quote!(&& self.#s.as_deref() == other.#s.as_deref())
                }
                _ => quote!(&& self.#s == other.#s),
            }
        });
        quote! {
            /// By field value: the same fields present, with equal values (strings and bytes by
            /// their bytes, whether copied or zero-copy).
            impl ::core::cmp::PartialEq for #name<'_> {
                fn eq(&self, other: &Self) -> bool {
                    self.p.words == other.p.words #(#parts)*
                }
            }
        }
    }

    /// Name of the owned form: `<Name>Owned`, or `<Name>OwnedForm` if a sibling type has
    /// that name.
    fn owned_name(&self) -> proc_macro2::Ident {
        let base = format!("{}Owned", camel_base(&self.msg.name));
        let siblings = self.sibling_type_names();
        if siblings.contains(&base) {
            ident(&format!("{base}Form"))
        } else {
            ident(&base)
        }
    }

    fn sibling_type_names(&self) -> Vec<String> {
        let s = self.schema;
        let same_scope = |pkg: &str, parents: &[String]| {
            pkg == self.msg.package && parents == self.msg.parents.as_slice()
        };
        s.messages
            .iter()
            .filter(|m| same_scope(&m.package, &m.parents))
            .map(|m| upper_camel(&m.name))
            .chain(
                s.enums
                    .iter()
                    .filter(|e| same_scope(&e.package, &e.parents))
                    .map(|e| upper_camel(&e.name)),
            )
            .collect()
    }

    /// `to_owned()` / `into_owned()` into a type that outlives the arena (the message's
    /// encoding in a `Vec`), `decode_in(&arena)` back (decoded zero-copy from it) and
    /// `view()` (read in place).
    fn owned_form(&self) -> TokenStream {
        let name = self.name();
        let owned = self.owned_name();
        let vname = format_ident!("{}", super::view::view_name(&self.msg.name));
        let doc = format!(
            " A `{n}` that outlives its arena: the message's encoding, owned. Made by \
             [`{n}::to_owned`] or [`{n}::into_owned`]; [`decode_in`](Self::decode_in) \
             decodes it back into an arena (values borrow these bytes, nothing is copied), \
             [`view`](Self::view) reads it in place, building nothing. Compares by field \
             value and prints as the message does.",
            n = upper_camel(&self.msg.name)
        );
        quote! {
            #[doc = #doc]
            #[derive(Clone)]
            #[allow(dead_code)]
            pub struct #owned {
                bytes: ::std::vec::Vec<u8>,
            }

            #[allow(dead_code)]
            impl #owned {
                /// The message, decoded from the owned bytes into `arena` (values borrow them).
                pub fn decode_in<'a>(&'a self, arena: &'a cf::Arena) -> ::core::result::Result<#name<'a>, cf::DecodeError> {
                    #name::deserialize(&self.bytes, arena)
                }

                /// The message read in place from the owned bytes, nothing built (as the
                /// message's `view` reads a received buffer).
                pub fn view(&self) -> ::core::result::Result<#vname<'_>, cf::DecodeError> {
                    #name::view(&self.bytes)
                }

                /// The encoding.
                pub fn as_bytes(&self) -> &[u8] {
                    &self.bytes
                }

                /// The encoding, as a vector.
                pub fn into_bytes(self) -> ::std::vec::Vec<u8> {
                    self.bytes
                }

                /// An owned message from its encoding (checked by decoding it once).
                pub fn from_bytes(bytes: ::std::vec::Vec<u8>) -> ::core::result::Result<Self, cf::DecodeError> {
                    let arena = cf::Arena::new();
                    #name::deserialize(&bytes, &arena)?;
                    ::core::result::Result::Ok(#owned { bytes })
                }
            }

            impl ::core::cmp::PartialEq for #owned {
                // The binding keeps the decoded messages from outliving the arena.
                #[allow(clippy::let_and_return)]
                fn eq(&self, other: &Self) -> bool {
                    let arena = cf::Arena::new();
                    let equal = match (self.decode_in(&arena), other.decode_in(&arena)) {
                        (::core::result::Result::Ok(a), ::core::result::Result::Ok(b)) => a == b,
                        _ => self.bytes == other.bytes,
                    };
                    equal
                }
            }

            impl ::core::fmt::Debug for #owned {
                #[allow(clippy::let_and_return)]
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    let arena = cf::Arena::new();
                    let r = match self.decode_in(&arena) {
                        ::core::result::Result::Ok(m) => ::core::fmt::Debug::fmt(&m, f),
                        ::core::result::Result::Err(e) => ::core::write!(f, "<{}>", e),
                    };
                    r
                }
            }

            #[allow(dead_code)]
            impl<'a> #name<'a> {
                /// A copy that outlives the arena (the encoding, owned); `view` gives it back.
                pub fn to_owned(&self) -> #owned {
                    #owned { bytes: <Self as cf::CornflakesObj>::serialize_to_vec(self) }
                }

                /// Into a form that outlives the arena; `view` gives it back.
                pub fn into_owned(self) -> #owned {
                    self.to_owned()
                }
            }
        }
    }

    /// Per oneof: `get_<oneof>()` returning the set member with its value, for one `match`.
    fn oneof_value_fns(&self) -> TokenStream {
        let fns = self.msg.oneofs.iter().enumerate().map(|(oi, o)| {
            let getter = self.oneof_getter(oi);
            let (vname, with_lt) = oneof_value_name(self.schema, self.id, oi);
            let mut module = self.module.clone();
            module.push(names::module_name(&self.msg.name));
            let vpath = names::relative_path(&self.module, &module, &vname);
            let ty = if with_lt {
                quote!(#vpath<'_, 'a>)
            } else {
                quote!(#vpath)
            };
            let arms = o.fields.iter().map(|&i| {
                let f = &self.fields[i];
                let has = format_ident!("has_{}", f.base);
                let get = format_ident!("get_{}", f.base);
                let v = ident(&upper_camel(&f.def.name));
                let val = match f.def.kind {
                    FieldKind::Message(_) => quote!(match self.#get() {
                        ::core::option::Option::Some(m) => m,
                        ::core::option::Option::None => return ::core::option::Option::None,
                    }),
                    _ => quote!(self.#get()),
                };
                quote!(if self.#has() { return ::core::option::Option::Some(#vpath::#v(#val)); })
            });
            let doc = format!(
                " The member of oneof `{}` that is set, with its value (`None` when none is): \
                 read it with one `match`.",
                o.name
            );
            quote! {
                #[doc = #doc]
                pub fn #getter(&self) -> ::core::option::Option<#ty> {
                    #(#arms)*
                    ::core::option::Option::None
                }
            }
        });
        quote!(#(#fns)*)
    }

    fn oneof_getter(&self, oi: usize) -> proc_macro2::Ident {
        let base = snake(&self.msg.oneofs[oi].name);
        let taken = self.fields.iter().any(|f| f.base == base);
        if taken {
            format_ident!("get_{}_oneof", base)
        } else {
            format_ident!("get_{}", base)
        }
    }

    /// Map fields: `find_<field>(key)` (the last entry with that key, protobuf's rule when a
    /// key repeats on the wire) and `insert_<field>(key, value)` (replaces the value of an
    /// existing key in place, else appends).
    fn map_fns(&self) -> TokenStream {
        let fns = self.fields.iter().filter_map(|f| {
            let FieldKind::Message(entry_id) = f.def.kind else {
                return None;
            };
            let entry = &self.schema.messages[entry_id];
            if !f.def.repeated || !entry.map_entry || entry.fields.len() != 2 {
                return None;
            }
            let (kf, vf) = (&entry.fields[0], &entry.fields[1]);
            let entry_t = self.msg_type(entry_id);
            let s = &f.store;
            let find = format_ident!("find_{}", f.base);
            let insert = format_ident!("insert_{}", f.base);
            let get_mut = format_ident!("get_mut_{}", f.base);
            let (key_t, key_eq, key_set) = match kf.kind {
                FieldKind::String => (
                    quote!(&str),
                    quote!(*e.get_key() == *key),
                    quote!(e.set_key(cf::CFString::new(key, self.arena))),
                ),
                FieldKind::Scalar(k) => {
                    let t = ident(k.rust_type());
                    (quote!(#t), quote!(e.get_key() == key), quote!(e.set_key(key)))
                }
                _ => return None,
            };
            let (val_t, val_set, val_doc) = match vf.kind {
                FieldKind::String => (
                    quote!(cf::CFString<'a>),
                    quote!(e.set_value(value)),
                    "a `CFString` built with `CFString::new(s, arena)`",
                ),
                FieldKind::Bytes => (
                    quote!(cf::CFBytes<'a>),
                    quote!(e.set_value(value)),
                    "a `CFBytes` built with `CFBytes::new(data, arena)` (zero-copy when pinned and long)",
                ),
                FieldKind::Scalar(k) => {
                    let t = ident(k.rust_type());
                    (quote!(#t), quote!(e.set_value(value)), "the value")
                }
                FieldKind::Enum(eid) => {
                    let t = enum_path(self.schema, &self.module, eid);
                    (quote!(#t), quote!(e.set_value(value)), "the value")
                }
                FieldKind::Message(mid) => {
                    let t = self.msg_type(mid);
                    (quote!(#t), quote!(e.set_value(value)), "the value")
                }
            };
            let find_doc = format!(
                " The entry of map `{}` whose key is `key`: the last one, as protobuf reads a \
                 key that repeats on the wire (decoding keeps every entry, zero-copy).",
                f.def.name
            );
            let insert_doc = format!(
                " Sets `{}[key]` to {val_doc}: replaces the value of an existing entry in place \
                 (the last one with that key), else appends an entry.",
                f.def.name
            );
            Some(quote! {
                #[doc = #find_doc]
                pub fn #find(&self, key: #key_t) -> ::core::option::Option<&#entry_t> {
                    self.#s.iter().rev().find(|e| #key_eq)
                }

                #[doc = #insert_doc]
                pub fn #insert(&mut self, key: #key_t, value: #val_t) {
                    let existing = self.#s.iter().rposition(|e| #key_eq);
                    match existing {
                        ::core::option::Option::Some(i) => {
                            let e = &mut self.#s[i];
                            #val_set;
                        }
                        ::core::option::Option::None => {
                            let mut e = <#entry_t>::new_in(self.arena);
                            #key_set;
                            #val_set;
                            self.#get_mut().append(e);
                        }
                    }
                }
            })
        });
        quote!(#(#fns)*)
    }

    /// `Name::builder(&arena).field(v)….build()`: one line per message, strings as `&str`
    /// and bytes as `&[u8]` (the builder applies the arena), built with the ordinary setters.
    fn builder(&self) -> TokenStream {
        let name = self.name();
        let builder = format_ident!("{}Builder", camel_base(&self.msg.name));
        let methods = self.fields.iter().map(|f| {
            let set = format_ident!("set_{}", f.base);
            let get_mut = format_ident!("get_mut_{}", f.base);
            let m = names::ident_avoiding(&f.base, &["build", "arena", "m"]);
            let doc = format!(" Sets `{}`.", f.def.name);
            let body = match (f.def.repeated, f.def.kind) {
                (false, FieldKind::String) => quote! {
                    pub fn #m(mut self, v: &str) -> Self {
                        self.m.#set(cf::CFString::new(v, self.arena));
                        self
                    }
                },
                (false, FieldKind::Bytes) => quote! {
                    pub fn #m(mut self, v: &[u8]) -> Self {
                        self.m.#set(cf::CFBytes::new(v, self.arena));
                        self
                    }
                },
                (false, FieldKind::Scalar(k)) => {
                    let t = ident(k.rust_type());
                    quote! {
                        pub fn #m(mut self, v: #t) -> Self {
                            self.m.#set(v);
                            self
                        }
                    }
                }
                (false, FieldKind::Enum(eid)) => {
                    let t = enum_path(self.schema, &self.module, eid);
                    quote! {
                        pub fn #m(mut self, v: #t) -> Self {
                            self.m.#set(v);
                            self
                        }
                    }
                }
                (false, FieldKind::Message(mid)) => {
                    let t = self.msg_type(mid);
                    quote! {
                        pub fn #m(mut self, v: #t) -> Self {
                            self.m.#set(v);
                            self
                        }
                    }
                }
                (true, FieldKind::String) => quote! {
                    pub fn #m<'v>(mut self, vs: impl ::core::iter::IntoIterator<Item = &'v str>) -> Self {
                        let l = self.m.#get_mut();
                        for v in vs {
                            l.append(cf::CFString::new(v, self.arena));
                        }
                        self
                    }
                },
                (true, FieldKind::Bytes) => quote! {
                    pub fn #m<'v>(mut self, vs: impl ::core::iter::IntoIterator<Item = &'v [u8]>) -> Self {
                        let l = self.m.#get_mut();
                        for v in vs {
                            l.append(cf::CFBytes::new(v, self.arena));
                        }
                        self
                    }
                },
                (true, FieldKind::Scalar(k)) => {
                    let t = ident(k.rust_type());
                    quote! {
                        pub fn #m(mut self, vs: impl ::core::iter::IntoIterator<Item = #t>) -> Self {
                            let l = self.m.#get_mut();
                            for v in vs {
                                l.append(v);
                            }
                            self
                        }
                    }
                }
                (true, FieldKind::Enum(_)) => quote! {
                    pub fn #m(mut self, vs: impl ::core::iter::IntoIterator<Item = i32>) -> Self {
                        let l = self.m.#get_mut();
                        for v in vs {
                            l.append(v);
                        }
                        self
                    }
                },
                (true, FieldKind::Message(mid)) => {
                    let t = self.msg_type(mid);
                    quote! {
                        pub fn #m(mut self, vs: impl ::core::iter::IntoIterator<Item = #t>) -> Self {
                            let l = self.m.#get_mut();
                            for v in vs {
                                l.append(v);
                            }
                            self
                        }
                    }
                }
            };
            quote!(#[doc = #doc] #body)
        });
        let doc = format!(
            " Builds a `{n}` in one expression: `{n}::builder(&arena).field(value)….build()`; \
             strings are `&str` and bytes `&[u8]` (the builder applies the arena, so the copy \
             or zero-copy choice is made as with `CFString::new`). The same setters run as \
             when called one by one.",
            n = upper_camel(&self.msg.name)
        );
        let new_doc = format!(
            " A builder of `{}` in `arena`.",
            upper_camel(&self.msg.name)
        );
        quote! {
            #[doc = #doc]
            #[allow(dead_code)]
            #[must_use]
            pub struct #builder<'a> {
                arena: &'a cf::Arena,
                m: #name<'a>,
            }

            // Methods are named after the fields, which may be `add`, `sub`, `next`, ….
            #[allow(dead_code, clippy::should_implement_trait)]
            impl<'a> #builder<'a> {
                #(#methods)*

                /// The message.
                pub fn build(self) -> #name<'a> {
                    self.m
                }
            }

            #[allow(dead_code)]
            impl<'a> #name<'a> {
                #[doc = #new_doc]
                pub fn builder(arena: &'a cf::Arena) -> #builder<'a> {
                    #builder { arena, m: #name::new_in(arena) }
                }
            }
        }
    }
}

/// Name of oneof `oneof`'s value enum in the message's module (`<Oneof>Value`, or
/// `<Oneof>OneofValue` if a nested type has that name) and whether it borrows (has lifetimes).
pub(crate) fn oneof_value_name(schema: &Schema, msg: MsgId, oneof: usize) -> (String, bool) {
    let m = &schema.messages[msg];
    let base = camel_base(&m.oneofs[oneof].name);
    let name = format!("{base}Value");
    let taken = m
        .nested_messages
        .iter()
        .map(|&i| &schema.messages[i].name)
        .chain(m.nested_enums.iter().map(|&i| &schema.enums[i].name))
        .any(|n| upper_camel(n) == name);
    let name = if taken {
        format!("{base}OneofValue")
    } else {
        name
    };
    let borrows = m.oneofs[oneof].fields.iter().any(|&i| {
        matches!(
            m.fields[i].kind,
            FieldKind::String | FieldKind::Bytes | FieldKind::Message(_)
        )
    });
    (name, borrows)
}

/// The value enum of oneof `oneof` of `msg`, for the message's module.
pub(crate) fn oneof_value_enum(schema: &Schema, msg: MsgId, oneof: usize) -> TokenStream {
    let m = &schema.messages[msg];
    let o = &m.oneofs[oneof];
    let (name, borrows) = oneof_value_name(schema, msg, oneof);
    let name = ident(&name);
    let mut module = names::scope_modules(&m.package, &m.parents);
    module.push(names::module_name(&m.name));
    let variants = o.fields.iter().map(|&i| {
        let f = &m.fields[i];
        let v = ident(&upper_camel(&f.name));
        let t = match f.kind {
            FieldKind::Scalar(k) => {
                let t = ident(k.rust_type());
                quote!(#t)
            }
            FieldKind::Enum(e) => {
                let t = enum_path(schema, &module, e);
                quote!(::core::result::Result<#t, i32>)
            }
            FieldKind::String => quote!(&'r cf::CFString<'a>),
            FieldKind::Bytes => quote!(&'r cf::CFBytes<'a>),
            FieldKind::Message(id) => {
                let p = names::message_path(schema, &module, id);
                quote!(&'r #p<'a>)
            }
        };
        let d = format!(" `{}` (field {}).", f.name, f.number);
        quote!(#[doc = #d] #v(#t),)
    });
    let doc = format!(
        " The member of oneof `{}` that is set, with its value (from `get_{}()`).",
        o.name,
        snake(&o.name)
    );
    let generics = if borrows { quote!(<'r, 'a>) } else { quote!() };
    quote! {
        #[doc = #doc]
        #[derive(Clone, Copy, Debug, PartialEq)]
        #[allow(non_camel_case_types)]
        pub enum #name #generics { #(#variants)* }
    }
}
