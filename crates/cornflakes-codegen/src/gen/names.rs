//! Rust names for proto names, and paths between generated modules.

use proc_macro2::{Ident, Span, TokenStream};
use quote::quote;

use crate::schema::{EnumId, MsgId, Schema};

const KEYWORDS: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where",
    "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen", "union",
];

/// The UpperCamel form of a proto name, with no keyword check: `get_m`, `GetM`, `getM` →
/// `GetM`. What derived names (`<Name>View`, `<Name>Owned`) start from.
pub fn camel_base(name: &str) -> String {
    let mut out = String::new();
    for part in name.split('_').filter(|p| !p.is_empty()) {
        let mut cs = part.chars();
        if let Some(c) = cs.next() {
            out.extend(c.to_uppercase());
            let rest: String = cs.collect();
            // ALL_CAPS parts (enum values) become Capitalised.
            if part.chars().all(|c| !c.is_lowercase()) {
                out.push_str(&rest.to_lowercase());
            } else {
                out.push_str(&rest);
            }
        }
    }
    if out.is_empty() {
        // A name of underscores only: `_` alone is no identifier, `__` is.
        return "_".repeat(name.len() + 1);
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// A type or variant name: [`camel_base`], and `Self` (the one UpperCamel keyword, which
/// cannot be a raw identifier) as `Self_`, prost-build's spelling.
pub fn upper_camel(name: &str) -> String {
    let out = camel_base(name);
    if out == "Self" {
        "Self_".to_string()
    } else {
        out
    }
}

/// `GetM` → `get_m`, `fooBar` → `foo_bar`, `HTTPServer` → `http_server`, and underscores
/// normalised as Rust's `non_snake_case` lint wants: `_field_name3`, `field__name4_` →
/// `field_name3`, `field_name4`. Never empty: a name of underscores only keeps one more
/// underscore than it had (`_` → `__`).
pub fn snake(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let prev_upper = i > 0 && chars[i - 1].is_uppercase();
            if i > 0 && !out.ends_with('_') && (prev_lower || (prev_upper && next_lower)) {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    let words: Vec<&str> = out.split('_').filter(|w| !w.is_empty()).collect();
    if words.is_empty() {
        return "_".repeat(name.len() + 1);
    }
    words.join("_")
}

/// An identifier for `name`, suffixed with `_` when it is a Rust keyword or in `taken`.
pub fn ident_avoiding(name: &str, taken: &[&str]) -> Ident {
    if KEYWORDS.contains(&name) || taken.contains(&name) {
        Ident::new(&format!("{name}_"), Span::call_site())
    } else {
        Ident::new(name, Span::call_site())
    }
}

/// A plain identifier (`name` must be valid).
pub fn ident(name: &str) -> Ident {
    Ident::new(name, Span::call_site())
}

/// The module of a message's nested types and oneof cases.
pub fn module_name(message: &str) -> String {
    let s = snake(message);
    if KEYWORDS.contains(&s.as_str()) {
        format!("{s}_")
    } else {
        s
    }
}

/// Module path of a package (`a.b_c` → `["a", "b_c"]`).
pub fn package_modules(package: &str) -> Vec<String> {
    package
        .split('.')
        .filter(|s| !s.is_empty())
        .map(module_name)
        .collect()
}

/// Module path where the item for a declaration with `parents` in `package` lives.
pub fn scope_modules(package: &str, parents: &[String]) -> Vec<String> {
    let mut m = package_modules(package);
    m.extend(parents.iter().map(|p| module_name(p)));
    m
}

/// A path from module `from` to item `name` in module `to`.
pub fn relative_path(from: &[String], to: &[String], name: &str) -> TokenStream {
    let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
    let supers = (common..from.len()).map(|_| quote!(super::));
    let downs = to[common..].iter().map(|m| {
        let m = ident(m);
        quote!(#m::)
    });
    let name = ident(name);
    quote!(#(#supers)* #(#downs)* #name)
}

/// The crate path and modules of `package` when an extern path covers it
/// (`Config::extern_path`): `google.protobuf` → (`::cornflakes_types`, `[]`).
pub fn extern_root(schema: &Schema, package: &str) -> Option<(TokenStream, Vec<String>)> {
    schema.extern_paths.iter().find_map(|(prefix, rust)| {
        let rest = if package == prefix {
            ""
        } else {
            package.strip_prefix(prefix.as_str())?.strip_prefix('.')?
        };
        let root: TokenStream = rust.parse().ok()?;
        Some((root, package_modules(rest)))
    })
}

/// Path from module `from` to the item `name` declared with `parents` in `package`: relative
/// inside the generated tree, absolute into an extern crate.
pub fn item_path(
    schema: &Schema,
    from: &[String],
    package: &str,
    parents: &[String],
    name: &str,
) -> TokenStream {
    if let Some((root, mut modules)) = extern_root(schema, package) {
        modules.extend(parents.iter().map(|p| module_name(p)));
        let downs = modules.iter().map(|m| {
            let m = ident(m);
            quote!(#m::)
        });
        let name = ident(name);
        return quote!(#root::#(#downs)* #name);
    }
    relative_path(from, &scope_modules(package, parents), name)
}

/// Path to message `id` from module `from` (without lifetime).
pub fn message_path(schema: &Schema, from: &[String], id: MsgId) -> TokenStream {
    let m = &schema.messages[id];
    item_path(schema, from, &m.package, &m.parents, &upper_camel(&m.name))
}

/// Path to enum `id` from module `from`.
pub fn enum_path(schema: &Schema, from: &[String], id: EnumId) -> TokenStream {
    let e = &schema.enums[id];
    item_path(schema, from, &e.package, &e.parents, &upper_camel(&e.name))
}

/// Name of the enum of oneof `oneof`'s cases, in the module of `msg`'s nested types: the
/// oneof's name in UpperCamel, with `Case` appended if a nested type already has that name.
pub fn oneof_case_name(schema: &Schema, msg: MsgId, oneof: usize) -> String {
    let m = &schema.messages[msg];
    let name = upper_camel(&m.oneofs[oneof].name);
    let taken = m
        .nested_messages
        .iter()
        .map(|&i| &schema.messages[i].name)
        .chain(m.nested_enums.iter().map(|&i| &schema.enums[i].name))
        .any(|n| upper_camel(n) == name);
    if taken {
        format!("{name}Case")
    } else {
        name
    }
}

/// `#[doc = …]` attributes for a proto comment. A comment that is plain prose becomes one
/// doc line per line, brackets escaped (rustdoc would read `[x]` as a link). One that
/// Markdown would read as more (HTML-like `<tags>`, bare URLs, indented or fenced code that
/// rustdoc would compile as a doctest, lists whose continuation lines clippy flags) is kept
/// verbatim in a `text` block, so no comment can fail `#![deny(warnings)]`, rustdoc or clippy.
pub fn doc_attrs(doc: &str) -> TokenStream {
    let text = doc.replace('\t', "    ").replace('\r', "");
    let lines: Vec<&str> = text.lines().collect();
    let first = lines.iter().position(|l| !l.trim().is_empty());
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    let (Some(first), Some(last)) = (first, last) else {
        return quote!();
    };
    let lines = &lines[first..=last];
    if lines.iter().any(|l| doc_needs_verbatim(l)) {
        let indent = lines
            .iter()
            .filter(|l| !l.trim().is_empty())
            .map(|l| l.len() - l.trim_start().len())
            .min()
            .unwrap_or(0);
        let body = lines.iter().map(|l| {
            let l = l
                .get(indent..)
                .unwrap_or("")
                .trim_end()
                .replace("```", "'''");
            let l = format!(" {l}");
            quote!(#[doc = #l])
        });
        return quote! {
            #[doc = " ```text"]
            #(#body)*
            #[doc = " ```"]
        };
    }
    let lines = lines.iter().map(|l| {
        let l = l.trim();
        let l = if l.is_empty() {
            String::new()
        } else {
            format!(" {l}")
        };
        // Keep rustdoc from reading proto comments as links to nowhere.
        let l = l.replace('[', "\\[").replace(']', "\\]");
        quote!(#[doc = #l])
    });
    quote!(#(#lines)*)
}

/// Whether a comment line holds what Markdown, rustdoc or clippy would read as more than
/// prose: indented code, a list, quote, heading or table line, HTML-like `<…>`, a code
/// fence, a URL.
fn doc_needs_verbatim(line: &str) -> bool {
    let t = line.trim_start();
    let indented = line.len() - t.len() >= 4;
    let numbered = t
        .split_once(['.', ')'])
        .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    indented
        || numbered
        || t.starts_with(['-', '*', '+', '>', '#', '|', '='])
        || t.contains(['<', '>'])
        || t.contains("```")
        || t.contains("://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_conversions() {
        assert_eq!(upper_camel("GetM"), "GetM");
        assert_eq!(upper_camel("get_m"), "GetM");
        assert_eq!(upper_camel("OP_GET"), "OpGet");
        assert_eq!(upper_camel("9lives"), "_9lives");
        assert_eq!(snake("GetM"), "get_m");
        assert_eq!(snake("fooBar"), "foo_bar");
        assert_eq!(snake("HTTPServer"), "http_server");
        assert_eq!(snake("field_33"), "field_33");
        assert_eq!(module_name("Type"), "type_");
        assert_eq!(module_name("Self"), "self_");
        // The conformance message's field names: snake_case as the lint wants it.
        for (proto, rust) in [
            ("_field_name3", "field_name3"),
            ("field__name4_", "field_name4"),
            ("__field_name13", "field_name13"),
            ("__Field_name14", "field_name14"),
            ("field__Name15", "field_name15"),
            ("Field_name18__", "field_name18"),
            ("FIELD_name12", "field_name12"),
            ("field_0_name6", "field_0_name6"),
            ("_", "__"),
        ] {
            assert_eq!(snake(proto), rust, "{proto}");
        }
        assert_eq!(upper_camel("Self"), "Self_");
        assert_eq!(upper_camel("SELF"), "Self_");
        assert_eq!(camel_base("Self"), "Self");
        assert_eq!(upper_camel("_"), "__");
    }

    #[test]
    fn relative_paths() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let p = relative_path(&s(&["a", "outer"]), &s(&["b"]), "T");
        assert_eq!(p.to_string(), "super :: super :: b :: T");
        let p = relative_path(&s(&["a"]), &s(&["a", "outer"]), "Inner");
        assert_eq!(p.to_string(), "outer :: Inner");
    }
}
