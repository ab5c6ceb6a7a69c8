//! The store's operations independent of any wire format: the request a client sends
//! ([`Op`]), the framing-header message type that names it ([`OpKind`]), and the answer a
//! client decodes from any serialization ([`Reply`]).

use std::fmt;

pub use crate::schema::Status;

/// Which operation a message is. Its number is the framing header's message type
/// ([`cornflakes::Msg::ty`]) of the request and of its response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// Read one key's value (the first element of its list).
    Get = 1,
    /// Replace one key's list by one value.
    Put = 2,
    /// Read several keys.
    GetM = 3,
    /// Write several keys.
    PutM = 4,
    /// Read a key's whole list.
    GetList = 5,
    /// Read one element of a key's list.
    GetFromList = 6,
    /// Append one value to a key's list.
    Append = 7,
    /// Remove a key.
    Delete = 8,
}

impl OpKind {
    /// Every kind, in message-type order.
    pub const ALL: [OpKind; 8] = [
        OpKind::Get,
        OpKind::Put,
        OpKind::GetM,
        OpKind::PutM,
        OpKind::GetList,
        OpKind::GetFromList,
        OpKind::Append,
        OpKind::Delete,
    ];

    /// The framing header's message type.
    pub fn msg_type(self) -> u16 {
        self as u16
    }

    /// The kind a message type names, if any.
    pub fn from_msg_type(ty: u16) -> Option<OpKind> {
        OpKind::ALL.into_iter().find(|k| k.msg_type() == ty)
    }

    /// Lower-case name (`get`, `getm`, `get_from_list`, …).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Get => "get",
            OpKind::Put => "put",
            OpKind::GetM => "getm",
            OpKind::PutM => "putm",
            OpKind::GetList => "getlist",
            OpKind::GetFromList => "get_from_list",
            OpKind::Append => "append",
            OpKind::Delete => "delete",
        }
    }
}

/// One request, owned: the workload generators' request type, so a generated workload is
/// sent as it is.
pub use kv_workloads::Request as Op;

impl OpKind {
    /// Which operation `op` is.
    pub fn of(op: &Op) -> OpKind {
        match op {
            Op::Get { .. } => OpKind::Get,
            Op::Put { .. } => OpKind::Put,
            Op::GetM { .. } => OpKind::GetM,
            Op::PutM { .. } => OpKind::PutM,
            Op::GetList { .. } => OpKind::GetList,
            Op::GetFromList { .. } => OpKind::GetFromList,
            Op::Append { .. } => OpKind::Append,
            Op::Delete { .. } => OpKind::Delete,
        }
    }
}

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
