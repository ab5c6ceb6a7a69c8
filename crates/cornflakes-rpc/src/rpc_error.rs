//! The error reply: what a server answers to a request it will not run (a method it does not
//! have), in place of the method's reply. Its message type is [`ERROR_TYPE`] (0, which no
//! method has) and its body a Cornflakes object (`docs/wire-format.md`,
//! "Services: method numbers and error replies"):
//!
//! ```proto
//! message RpcError {
//!   uint32 code = 1;    // ErrorCode
//!   uint32 method = 2;  // the message type of the request
//! }
//! ```

use std::fmt;

use cornflakes::wire::{ObjectView, ViewLayout};
use cornflakes::DecodeError;

/// The framing header's message type of an error reply. Method numbers start at 1.
pub const ERROR_TYPE: u16 = 0;

/// Why a server refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The service has no method of the request's message type.
    UnknownMethod,
    /// The request reused the message id of an earlier, different request of the same client
    /// incarnation, for a method run exactly once: a protocol error, not run.
    IdReused,
    /// A retry of a request of a method run exactly once whose reply was too long to keep:
    /// the request ran, once; its reply cannot be sent again.
    ReplyNotKept,
    /// A code this reader does not know (a newer server).
    Other(u32),
}

impl ErrorCode {
    /// The number on the wire.
    pub fn number(self) -> u32 {
        match self {
            ErrorCode::UnknownMethod => 1,
            ErrorCode::IdReused => 2,
            ErrorCode::ReplyNotKept => 3,
            ErrorCode::Other(n) => n,
        }
    }

    /// The code numbered `n`.
    pub fn from_number(n: u32) -> ErrorCode {
        match n {
            1 => ErrorCode::UnknownMethod,
            2 => ErrorCode::IdReused,
            3 => ErrorCode::ReplyNotKept,
            n => ErrorCode::Other(n),
        }
    }
}

/// An error reply's contents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RpcError {
    /// Why.
    pub code: ErrorCode,
    /// The message type of the refused request.
    pub method: u16,
}

/// Bytes of an encoded [`RpcError`]: `W`, the bitmap and two 4-byte slots.
pub const ENCODED_LEN: usize = 16;

const LAYOUT: ViewLayout = ViewLayout {
    words: &[0],
    known: &[0b11],
    one: &[0],
    four: &[0b11],
    eight: &[0],
    max_known: 2,
};

impl RpcError {
    /// The Cornflakes encoding (both fields present).
    pub fn encode(&self) -> [u8; ENCODED_LEN] {
        let mut out = [0u8; ENCODED_LEN];
        out[0..4].copy_from_slice(&1u32.to_le_bytes());
        out[4..8].copy_from_slice(&0b11u32.to_le_bytes());
        out[8..12].copy_from_slice(&self.code.number().to_le_bytes());
        out[12..16].copy_from_slice(&u32::from(self.method).to_le_bytes());
        out
    }

    /// Reads an error reply's body (checked as any object is; an absent field reads 0).
    pub fn decode(buf: &[u8]) -> Result<RpcError, DecodeError> {
        let v = ObjectView::open(buf, 0, 0, &LAYOUT)?;
        let code = if v.has(1) {
            v.scalar::<u32>(v.slot(&LAYOUT, 0, 0))
        } else {
            0
        };
        let method = if v.has(2) {
            v.scalar::<u32>(v.slot(&LAYOUT, 0, 0b1))
        } else {
            0
        };
        Ok(RpcError {
            code: ErrorCode::from_number(code),
            // A type is 16 bits; a larger number names no method.
            method: u16::try_from(method).unwrap_or(u16::MAX),
        })
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.code {
            ErrorCode::UnknownMethod => write!(f, "the server has no method {}", self.method),
            ErrorCode::IdReused => write!(
                f,
                "method {}: the message id was already used by another request",
                self.method
            ),
            ErrorCode::ReplyNotKept => write!(
                f,
                "method {}: the request ran once, but its reply was too long to keep for a retry",
                self.method
            ),
            ErrorCode::Other(n) => write!(f, "method {}: error code {n}", self.method),
        }
    }
}

impl std::error::Error for RpcError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_reply_round_trips_and_bad_bytes_are_refused() {
        for e in [
            RpcError {
                code: ErrorCode::UnknownMethod,
                method: 9,
            },
            RpcError {
                code: ErrorCode::IdReused,
                method: 65535,
            },
            RpcError {
                code: ErrorCode::ReplyNotKept,
                method: 7,
            },
            RpcError {
                code: ErrorCode::Other(77),
                method: 1,
            },
        ] {
            assert_eq!(RpcError::decode(&e.encode()).unwrap(), e);
        }
        // The example of docs/wire-format.md.
        let unknown = RpcError {
            code: ErrorCode::UnknownMethod,
            method: 99,
        };
        assert_eq!(
            unknown.encode(),
            [1, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 99, 0, 0, 0]
        );
        let good = RpcError {
            code: ErrorCode::UnknownMethod,
            method: 3,
        }
        .encode();
        // Truncated slots, nothing at all, more bitmap words than bytes.
        assert!(RpcError::decode(&good[..12]).is_err());
        assert!(RpcError::decode(&[]).is_err());
        let mut words = good;
        words[0] = 9;
        assert!(RpcError::decode(&words).is_err());
        // Only the code present: the method reads 0.
        let mut code_only = [0u8; 12];
        code_only[0] = 1;
        code_only[4] = 0b1;
        code_only[8] = 1;
        assert_eq!(
            RpcError::decode(&code_only).unwrap(),
            RpcError {
                code: ErrorCode::UnknownMethod,
                method: 0
            }
        );
    }
}
