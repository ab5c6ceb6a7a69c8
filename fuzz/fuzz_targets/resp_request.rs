//! Target 7: the RESP codec (`crates/resp`) on arbitrary bytes, as a server receives a request
//! and a client a reply: `Parser::parse` with one parser reused across inputs (as a server
//! keeps it), the KV store's mapping of a parsed request to an operation
//! (`kv_store::resp::RespRequest::decode`), the reply reader (`resp::parse`, `Reader`) and the
//! KV client's `decode_reply` for every operation. A request that parses re-encodes to exactly
//! its input when the lengths agree (the parser takes no shortcuts); the parser never holds
//! room for more arguments than the input's bytes could back (an 8-byte `*65536\r\n` once
//! reserved 1 MiB); nothing panics.
#![no_main]

use std::cell::RefCell;

use kv_store::resp::{decode_reply, RespRequest};
use kv_store::OpKind;
use libfuzzer_sys::fuzz_target;
use resp::{Out, Parser, Reader, MAX_ARGS, MIN_ARG_LEN};

thread_local! {
    static PARSER: RefCell<Parser> = RefCell::new(Parser::new());
    /// The longest input seen: the reused parser's room is bounded by it.
    static LONGEST: RefCell<usize> = const { RefCell::new(0) };
}

fuzz_target!(|data: &[u8]| {
    let longest = LONGEST.with(|l| {
        let mut l = l.borrow_mut();
        *l = (*l).max(data.len());
        *l
    });
    PARSER.with(|p| {
        let mut p = p.borrow_mut();
        if let Ok(args) = p.parse(data) {
            assert!(!args.is_empty() && args.len() <= MAX_ARGS);
            // Each argument takes at least 6 bytes ("$0\r\n\r\n").
            assert!(
                args.len() * MIN_ARG_LEN <= data.len(),
                "{} arguments in {} bytes",
                args.len(),
                data.len()
            );
            let mut again = Vec::new();
            again.array(args.len());
            for a in args.iter() {
                again.bulk(a);
            }
            // The header's number may have been written with leading zeros or a '+': compare
            // only when the lengths agree.
            if again.len() == data.len() {
                assert_eq!(again, data);
            }
            let _ = RespRequest::decode(args);
        }
        assert!(
            p.capacity() * MIN_ARG_LEN <= longest + MIN_ARG_LEN * 16,
            "reserved {} arguments, longest input {longest} bytes",
            p.capacity()
        );
    });
    let _ = resp::parse(data);
    let mut r = Reader::new(data);
    while let Ok(Some(_)) = r.next_frame() {}
    for kind in OpKind::ALL {
        let _ = decode_reply(kind, data);
    }
});
