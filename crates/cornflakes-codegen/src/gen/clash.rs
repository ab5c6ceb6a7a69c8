//! Generated names that meet: two schema elements whose Rust names are the same in one scope
//! (a message `Foo` and a message `FooView`, which is `Foo`'s view; a string field `x`, whose
//! view has `get_x_bytes`, and a field `x_bytes`; `foo_bar` and `fooBar`). rustc would refuse
//! the generated file with an error about code the user did not write; the compiler refuses
//! the schema instead, naming the Rust item and where it is.

use std::collections::{BTreeMap, BTreeSet};

use syn::{ImplItem, Item, Type};

use super::names::snake;
use crate::error::Error;
use crate::schema::{FieldKind, MsgId, Schema};

/// Checks that the fields and oneofs of message `id` generate distinct accessors; two that
/// meet (`foo_bar` and `fooBar`; a string `x`, whose view has `get_x_bytes`, and a field
/// `x_bytes`) are refused naming both proto names.
pub(crate) fn check_fields(schema: &Schema, id: MsgId) -> Result<(), Error> {
    let m = &schema.messages[id];
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut claim = |method: String, owner: String| -> Result<(), Error> {
        match seen.get(&method) {
            Some(first) if *first != owner => Err(Error::name_clash_in_message(
                &m.full_name,
                first,
                &owner,
                &method,
            )),
            _ => {
                seen.insert(method, owner);
                Ok(())
            }
        }
    };
    for f in &m.fields {
        let b = snake(&f.name);
        let owner = format!("field `{}`", f.name);
        let mut methods = vec![
            format!("has_{b}"),
            format!("get_{b}"),
            format!("set_{b}"),
            format!("clear_{b}"),
        ];
        if f.repeated {
            methods.extend([format!("init_{b}"), format!("get_mut_{b}")]);
            if matches!(f.kind, FieldKind::Message(e) if schema.messages[e].map_entry) {
                methods.extend([format!("find_{b}"), format!("insert_{b}")]);
            }
        } else {
            match f.kind {
                FieldKind::Enum(_) => {
                    methods.extend([format!("get_{b}_raw"), format!("set_{b}_raw")])
                }
                FieldKind::String => methods.push(format!("get_{b}_bytes")),
                FieldKind::Message(_) => methods.push(format!("get_mut_{b}")),
                _ => {}
            }
        }
        for method in methods {
            claim(method, owner.clone())?;
        }
    }
    for o in &m.oneofs {
        let b = snake(&o.name);
        claim(format!("which_{b}"), format!("oneof `{}`", o.name))?;
    }
    Ok(())
}

/// Checks every module of `file` (the code generated for `package`): item names per
/// namespace, inherent methods and associated constants per type, fields per struct, variants
/// per enum.
pub(crate) fn check(package: &str, file: &syn::File) -> Result<(), Error> {
    let root = if package.is_empty() {
        "the generated file".to_owned()
    } else {
        format!("module `{}`", package.replace('.', "::"))
    };
    check_items(package, &root, &file.items)
}

fn check_items(package: &str, scope: &str, items: &[Item]) -> Result<(), Error> {
    let clash = |what: String| Err(Error::name_clash(package, scope, &what));
    let mut types = BTreeSet::new();
    let mut values = BTreeSet::new();
    // Inherent associated items per type: `impl Foo` blocks may be several.
    let mut inherent: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for item in items {
        let (namespace, name) = match item {
            Item::Struct(s) => {
                let mut fields = BTreeSet::new();
                for f in s.fields.iter().filter_map(|f| f.ident.as_ref()) {
                    if !fields.insert(f.to_string()) {
                        return clash(format!("the field `{f}` of `struct {}` twice", s.ident));
                    }
                }
                (&mut types, s.ident.to_string())
            }
            Item::Enum(e) => {
                let mut variants = BTreeSet::new();
                for v in &e.variants {
                    if !variants.insert(v.ident.to_string()) {
                        return clash(format!(
                            "the variant `{}` of `enum {}` twice",
                            v.ident, e.ident
                        ));
                    }
                }
                (&mut types, e.ident.to_string())
            }
            Item::Type(t) => (&mut types, t.ident.to_string()),
            Item::Trait(t) => (&mut types, t.ident.to_string()),
            Item::Union(u) => (&mut types, u.ident.to_string()),
            Item::Mod(m) => {
                if let Some((_, inner)) = &m.content {
                    let inner_scope = format!("{} module `{}`", scope_prefix(scope), m.ident);
                    check_items(package, &inner_scope, inner)?;
                }
                (&mut types, m.ident.to_string())
            }
            Item::Fn(f) => (&mut values, f.sig.ident.to_string()),
            Item::Const(c) => (&mut values, c.ident.to_string()),
            Item::Static(s) => (&mut values, s.ident.to_string()),
            Item::Impl(i) if i.trait_.is_none() => {
                let Some(ty) = self_type_name(&i.self_ty) else {
                    continue;
                };
                let names = inherent.entry(ty.clone()).or_default();
                for it in &i.items {
                    let name = match it {
                        ImplItem::Fn(f) => f.sig.ident.to_string(),
                        ImplItem::Const(c) => c.ident.to_string(),
                        _ => continue,
                    };
                    if !names.insert(name.clone()) {
                        return clash(format!("`{ty}::{name}` twice"));
                    }
                }
                continue;
            }
            _ => continue,
        };
        if !namespace.insert(name.clone()) {
            return clash(format!("the item `{name}` twice"));
        }
    }
    Ok(())
}

/// `module `a::b`` → `module `a::b`,` for naming a nested module after it.
fn scope_prefix(scope: &str) -> String {
    format!("{scope},")
}

/// `Foo` of `impl<'a> Foo<'a>` (the last path segment).
fn self_type_name(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::check;
    use crate::error::ErrorKind;

    fn file(code: &str) -> syn::File {
        syn::parse_str(code).unwrap()
    }

    #[test]
    fn distinct_names_pass_and_every_kind_of_clash_is_named() {
        let ok = file(
            "pub struct Foo<'a> { a: u32 } pub struct FooView<'a> { b: u32 }
             impl<'a> Foo<'a> { pub fn get_x(&self) {} }
             impl<'a> Foo<'a> { pub fn get_y(&self) {} }
             impl<'a> FooView<'a> { pub fn get_x(&self) {} }
             impl Clone for Foo<'_> { fn clone(&self) -> Self { Self::new() } }
             pub mod foo { pub struct Foo; }
             pub enum E { A, B }",
        );
        assert!(check("p", &ok).is_ok());
        let cases = [
            ("pub struct FooView; pub struct FooView;", "the item `FooView` twice in module `p`"),
            (
                "pub struct A; impl A { fn get_x_bytes(&self) {} } impl A { fn get_x_bytes(&self) {} }",
                "`A::get_x_bytes` twice in module `p`",
            ),
            ("pub struct S { a: u8, a: u8 }", "the field `a` of `struct S` twice"),
            ("pub enum E { FooBar, FooBar }", "the variant `FooBar` of `enum E` twice"),
            (
                "pub mod m { pub struct X; pub struct X; }",
                "the item `X` twice in module `p`, module `m`",
            ),
            ("pub mod m {} pub struct m;", "the item `m` twice"),
        ];
        for (code, want) in cases {
            let err = check("p", &file(code)).expect_err(code);
            assert_eq!(err.kind(), ErrorKind::NameClash);
            let msg = err.to_string();
            assert!(
                msg.starts_with("package `p`: two schema elements generate ") && msg.contains(want),
                "{code}: {msg}"
            );
            assert!(msg.contains("rename one of them in the .proto"), "{msg}");
        }
        // A package-less file names itself so.
        let err = check("", &file("pub struct A; pub struct A;")).unwrap_err();
        assert!(err.to_string().contains("in the generated file"), "{err}");
    }
}
