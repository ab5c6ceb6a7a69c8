//! The store's operations independent of any wire format: the request a client sends
//! ([`Op`]), the framing-header message type that names it ([`OpKind`]), and the answer a
//! client decodes from any serialization ([`Reply`]).

use std::fmt;

pub use crate::schema::Status;

/// Which operation a message is (its number is the framing header's message type): the
/// workloads' operation kinds, shared with every client of the store.
pub use kv_workloads::OpKind;

/// One request, owned: the workload generators' request type, so a generated workload is
/// sent as it is.
pub use kv_workloads::Request as Op;

/// A decoded response, whatever the serialization.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// The request's outcome (for `getm`, the first failure).
    pub status: Status,
    /// The values returned: one for `get` / `get_from_list`, one per key for `getm`, the
    /// whole list for `getlist`, none for writes. A `get` of a value stored in pieces has the
    /// pieces joined here.
    pub vals: Vec<Vec<u8>>,
    /// `getm` only: one status per key.
    pub statuses: Vec<Status>,
}

impl Reply {
    /// A reply with only a status.
    pub fn status(status: Status) -> Reply {
        Reply {
            status,
            vals: Vec::new(),
            statuses: Vec::new(),
        }
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.status.as_str_name())?;
        let lens: Vec<usize> = self.vals.iter().map(Vec::len).collect();
        if !lens.is_empty() {
            write!(f, " values of {lens:?} bytes")?;
        }
        Ok(())
    }
}

/// Decodes a status number from the wire; numbers this build does not know are an error.
pub fn status_from_raw(raw: i32) -> Result<Status, String> {
    Status::try_from(raw).map_err(|_| format!("unknown status number {raw}"))
}
