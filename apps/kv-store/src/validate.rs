//! Whole requests are checked before the first write.
//!
//! A request that decodes but is invalid — a key that is not UTF-8, a multi-key put whose
//! keys and values do not pair up, a single-key operation given several keys or values — is
//! answered `BAD_REQUEST` and changes nothing: every key of a request is validated (with
//! these checks, by [`crate::exec::execute`]) before the store is touched, and the store's
//! multi-key put applies all or nothing
//! ([`crate::store::Store::put_lists`]). Only a request that does not decode at all (no
//! id to answer) is dropped and counted as malformed.

use crate::ops::Status;

/// `key` as a string, or `BAD_REQUEST` when it is not UTF-8.
pub fn key(key: &[u8]) -> Result<&str, Status> {
    std::str::from_utf8(key).map_err(|_| Status::BadRequest)
}

/// `BAD_REQUEST` unless a multi-key put has at least one key and one value per key.
pub fn paired(keys: usize, vals: usize) -> Result<(), Status> {
    if keys == 0 || keys != vals {
        Err(Status::BadRequest)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_must_be_utf8_and_puts_paired() {
        assert_eq!(key(b"\xff\xfe"), Err(Status::BadRequest));
        assert_eq!(key(b"good"), Ok("good"));
        assert_eq!(paired(1, 0), Err(Status::BadRequest));
        assert_eq!(paired(0, 0), Err(Status::BadRequest));
        assert_eq!(paired(2, 2), Ok(()));
    }
}
