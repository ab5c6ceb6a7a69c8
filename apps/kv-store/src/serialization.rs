//! The serializations one server binary speaks (paper §6.1.3, §6.2): the ones every app
//! shares ([`app_server::serialization`]) and Redis's RESP.

use std::fmt;
use std::str::FromStr;

use app_server::serialization::{by_name, Cornflakes, Library, Serialization as Shared};

/// How requests and replies are encoded, and how replies reach the NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Serialization {
    /// Cornflakes, hybrid: values at least the threshold long by scatter-gather, shorter ones
    /// copied; serialize-and-send.
    Cornflakes,
    /// Cornflakes with threshold 0: every value by scatter-gather.
    CornflakesSg,
    /// Cornflakes with an infinite threshold: every value copied.
    CornflakesCopy,
    /// Cornflakes hybrid, but the reply is first turned into a scatter-gather array, then sent
    /// (no serialize-and-send; Table 5).
    CornflakesNoSsend,
    /// protobuf (prost), serialized straight into one pinned transmit buffer.
    Protobuf,
    /// Cap'n Proto, its message (segment table and segments) written into one pinned transmit
    /// buffer.
    Capnp,
    /// FlatBuffers, its one contiguous buffer copied into a pinned transmit buffer.
    Flatbuffers,
    /// Redis's wire format (RESP2), the application-specific baseline (§6.2.2): the reply is
    /// written (copied) into one pinned transmit buffer.
    Resp,
}

impl Serialization {
    /// Every serialization, in the order the benchmark runs and reports them.
    pub const ALL: [Serialization; 8] = [
        Serialization::Cornflakes,
        Serialization::CornflakesSg,
        Serialization::CornflakesCopy,
        Serialization::CornflakesNoSsend,
        Serialization::Protobuf,
        Serialization::Capnp,
        Serialization::Flatbuffers,
        Serialization::Resp,
    ];

    /// The serialization every app shares, for all but RESP (the KV store's own format).
    pub fn shared(self) -> Option<Shared> {
        let cf = Shared::Cornflakes;
        let lib = Shared::Library;
        Some(match self {
            Serialization::Cornflakes => cf(Cornflakes::Hybrid),
            Serialization::CornflakesSg => cf(Cornflakes::AllSg),
            Serialization::CornflakesCopy => cf(Cornflakes::AllCopy),
            Serialization::CornflakesNoSsend => cf(Cornflakes::NoSsend),
            Serialization::Protobuf => lib(Library::Protobuf),
            Serialization::Capnp => lib(Library::Capnp),
            Serialization::Flatbuffers => lib(Library::Flatbuffers),
            Serialization::Resp => return None,
        })
    }

    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        self.shared().map_or("resp", Shared::name)
    }

    /// The copying library of the protobuf, Cap'n Proto and FlatBuffers serializations.
    pub fn library(self) -> Option<Library> {
        self.shared().and_then(Shared::library)
    }

    /// The Cornflakes configuration, when the wire format is Cornflakes objects
    /// (`schemas/kv.proto`).
    pub fn cornflakes(self) -> Option<Cornflakes> {
        self.shared().and_then(Shared::cornflakes)
    }

    /// Whether the wire format is Cornflakes objects (`schemas/kv.proto`).
    pub fn is_cornflakes(self) -> bool {
        self.cornflakes().is_some()
    }

    /// The threshold the server's arena uses, given the `--threshold` flag.
    pub fn threshold(self, hybrid: usize) -> usize {
        self.shared().map_or(usize::MAX, |s| s.threshold(hybrid))
    }
}

impl fmt::Display for Serialization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Serialization {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        by_name(s, "serialization", &Serialization::ALL, Serialization::name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_thresholds_follow_the_mode() {
        for s in Serialization::ALL {
            assert_eq!(s.name().parse::<Serialization>().unwrap(), s);
        }
        assert!("nope"
            .parse::<Serialization>()
            .unwrap_err()
            .contains("one of"));
        assert_eq!(
            Serialization::Capnp.library(),
            Some(baselines::Library::Capnp)
        );
        assert!(Serialization::Resp.library().is_none() && !Serialization::Resp.is_cornflakes());
        assert_eq!(Serialization::Cornflakes.threshold(300), 300);
        assert_eq!(Serialization::CornflakesSg.threshold(300), 0);
        assert_eq!(Serialization::CornflakesCopy.threshold(300), usize::MAX);
    }
}
