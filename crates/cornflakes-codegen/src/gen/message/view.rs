//! The validated view of a message (`MView<'a>`, opened with `M::view`): the message read in
//! place, building nothing. Its getters read slots through `cornflakes::wire::ObjectView`,
//! each slot's offset a few popcounts of the bitmap under the per-slot-size masks of the
//! message's `ViewLayout` (docs/runtime.md, "Views").

use proc_macro2::{Literal, TokenStream};
use quote::{format_ident, quote};

use super::super::names::{self, camel_base, doc_attrs, enum_path};
use super::{hex, int_lit, lit, scalar_default, Field, MessageGen};
use crate::schema::{DefaultValue, FieldKind, MsgId};

/// Name of the view type of message `name`.
pub(crate) fn view_name(name: &str) -> String {
    format!("{}View", camel_base(name))
}

impl MessageGen<'_> {
    /// Path to the view type of message `id` from this message's module (without lifetime).
    fn view_path(&self, id: MsgId) -> TokenStream {
        let m = &self.schema.messages[id];
        names::item_path(
            self.schema,
            &self.module,
            &m.package,
            &m.parents,
            &view_name(&m.name),
        )
    }

    /// The `ViewLayout` constant: per stored word, the known fields and their slot sizes.
    fn view_layout(&self) -> TokenStream {
        let n = self.words.len();
        let (mut known, mut one, mut four, mut eight) =
            (vec![0u32; n], vec![0u32; n], vec![0u32; n], vec![0u32; n]);
        for f in &self.fields {
            let bit = 1u32 << ((f.def.number - 1) % 32);
            known[f.word] |= bit;
            match f.slot {
                1 => one[f.word] |= bit,
                4 => four[f.word] |= bit,
                _ => eight[f.word] |= bit,
            }
        }
        let arr = |v: &[u32]| {
            let items = v.iter().map(|&w| hex(w));
            quote!(&[#(#items),*])
        };
        let words = self.words.iter().map(|&w| Literal::u32_unsuffixed(w));
        let (known, one, four, eight) = (arr(&known), arr(&one), arr(&four), arr(&eight));
        let max = Literal::u32_unsuffixed(self.msg.max_field());
        quote! {
            /// The fields this view knows, by bitmap word and slot size.
            pub const LAYOUT: cf::wire::ViewLayout = cf::wire::ViewLayout {
                words: &[#(#words),*],
                known: #known,
                one: #one,
                four: #four,
                eight: #eight,
                max_known: #max,
            };
        }
    }

    /// The view type, its getters, and `M::view` / `M::view_rcbuf`.
    pub(super) fn view(&self) -> TokenStream {
        let name = self.name();
        let vname = format_ident!("{}", view_name(&self.msg.name));
        let path = self.proto_path();
        let layout = self.view_layout();
        let getters = self.fields.iter().map(|f| self.view_getter(f));
        let oneofs = self.oneof_fns();
        let to_object = self.view_to_object();
        let doc = format!(
            " A validated view of an encoded `{}`, read in place: opening it checks the header \
             (`W`, bitmap, the slots of the present known fields, the unknown-field rule, bools); \
             getters that follow an offset check it when called and return a `DecodeError`. \
             No trailing-bytes check and no budget: see `cornflakes::wire::ObjectView`.",
            self.msg.name
        );
        let proto_doc = doc_attrs(&self.msg.doc);
        let view_doc = format!(
            " Opens a view of an encoded `{}` in `buf` (the top-level object): its header is \
             checked, its fields are read (and checked) by the view's getters.",
            self.msg.name
        );
        quote! {
            #[doc = #doc]
            #proto_doc
            #[derive(Clone, Copy, Debug)]
            pub struct #vname<'a> {
                v: cf::wire::ObjectView<'a>,
            }

            #[allow(dead_code)]
            impl<'a> #name<'a> {
                #[doc = #view_doc]
                #[inline]
                pub fn view(buf: &'a [u8]) -> ::core::result::Result<#vname<'a>, cf::DecodeError> {
                    #vname::open(buf)
                }

                /// [`view`](Self::view) of a received packet's bytes.
                #[inline]
                pub fn view_rcbuf(pkt: &'a cf::RcBuf) -> ::core::result::Result<#vname<'a>, cf::DecodeError> {
                    #vname::open(pkt.as_slice())
                }
            }

            #[allow(dead_code)]
            impl<'a> #vname<'a> {
                #layout

                #[doc = #view_doc]
                #[inline]
                pub fn open(buf: &'a [u8]) -> ::core::result::Result<Self, cf::DecodeError> {
                    <Self as cf::wire::MessageView<'a>>::open_at(buf, 0, 0)
                }

                /// The header this view reads.
                #[inline]
                pub fn object(&self) -> cf::wire::ObjectView<'a> {
                    self.v
                }

                #(#getters)*
                #oneofs
                #to_object
            }

            impl<'a> cf::wire::MessageView<'a> for #vname<'a> {
                #[inline(always)]
                fn open_at(buf: &'a [u8], offset: usize, depth: u32) -> ::core::result::Result<Self, cf::DecodeError> {
                    match cf::wire::ObjectView::open(buf, offset, depth, &Self::LAYOUT) {
                        ::core::result::Result::Ok(v) => ::core::result::Result::Ok(#vname { v }),
                        ::core::result::Result::Err(e) => ::core::result::Result::Err(e.within(#path)),
                    }
                }
            }
        }
    }

    /// `to_object_in`: the object with the fields the view reads (each one read, and checked,
    /// through its getter; values borrow the viewed bytes).
    fn view_to_object(&self) -> TokenStream {
        let name = self.name();
        let arena = quote!(arena);
        let sets = self.fields.iter().map(|f| {
            let b = &f.base;
            let s = &f.store;
            let has = format_ident!("has_{b}");
            let get = format_ident!("get_{b}");
            let set = format_ident!("set_{b}");
            let init = format_ident!("init_{b}");
            let body = match (f.def.repeated, f.def.kind) {
                (true, FieldKind::Scalar(_) | FieldKind::Enum(_)) => {
                    let set_bit = MessageGen::set_bit_on(quote!(m), f);
                    quote! {
                        let l = self.#get()?;
                        m.#s = cf::PackedList::from_le_bytes(l.as_le_bytes(), l.len(), arena);
                        #set_bit
                    }
                }
                (true, FieldKind::String) => quote! {
                    let l = self.#get()?;
                    m.#init(l.len());
                    for v in l.0.iter() {
                        m.#s.append(cf::CFString::from_ptr_unchecked_utf8(cf::CFPtr::borrowed(v?)));
                    }
                },
                (true, FieldKind::Bytes) => quote! {
                    let l = self.#get()?;
                    m.#init(l.len());
                    for v in l.iter() {
                        m.#s.append(cf::CFBytes(cf::CFPtr::borrowed(v?)));
                    }
                },
                (true, FieldKind::Message(_)) => quote! {
                    let l = self.#get()?;
                    m.#init(l.len());
                    for v in l.iter() {
                        m.#s.append(v?.to_object_in(arena)?);
                    }
                },
                (false, FieldKind::Scalar(_)) => quote!(m.#set(self.#get());),
                (false, FieldKind::Enum(_)) => {
                    let get_raw = format_ident!("get_{b}_raw");
                    let set_raw = format_ident!("set_{b}_raw");
                    quote!(m.#set_raw(self.#get_raw());)
                }
                (false, FieldKind::String) => {
                    let get_bytes = format_ident!("get_{b}_bytes");
                    quote!(m.#set(cf::CFString::from_ptr_unchecked_utf8(cf::CFPtr::borrowed(self.#get_bytes()?)));)
                }
                (false, FieldKind::Bytes) => {
                    quote!(m.#set(cf::CFBytes(cf::CFPtr::borrowed(self.#get()?)));)
                }
                (false, FieldKind::Message(_)) => quote! {
                    if let ::core::option::Option::Some(v) = self.#get()? {
                        m.#set(v.to_object_in(arena)?);
                    }
                },
            };
            quote! {
                if self.#has() {
                    #body
                }
            }
        });
        let doc = format!(
            " The `{}` object this view reads, as `deserialize_bytes` builds it: every present field \
             read (and checked) through its getter, in field order (so the last member of a oneof \
             on the wire wins, as in decode); values borrow the viewed bytes; strings are checked \
             to be UTF-8 when the object's `as_str` reads them, as decoded ones are.",
            self.msg.name
        );
        quote! {
            #[doc = #doc]
            pub fn to_object_in(self, #arena: &'a cf::Arena) -> ::core::result::Result<#name<'a>, cf::DecodeError> {
                #[allow(unused_mut)]
                let mut m = #name::new_in(#arena);
                #(#sets)*
                ::core::result::Result::Ok(m)
            }
        }
    }

    /// `has_*` and `get_*` (and `get_*_raw` for enums) of one field.
    fn view_getter(&self, f: &Field<'_>) -> TokenStream {
        let d = f.def;
        let b = &f.base;
        let has = format_ident!("has_{b}");
        let get = format_ident!("get_{b}");
        let bit = (d.number - 1) % 32;
        let mask = hex(1u32 << bit);
        let wire_word = Literal::u32_unsuffixed((d.number - 1) / 32);
        let has_body = if (d.number - 1) / 32 == 0 {
            quote!(self.v.word0() & #mask != 0)
        } else {
            quote!(self.v.word(#wire_word) & #mask != 0)
        };
        let k = lit(f.word);
        let below = hex((1u32 << bit) - 1);
        let slot = quote!(self.v.slot(&Self::LAYOUT, #k, #below));
        let label = format!("{}.{}", self.proto_path(), d.name);
        let within = quote!(.map_err(|e| e.within(#label)));
        let get_doc = self.field_label(d);
        let proto_doc = doc_attrs(&d.doc);
        let has_doc = if d.repeated {
            format!(" Whether `{}` is present (possibly empty).", d.name)
        } else {
            format!(" Whether `{}` is set.", d.name)
        };
        let common = quote! {
            #[doc = #has_doc]
            #[inline(always)]
            pub fn #has(&self) -> bool {
                #has_body
            }
        };
        let res = |t: TokenStream| quote!(::core::result::Result<#t, cf::DecodeError>);
        let ok = |v: TokenStream| quote!(::core::result::Result::Ok(#v));
        let (ret, absent, read, doc) = if d.repeated {
            let doc = format!(
                "{get_doc}; empty when absent. The element array is checked to lie in the object here."
            );
            match d.kind {
                FieldKind::Scalar(k) => {
                    let t = MessageGen::scalar_type(k);
                    (
                        res(quote!(cf::wire::PackedView<'a, #t>)),
                        ok(quote!(cf::wire::PackedView::default())),
                        quote!(self.v.packed_at::<#t>(#slot)#within),
                        doc,
                    )
                }
                FieldKind::Enum(e) => (
                    res(quote!(cf::wire::PackedView<'a, i32>)),
                    ok(quote!(cf::wire::PackedView::default())),
                    quote!(self.v.packed_at::<i32>(#slot)#within),
                    format!(
                        "{doc} Elements are raw `{}` numbers.",
                        self.schema.enums[e].name
                    ),
                ),
                FieldKind::Bytes => (
                    res(quote!(cf::wire::BytesListView<'a>)),
                    ok(quote!(cf::wire::BytesListView::empty(#label))),
                    quote!(self.v.leaf_list_at(#slot, #label)#within),
                    format!("{doc} Each element is checked when read."),
                ),
                FieldKind::String => (
                    res(quote!(cf::wire::StrListView<'a>)),
                    ok(quote!(cf::wire::StrListView(cf::wire::BytesListView::empty(#label)))),
                    quote!(self.v.leaf_list_at(#slot, #label).map(cf::wire::StrListView)#within),
                    format!("{doc} Each element is checked (bounds, UTF-8) when read."),
                ),
                FieldKind::Message(id) => {
                    let vp = self.view_path(id);
                    (
                        res(quote!(cf::wire::MessageListView<'a, #vp<'a>>)),
                        ok(quote!(cf::wire::MessageListView::empty(#label))),
                        quote!(self.v.message_list_at(#slot, #label)#within),
                        format!("{doc} Each element's header is checked when read."),
                    )
                }
            }
        } else {
            match d.kind {
                FieldKind::Scalar(k) => {
                    let t = MessageGen::scalar_type(k);
                    let default = scalar_default(k, d.default.as_ref());
                    let get_doc = format!("{get_doc}, or its default when absent.");
                    return quote! {
                        #common
                        #[doc = #get_doc]
                        #proto_doc
                        #[inline]
                        pub fn #get(&self) -> #t {
                            if self.#has() {
                                self.v.scalar::<#t>(#slot)
                            } else {
                                #default
                            }
                        }
                    };
                }
                FieldKind::Enum(e) => {
                    let et = enum_path(self.schema, &self.module, e);
                    let get_raw = format_ident!("get_{b}_raw");
                    let n = match d.default {
                        Some(DefaultValue::Enum(n)) => n,
                        _ => self.schema.enums[e].values.first().map_or(0, |v| v.number),
                    };
                    let default = int_lit(n as i64);
                    let get_doc = format!(
                        "{get_doc}, or its default when absent; `Err(n)` for a number `{}` does not know.",
                        self.schema.enums[e].name
                    );
                    let raw_doc = format!(" `{}` as its raw number.", d.name);
                    return quote! {
                        #common
                        #[doc = #get_doc]
                        #proto_doc
                        #[inline]
                        pub fn #get(&self) -> ::core::result::Result<#et, i32> {
                            #et::try_from(self.#get_raw())
                        }
                        #[doc = #raw_doc]
                        #[inline]
                        pub fn #get_raw(&self) -> i32 {
                            if self.#has() {
                                self.v.scalar::<i32>(#slot)
                            } else {
                                #default
                            }
                        }
                    };
                }
                FieldKind::String => {
                    let default = match &d.default {
                        Some(DefaultValue::String(s)) => s.clone(),
                        _ => String::new(),
                    };
                    let get_bytes = format_ident!("get_{b}_bytes");
                    let default_bytes = Literal::byte_string(default.as_bytes());
                    let doc = format!(
                        "{get_doc}; empty (or its default) when absent; its bounds and UTF-8 are checked at each call."
                    );
                    let bytes_doc = format!(
                        "{get_doc} as bytes, not checked to be UTF-8; its bounds are checked at each call."
                    );
                    return quote! {
                        #common
                        #[doc = #doc]
                        #proto_doc
                        #[inline(always)]
                        pub fn #get(&self) -> ::core::result::Result<&'a str, cf::DecodeError> {
                            if !self.#has() {
                                return ::core::result::Result::Ok(#default);
                            }
                            self.v.str_at(#slot)#within
                        }
                        #[doc = #bytes_doc]
                        #[inline(always)]
                        pub fn #get_bytes(&self) -> ::core::result::Result<&'a [u8], cf::DecodeError> {
                            if !self.#has() {
                                return ::core::result::Result::Ok(#default_bytes);
                            }
                            self.v.bytes_at(#slot)#within
                        }
                    };
                }
                FieldKind::Bytes => (
                    res(quote!(&'a [u8])),
                    match &d.default {
                        Some(DefaultValue::Bytes(b)) if !b.is_empty() => {
                            let lit = Literal::byte_string(b);
                            ok(quote!(#lit))
                        }
                        _ => ok(quote!(&[])),
                    },
                    quote!(self.v.bytes_at(#slot)#within),
                    format!("{get_doc}; empty when absent; its bounds are checked at each call."),
                ),
                FieldKind::Message(id) => {
                    let vp = self.view_path(id);
                    (
                        res(quote!(::core::option::Option<#vp<'a>>)),
                        ok(quote!(::core::option::Option::None)),
                        quote!(self.v.nested_at::<#vp<'a>>(#slot).map(::core::option::Option::Some)#within),
                        format!("{get_doc}, if set; its header is checked at each call."),
                    )
                }
            }
        };
        quote! {
            #common
            #[doc = #doc]
            #proto_doc
            #[inline(always)]
            pub fn #get(&self) -> #ret {
                if !self.#has() {
                    return #absent;
                }
                #read
            }
        }
    }
}
