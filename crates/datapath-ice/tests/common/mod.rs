//! Test harness: skip reporting, and two network namespaces joined by a veth pair, created
//! with unique names and removed by a `Drop` guard (also when a test fails or panics); the
//! `netns-harness` crate, set up for this suite.
//!
//! Side A is DPDK's (`net_af_packet` on its veth end; the interface has no kernel IPv4
//! address: our stack owns 10.X.N.1); side B is a plain kernel with 10.X.N.2 and ordinary
//! UDP sockets (a /24 leased from `netns_harness::subnet`). Only addresses inside these namespaces are used.

// Each test file, with and without the feature, uses a different part of it.
#![allow(unused_imports)]

pub use netns_harness::{in_netns, NetnsGuard, Suite, VethPair};

/// `cfice-*` namespaces, `ci*` interfaces (pairs made with MTU 1500).
/// `ICE.skip` fails a test instead of skipping it when `CORNFLAKES_REQUIRE_ICE=1` says this
/// environment must run it.
pub const ICE: Suite = Suite::new("cfice", "ci", "CORNFLAKES_REQUIRE_ICE");
