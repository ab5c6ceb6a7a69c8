//! The serializations the apps share: Cornflakes in one of the paper's four configurations, or
//! a copying library (`baselines`). Each app adds only its own formats (echo's hand-written
//! modes, the KV store's RESP) and maps its names onto these; their command-line names are
//! parsed and listed here once ([`by_name`], [`named!`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use cornflakes::datapath::object_to_sga;
use cornflakes::{ConnId, CornflakesObj, Datapath, Msg, SendError};

pub use baselines::Library;

/// How a Cornflakes reply is built (the arena's threshold) and handed to the datapath.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cornflakes {
    /// Hybrid: fields at least the threshold long by scatter-gather, shorter ones copied;
    /// serialize-and-send.
    Hybrid,
    /// Threshold 0: every field by scatter-gather.
    AllSg,
    /// Threshold `usize::MAX`: every field copied.
    AllCopy,
    /// Hybrid, but the reply is first turned into a scatter-gather array, then sent (no
    /// serialize-and-send; the paper's Table 5 ablation).
    NoSsend,
}

impl Cornflakes {
    /// Every configuration, in the order the benchmarks report them.
    pub const ALL: [Cornflakes; 4] = [
        Cornflakes::Hybrid,
        Cornflakes::AllSg,
        Cornflakes::AllCopy,
        Cornflakes::NoSsend,
    ];

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Cornflakes::Hybrid => "cornflakes",
            Cornflakes::AllSg => "cornflakes-sg",
            Cornflakes::AllCopy => "cornflakes-copy",
            Cornflakes::NoSsend => "cornflakes-no-ssend",
        }
    }

    /// The arena threshold of this configuration, given the hybrid one (`--threshold`).
    pub fn threshold(self, hybrid: usize) -> usize {
        match self {
            Cornflakes::Hybrid | Cornflakes::NoSsend => hybrid,
            Cornflakes::AllSg => 0,
            Cornflakes::AllCopy => usize::MAX,
        }
    }

    /// How its replies reach the datapath.
    pub fn send_path(self) -> SendPath {
        match self {
            Cornflakes::NoSsend => SendPath::SgaThenSend,
            _ => SendPath::SerializeAndSend,
        }
    }
}

/// How a Cornflakes object is handed to the datapath.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendPath {
    /// Serialize-and-send: the datapath walks the object
    /// ([`cornflakes::datapath::Transmit::send_object`]).
    SerializeAndSend,
    /// First a scatter-gather array ([`object_to_sga`]), then
    /// [`cornflakes::datapath::Transmit::send_sga`] (the ablation).
    SgaThenSend,
}

impl SendPath {
    /// Sends `obj` on `dp` this way.
    #[inline]
    pub fn send<D: Datapath, O: CornflakesObj>(
        self,
        dp: &mut D,
        conn: ConnId,
        msg: Msg,
        obj: &O,
    ) -> Result<(), SendError> {
        match self {
            SendPath::SerializeAndSend => dp.send_object(conn, msg, obj),
            SendPath::SgaThenSend => {
                let sga = object_to_sga(obj, dp.memory(), dp.max_segments().saturating_sub(1))?;
                dp.send_sga(conn, msg, &sga)
            }
        }
    }
}

/// A serialization every app speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Serialization {
    /// Cornflakes objects (generated from the app's schema) in one configuration.
    Cornflakes(Cornflakes),
    /// A copying library's own format.
    Library(Library),
}

impl Serialization {
    /// `cornflakes`: Cornflakes, hybrid, serialize-and-send.
    pub const CORNFLAKES: Serialization = Serialization::Cornflakes(Cornflakes::Hybrid);
    /// `cornflakes-sg`: Cornflakes, every field by scatter-gather.
    pub const CORNFLAKES_SG: Serialization = Serialization::Cornflakes(Cornflakes::AllSg);
    /// `cornflakes-copy`: Cornflakes, every field copied.
    pub const CORNFLAKES_COPY: Serialization = Serialization::Cornflakes(Cornflakes::AllCopy);
    /// `cornflakes-no-ssend`: Cornflakes hybrid, sent through a scatter-gather array.
    pub const CORNFLAKES_NO_SSEND: Serialization = Serialization::Cornflakes(Cornflakes::NoSsend);
    /// `protobuf`: prost.
    pub const PROTOBUF: Serialization = Serialization::Library(Library::Protobuf);
    /// `capnp`: Cap'n Proto.
    pub const CAPNP: Serialization = Serialization::Library(Library::Capnp);
    /// `flatbuffers`: FlatBuffers.
    pub const FLATBUFFERS: Serialization = Serialization::Library(Library::Flatbuffers);

    /// Every one, in the order the benchmarks report them: the Cornflakes configurations,
    /// then protobuf, Cap'n Proto and FlatBuffers.
    pub const ALL: [Serialization; 7] = [
        Serialization::CORNFLAKES,
        Serialization::CORNFLAKES_SG,
        Serialization::CORNFLAKES_COPY,
        Serialization::CORNFLAKES_NO_SSEND,
        Serialization::PROTOBUF,
        Serialization::CAPNP,
        Serialization::FLATBUFFERS,
    ];

    /// The name on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Serialization::Cornflakes(c) => c.name(),
            Serialization::Library(l) => l.name(),
        }
    }

    /// The arena threshold, given the hybrid one: a library never references a field, so its
    /// arena (if any) copies everything.
    pub fn threshold(self, hybrid: usize) -> usize {
        match self {
            Serialization::Cornflakes(c) => c.threshold(hybrid),
            Serialization::Library(_) => usize::MAX,
        }
    }

    /// The library, for a library's format.
    pub fn library(self) -> Option<Library> {
        match self {
            Serialization::Library(l) => Some(l),
            Serialization::Cornflakes(_) => None,
        }
    }

    /// The Cornflakes configuration, for Cornflakes objects.
    pub fn cornflakes(self) -> Option<Cornflakes> {
        match self {
            Serialization::Cornflakes(c) => Some(c),
            Serialization::Library(_) => None,
        }
    }
}

crate::named!(Serialization, "serialization");

/// Implements `Display` (the name) and `FromStr` (by name, through [`by_name`]) for a type
/// with `const ALL: [Self; N]` and `fn name(self) -> &'static str`: the command-line values
/// of the apps' modes and serializations. `what` names the kind in the parse error
/// (`unknown {what} "x" (one of: …)`).
#[macro_export]
macro_rules! named {
    ($ty:ty, $what:literal) => {
        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl ::std::str::FromStr for $ty {
            type Err = ::std::string::String;

            fn from_str(s: &str) -> ::std::result::Result<Self, ::std::string::String> {
                $crate::by_name(s, $what, &<$ty>::ALL, <$ty>::name)
            }
        }
    };
}

/// The one of `all` whose `name` is `s` (a command-line value); otherwise an error naming the
/// `what` and listing every name: how the apps parse their modes and serializations.
pub fn by_name<T: Copy>(
    s: &str,
    what: &str,
    all: &[T],
    name: impl Fn(T) -> &'static str,
) -> Result<T, String> {
    all.iter().copied().find(|&m| name(m) == s).ok_or_else(|| {
        let names: Vec<&str> = all.iter().map(|&m| name(m)).collect();
        format!("unknown {what} {s:?} (one of: {})", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_thresholds_follow_the_configuration() {
        for s in Serialization::ALL {
            assert_eq!(s.name().parse::<Serialization>().unwrap(), s);
        }
        assert!("resp"
            .parse::<Serialization>()
            .unwrap_err()
            .contains("one of"));
        let cf = |c| Serialization::Cornflakes(c);
        assert_eq!(cf(Cornflakes::Hybrid).threshold(300), 300);
        assert_eq!(cf(Cornflakes::NoSsend).threshold(300), 300);
        assert_eq!(cf(Cornflakes::AllSg).threshold(300), 0);
        assert_eq!(cf(Cornflakes::AllCopy).threshold(300), usize::MAX);
        assert_eq!(
            Serialization::Library(Library::Capnp).threshold(300),
            usize::MAX
        );
        assert_eq!(Cornflakes::NoSsend.send_path(), SendPath::SgaThenSend);
        assert_eq!(Cornflakes::AllSg.send_path(), SendPath::SerializeAndSend);
    }
}
