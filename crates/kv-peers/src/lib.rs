//! `kv-peers`: what a key-value user would run instead of the Cornflakes KV store —
//! `redis-server` (7.0) and `memcached` (1.6) — started on 127.0.0.1 by this tool, loaded with
//! the same workloads ([`kv_workloads`]), and driven open-loop by the project's load generator
//! ([`loadgen`]: Poisson schedules, HDR latency, sweeps, JSON, plots) over kernel TCP through
//! their own protocols (RESP with pipelining; the memcached text protocol). Every reply is
//! verified. Results are records of the same shape as `kv bench`'s, labelled as different
//! systems.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod bench;
pub mod load;
pub mod memcache;
pub mod plan;
pub mod server;
pub mod transport;
