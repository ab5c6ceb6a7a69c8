//! Proto enums → Rust enums with `TryFrom<i32>` (unknown numbers stay available as raw `i32`).

use std::collections::HashSet;

use proc_macro2::TokenStream;
use quote::quote;

use super::names::{doc_attrs, ident, upper_camel};
use crate::schema::EnumDef;

/// Variant names: `OP_GET` in `enum Op` → `Get` when every value has the `OP_` prefix.
pub(crate) fn variant_names(e: &EnumDef) -> Vec<String> {
    let prefix = format!("{}_", crate::gen::names::snake(&e.name).to_uppercase());
    let strip = e.values.iter().all(|v| {
        v.name
            .strip_prefix(&prefix)
            .is_some_and(|r| !r.is_empty() && !r.starts_with(|c: char| c.is_ascii_digit()))
    });
    let names: Vec<String> = e
        .values
        .iter()
        .map(|v| {
            let n = if strip {
                &v.name[prefix.len()..]
            } else {
                v.name.as_str()
            };
            upper_camel(n)
        })
        .collect();
    let unique: HashSet<&String> = names.iter().collect();
    if unique.len() == names.len() || !strip {
        names
    } else {
        e.values.iter().map(|v| upper_camel(&v.name)).collect()
    }
}

pub(crate) fn enumeration(e: &EnumDef) -> TokenStream {
    let name = ident(&upper_camel(&e.name));
    let doc = if e.doc.is_empty() {
        let d = format!(" Enum `{}`.", e.full_name);
        quote!(#[doc = #d])
    } else {
        doc_attrs(&e.doc)
    };
    let names = variant_names(e);
    let mut seen = HashSet::new();
    let mut variants = Vec::new();
    let mut to_num = Vec::new();
    let mut to_str = Vec::new();
    let mut from_str = Vec::new();
    // Variant kept for each number (aliases map to the first value with that number).
    let mut first_of = std::collections::HashMap::new();
    for (v, vname) in e.values.iter().zip(&names) {
        let n = v.number;
        let proto = v.name.as_str();
        if seen.insert(n) {
            let vi = ident(vname);
            first_of.insert(n, vname.clone());
            let num = super::message_int(n as i64);
            let vdoc = if v.doc.is_empty() {
                let d = format!(" `{proto} = {n}`");
                quote!(#[doc = #d])
            } else {
                doc_attrs(&v.doc)
            };
            let default = if variants.is_empty() {
                quote!(#[default])
            } else {
                quote!()
            };
            variants.push(quote!(#vdoc #default #vi = #num,));
            to_num.push(quote!(#num => ::core::result::Result::Ok(#name::#vi),));
            to_str.push(quote!(#name::#vi => #proto,));
        }
        let first = ident(&first_of[&n]);
        from_str.push(quote!(#proto => ::core::option::Option::Some(#name::#first),));
    }
    quote! {
        #doc
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(dead_code, non_camel_case_types, clippy::enum_variant_names)]
        #[repr(i32)]
        pub enum #name {
            #(#variants)*
        }

        #[allow(dead_code)]
        impl #name {
            /// The value's name as written in the `.proto`.
            pub fn as_str_name(&self) -> &'static str {
                match self {
                    #(#to_str)*
                }
            }

            /// The value called `name` in the `.proto`.
            pub fn from_str_name(name: &str) -> ::core::option::Option<Self> {
                match name {
                    #(#from_str)*
                    _ => ::core::option::Option::None,
                }
            }
        }

        impl ::core::convert::TryFrom<i32> for #name {
            type Error = i32;
            /// The known value numbered `v`, or `Err(v)`.
            fn try_from(v: i32) -> ::core::result::Result<Self, i32> {
                match v {
                    #(#to_num)*
                    _ => ::core::result::Result::Err(v),
                }
            }
        }

        impl ::core::convert::From<#name> for i32 {
            fn from(v: #name) -> i32 {
                v as i32
            }
        }
    }
}
