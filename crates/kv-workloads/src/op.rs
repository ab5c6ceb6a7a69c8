//! The operations of a workload by kind, numbered as the KV store's protocol numbers its
//! message types.

use crate::Request;

/// Which operation a request is. Its number is the message type of the KV store's protocol
/// (the framing header's `ty` of the request and of its response), which every client and
/// server of the store shares: the Rust store (`apps/kv-store`), its clients, and the
/// Cornflakes port of Redis (`apps/redis-cornflakes`).
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

impl OpKind {
    /// Which operation `r` is.
    pub fn of(r: &Request) -> OpKind {
        match r {
            Request::Get { .. } => OpKind::Get,
            Request::Put { .. } => OpKind::Put,
            Request::GetM { .. } => OpKind::GetM,
            Request::PutM { .. } => OpKind::PutM,
            Request::GetList { .. } => OpKind::GetList,
            Request::GetFromList { .. } => OpKind::GetFromList,
            Request::Append { .. } => OpKind::Append,
            Request::Delete { .. } => OpKind::Delete,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_types_are_the_protocol_s_and_round_trip() {
        let numbers: Vec<u16> = OpKind::ALL.iter().map(|k| k.msg_type()).collect();
        // The numbers are a wire contract (redis-cornflakes' C server reads them too).
        assert_eq!(numbers, [1, 2, 3, 4, 5, 6, 7, 8]);
        for k in OpKind::ALL {
            assert_eq!(OpKind::from_msg_type(k.msg_type()), Some(k));
        }
        assert_eq!(OpKind::from_msg_type(0), None);
        assert_eq!(OpKind::from_msg_type(9), None);
    }

    #[test]
    fn each_request_has_its_kind_and_name() {
        let key = || "k".to_owned();
        let cases = [
            (Request::Get { key: key() }, OpKind::Get, "get"),
            (
                Request::PutM {
                    keys: vec![key()],
                    vals: vec![vec![1]],
                },
                OpKind::PutM,
                "putm",
            ),
            (
                Request::GetFromList {
                    key: key(),
                    index: 2,
                },
                OpKind::GetFromList,
                "get_from_list",
            ),
            (Request::Delete { key: key() }, OpKind::Delete, "delete"),
        ];
        for (r, kind, name) in cases {
            assert_eq!(OpKind::of(&r), kind);
            assert_eq!(r.kind(), name);
        }
    }
}
