//! `Any`: a message of any type, packed with its type URL and unpacked by it.

use std::fmt;

use cornflakes::{Arena, CFBytes, CFString, CornflakesObj, DecodeError, DecodeObj};

use crate::Any;

/// The prefix of the type URLs `Any::pack` writes, as protobuf's libraries do.
pub const TYPE_URL_PREFIX: &str = "type.googleapis.com/";

/// Why [`Any::unpack`] failed.
#[derive(Debug)]
pub enum AnyError {
    /// The `Any` holds another type (its type URL is given).
    WrongType { expected: String, found: String },
    /// The type matches, the bytes do not decode as it.
    Decode(DecodeError),
}

impl fmt::Display for AnyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnyError::WrongType { expected, found } => {
                write!(f, "the Any holds `{found}`, not `{expected}`")
            }
            AnyError::Decode(e) => write!(f, "the Any's value does not decode: {e}"),
        }
    }
}

impl std::error::Error for AnyError {}

impl<'a> Any<'a> {
    /// `msg` (of the proto type `full_name`, `pkg.Message`) packed: type URL
    /// `type.googleapis.com/pkg.Message`, value its encoding (copied into `arena`).
    pub fn pack<M: CornflakesObj>(full_name: &str, msg: &M, arena: &'a Arena) -> Self {
        let mut any = Any::new_in(arena);
        let url = format!("{TYPE_URL_PREFIX}{}", full_name.trim_start_matches('.'));
        any.set_type_url(CFString::new(&url, arena));
        any.set_value(CFBytes::new(&msg.serialize_to_vec(), arena));
        any
    }

    /// The full name of the type held: the type URL after its last `/`.
    pub fn type_name(&self) -> &str {
        let url = self.get_type_url().as_str().unwrap_or("");
        url.rsplit('/').next().unwrap_or(url)
    }

    /// Whether the `Any` holds proto type `full_name`.
    pub fn is(&self, full_name: &str) -> bool {
        self.type_name() == full_name.trim_start_matches('.')
    }

    /// The message of proto type `full_name` held, decoded in `arena` (values borrow the
    /// `Any`'s bytes); refused when the `Any` holds another type.
    pub fn unpack<M: DecodeObj<'a>>(
        &self,
        full_name: &str,
        arena: &'a Arena,
    ) -> Result<M, AnyError> {
        if !self.is(full_name) {
            return Err(AnyError::WrongType {
                expected: full_name.trim_start_matches('.').to_string(),
                found: self.type_name().to_string(),
            });
        }
        M::deserialize_bytes(self.get_value().ptr().as_bytes(), arena).map_err(AnyError::Decode)
    }
}
