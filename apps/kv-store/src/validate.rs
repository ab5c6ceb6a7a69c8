//! Whole requests are checked before the first write.
//!
//! A request that decodes but is invalid — a key that is not UTF-8, a multi-key put whose
//! keys and values do not pair up, a single-key operation given several keys or values — is
//! answered `BAD_REQUEST` and changes nothing: every key of a request is validated here
//! before the store is touched, and the store's multi-key put applies all or nothing
//! ([`crate::store::Store::put_lists`]). Only a request that does not decode at all (no
//! id to answer) is dropped and counted as malformed.

use crate::ops::Status;

/// `key` as a string, or `BAD_REQUEST` when it is not UTF-8.
pub fn key(key: &[u8]) -> Result<&str, Status> {
    std::str::from_utf8(key).map_err(|_| Status::BadRequest)
}

/// Whether every key is UTF-8 (`BAD_REQUEST` otherwise), without collecting them.
pub fn all_keys<'a>(keys: impl IntoIterator<Item = &'a [u8]>) -> Result<(), Status> {
    keys.into_iter().try_for_each(|k| key(k).map(|_| ()))
}

/// Every key of a request as a string, or `BAD_REQUEST` when any is not UTF-8 (checked
/// before anything is written).
pub fn keys<'a>(keys: impl IntoIterator<Item = &'a [u8]>) -> Result<Vec<&'a str>, Status> {
    keys.into_iter().map(key).collect()
}

/// The pairs of a multi-key put, or `BAD_REQUEST` when there are none or the keys and values
/// do not pair up.
pub fn pairs<'k, 'v>(
    keys: &[&'k str],
    vals: &[&'v [u8]],
) -> Result<Vec<(&'k str, &'v [u8])>, Status> {
    paired(keys.len(), vals.len())?;
    Ok(keys.iter().copied().zip(vals.iter().copied()).collect())
}

/// `BAD_REQUEST` unless a multi-key put has at least one key and one value per key.
pub fn paired(keys: usize, vals: usize) -> Result<(), Status> {
    if keys == 0 || keys != vals {
        Err(Status::BadRequest)
    } else {
        Ok(())
    }
}

/// Exactly `n` elements, or `BAD_REQUEST` (a single-key operation given several keys, or a
/// put or append several values, is refused rather than served with the first).
pub fn exactly<T>(what: &[T], n: usize) -> Result<(), Status> {
    if what.len() == n {
        Ok(())
    } else {
        Err(Status::BadRequest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bad_key_rejects_the_whole_request() {
        assert_eq!(keys([&b"good"[..], b"\xff\xfe"]), Err(Status::BadRequest));
        assert_eq!(keys([&b"a"[..], b"b"]).unwrap(), vec!["a", "b"]);
        assert_eq!(all_keys([&b"a"[..], b"\xff"]), Err(Status::BadRequest));
        assert_eq!(all_keys([&b"a"[..]]), Ok(()));
        assert_eq!(pairs(&["a"], &[]).unwrap_err(), Status::BadRequest);
        assert_eq!(pairs(&[], &[]).unwrap_err(), Status::BadRequest);
        assert_eq!(pairs(&["a"], &[b"x"]).unwrap().len(), 1);
        assert_eq!(exactly(&[1, 2], 1), Err(Status::BadRequest));
    }
}
