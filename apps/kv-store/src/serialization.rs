//! The serializations one server binary speaks (paper §6.1.3, §6.2): the ones every app
//! shares ([`serializations`]) and Redis's RESP.

pub use serializations::Serialization as Shared;
use serializations::{Cornflakes, Library};

/// How requests and replies are encoded, and how replies reach the NIC: a serialization every
/// app shares (whose names, parsing and listing live in [`serializations`]), or the
/// KV store's own RESP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Serialization {
    /// Cornflakes in one configuration (`schemas/kv.proto`), or a copying library (protobuf
    /// serialized straight into one pinned transmit buffer; Cap'n Proto's message written into
    /// one; FlatBuffers' one contiguous buffer copied into one).
    Shared(Shared),
    /// Redis's wire format (RESP2), the application-specific baseline (§6.2.2): the reply is
    /// written (copied) into one pinned transmit buffer.
    Resp,
}

impl Serialization {
    /// Every serialization, in the order the benchmark runs and reports them: the shared ones
    /// ([`Shared::ALL`]), then RESP.
    pub const ALL: [Serialization; 8] = {
        let mut all = [Serialization::Resp; 8];
        let mut i = 0;
        while i < Shared::ALL.len() {
            all[i] = Serialization::Shared(Shared::ALL[i]);
            i += 1;
        }
        all
    };

    /// The serialization every app shares, for all but RESP (the KV store's own format).
    pub fn shared(self) -> Option<Shared> {
        match self {
            Serialization::Shared(s) => Some(s),
            Serialization::Resp => None,
        }
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

impl From<Shared> for Serialization {
    fn from(s: Shared) -> Serialization {
        Serialization::Shared(s)
    }
}

serializations::named!(Serialization, "serialization");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_thresholds_follow_the_mode() {
        for s in Serialization::ALL {
            assert_eq!(s.name().parse::<Serialization>().unwrap(), s);
        }
        let names: Vec<&str> = Serialization::ALL.iter().map(|s| s.name()).collect();
        // The shared ones' names are pinned in the serializations crate.
        let (last, shared) = names.split_last().unwrap();
        assert_eq!(
            (shared, *last),
            (&Shared::ALL.map(Shared::name)[..], "resp")
        );
        assert_eq!(
            "nope".parse::<Serialization>().unwrap_err(),
            "unknown serialization \"nope\" (one of: cornflakes, cornflakes-sg, cornflakes-copy, \
             cornflakes-no-ssend, protobuf, capnp, flatbuffers, resp)"
        );
        let s = Serialization::Shared;
        assert_eq!(s(Shared::CAPNP).library(), Some(baselines::Library::Capnp));
        assert!(Serialization::Resp.library().is_none() && !Serialization::Resp.is_cornflakes());
        assert_eq!(s(Shared::CORNFLAKES).threshold(300), 300);
        assert_eq!(s(Shared::CORNFLAKES_SG).threshold(300), 0);
        assert_eq!(s(Shared::CORNFLAKES_COPY).threshold(300), usize::MAX);
        assert_eq!(Serialization::Resp.threshold(300), usize::MAX);
    }
}
