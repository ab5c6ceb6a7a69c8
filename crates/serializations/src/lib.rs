//! The serializations the apps share: Cornflakes in one of the paper's four configurations, or
//! a copying library (`baselines`). Each app adds only its own formats (echo's hand-written
//! modes, the KV store's RESP) and maps its names onto these; their command-line names are
//! parsed and listed here once ([`by_name`], [`named!`]).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use baselines::Library;
pub use cornflakes_rpc::{Cornflakes, SendPath};

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
        // The command-line values, in the order the benches run them (the apps' lists start
        // or end with these).
        let names: Vec<&str> = Serialization::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(
            names,
            [
                "cornflakes",
                "cornflakes-sg",
                "cornflakes-copy",
                "cornflakes-no-ssend",
                "protobuf",
                "capnp",
                "flatbuffers",
            ]
        );
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
    }
}
