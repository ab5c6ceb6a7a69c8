//! Cornflakes schema compiler.
