//! Test vectors shared by every test of the wire format (the runtime's, the generated code's and
//! the `cornflakes` command's): the two worked examples of docs/wire-format.md, kept once as
//! data files in `tests/vectors/`.
#![allow(dead_code)] // each test binary uses a different subset

/// Worked example 1 (`GetM { id = 7, vals = ["hello", "world!"] }`), hex with whitespace.
pub const EXAMPLE1: &str = include_str!("../vectors/example1.hex");
/// Worked example 2 (`Outer` with a nested, a repeated message and packed ints), hex.
pub const EXAMPLE2: &str = include_str!("../vectors/example2.hex");

/// The hex text without whitespace (as `cornflakes encode --hex` prints it).
pub fn compact(s: &str) -> String {
    s.split_whitespace().collect()
}

/// The bytes a hex text (whitespace ignored) stands for.
pub fn hex(s: &str) -> Vec<u8> {
    let s = compact(s);
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}
