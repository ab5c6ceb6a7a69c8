//! Redis's protocol, RESP2, as the project speaks it: one codec for the KV store's `resp`
//! serialization (`apps/kv-store`), the redis-server peer of the KV benchmark
//! (`crates/kv-peers`) and the redis-cornflakes bench client (`apps/redis-cornflakes`).
//!
//! - **Requests** (server side, [`Parser`]): an array of bulk strings parsed into
//!   [`Args`] borrowed from the received bytes. The parser keeps its argument list from one
//!   request to the next, so a server parses without allocating once warm; it never reserves
//!   more than one argument per [`MIN_ARG_LEN`] bytes present, whatever count a request
//!   claims, and every malformed request is a [`ParseError`] naming the byte offset.
//! - **Writing** ([`Out`]): replies (`+OK`, errors, integers, bulk strings, arrays, their
//!   null forms) and commands, into a `Vec<u8>`, a caller's fixed buffer ([`SliceOut`]: e.g.
//!   a pinned transmit buffer), or a [`Len`] that counts, to size that buffer first.
//!   Integers are formatted on the stack ([`Int`]).
//! - **Replies** (client side): a [`Reader`] of borrowed [`Frame`]s, or whole owned
//!   [`Value`]s ([`parse`]), incremental (a reply cut short is "incomplete", not an error),
//!   with bounds on bulk lengths, array lengths, line lengths and nesting.
//!
//! ```
//! use resp::{Out, Parser, SliceOut, Len};
//!
//! let mut parser = Parser::new(); // kept by the server, reused for every request
//! let args = parser.parse(b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n")?;
//! assert!(args.is("get") && args.arg(1) == b"k");
//!
//! // Size the reply, then write it into the caller's buffer.
//! let reply = |o: &mut dyn Out| o.bulk(b"value");
//! let mut len = Len::default();
//! reply(&mut len);
//! let mut buf = vec![0; len.0];
//! let mut out = SliceOut::new(&mut buf);
//! reply(&mut out);
//! assert_eq!(out.finish()?, 11);
//! assert_eq!(resp::parse(&buf)?.unwrap().0, resp::Value::Bulk(Some(b"value".to_vec())));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod reply;
mod request;
mod write;

pub use reply::{
    parse, Frame, ProtocolError, Reader, Value, MAX_ARRAY, MAX_BULK, MAX_DEPTH, MAX_LINE,
};
pub use request::{Args, ParseError, ParseErrorKind, Parser, MAX_ARGS, MIN_ARG_LEN};
pub use write::{Int, Len, Out, Overflow, SliceOut};
