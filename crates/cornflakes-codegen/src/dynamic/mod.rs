//! Dynamic codec.
