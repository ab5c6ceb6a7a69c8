//! Generated code under test.
