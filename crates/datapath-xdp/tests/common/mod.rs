//! Test harness: two network namespaces joined by a veth pair, created per test with unique
//! names and removed by a `Drop` guard (also when the test fails or panics), and skip
//! reporting; the `netns-harness` crate, set up for this suite.
//!
//! Side A holds the AF_XDP socket (the interface has no kernel IPv4 address: our stack owns
//! 10.X.N.1); side B is a plain kernel with 10.X.N.2 on its end and ordinary UDP sockets
//! (a /24 leased from netns-harness's one allocator, `netns_harness::subnet`).
//! Only addresses inside these namespaces are used.

// Each test file, with and without the feature, uses a different part of it.
#![allow(unused_imports)]

pub use netns_harness::{in_netns, Held, Suite, VethPair};

/// `cfxdp-*` namespaces, `cx*` interfaces. `XDP.skip` fails a test instead of
/// skipping it when `CORNFLAKES_REQUIRE_XDP=1` says the environment must support it.
pub const XDP: Suite = Suite {
    root_needed_for: "AF_XDP, XDP programs and netns",
    ip_package_hint: Some("iproute2"),
    ..Suite::new("cfxdp", "cx", "CORNFLAKES_REQUIRE_XDP")
};
