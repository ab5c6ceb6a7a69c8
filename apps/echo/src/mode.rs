//! The server modes compared by the benchmark: echo's own hand-written modes, and the
//! serializations every app shares ([`serializations`]).

use cornflakes::DEFAULT_THRESHOLD;
pub use serializations::{Cornflakes, Library, Serialization};

/// What a mode puts on the wire, which is what the client must send and check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// The hand-written format (`crate::manual`).
    Manual,
    /// Cornflakes objects (`schemas/echo.proto`) in one configuration.
    Cornflakes(Cornflakes),
    /// A library's own format.
    Library(Library),
}

/// How the echo server handles a request: one of echo's own hand-written modes, or a
/// serialization every app shares (whose names, parsing and listing live in
/// [`serializations`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// No serialization: the received payload goes straight back (one scatter-gather entry).
    Raw,
    /// Hand-written: parse, then send a new header plus a reference to each received field.
    ZeroCopy,
    /// Hand-written: parse, then copy header and fields into one transmit buffer.
    OneCopy,
    /// Hand-written: parse, copy into an intermediate buffer, then into the transmit buffer.
    TwoCopy,
    /// A shared serialization: Cornflakes in one configuration, or a copying library.
    Shared(Serialization),
}

impl Mode {
    /// Echo's own modes, in the order the benchmark runs and reports them (before the shared
    /// ones).
    pub const OWN: [Mode; 4] = [Mode::Raw, Mode::ZeroCopy, Mode::OneCopy, Mode::TwoCopy];

    /// Every mode, in the order the benchmark runs and reports them: echo's own, then
    /// [`Serialization::ALL`].
    pub const ALL: [Mode; 11] = {
        let mut all = [Mode::Raw; 11];
        let mut i = 0;
        while i < Mode::OWN.len() {
            all[i] = Mode::OWN[i];
            i += 1;
        }
        let mut j = 0;
        while j < Serialization::ALL.len() {
            all[i + j] = Mode::Shared(Serialization::ALL[j]);
            j += 1;
        }
        all
    };

    /// The shared serialization of a mode that is one (not a hand-written mode).
    pub fn serialization(self) -> Option<Serialization> {
        match self {
            Mode::Shared(s) => Some(s),
            Mode::Raw | Mode::ZeroCopy | Mode::OneCopy | Mode::TwoCopy => None,
        }
    }

    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Raw => "raw",
            Mode::ZeroCopy => "zero-copy",
            Mode::OneCopy => "one-copy",
            Mode::TwoCopy => "two-copy",
            Mode::Shared(s) => s.name(),
        }
    }

    /// What this mode's messages look like on the wire.
    pub fn format(self) -> Format {
        match self.serialization() {
            None => Format::Manual,
            Some(Serialization::Cornflakes(c)) => Format::Cornflakes(c),
            Some(Serialization::Library(l)) => Format::Library(l),
        }
    }

    /// The Cornflakes zero-copy threshold this mode uses, given the `--threshold` setting.
    pub fn threshold(self, hybrid: usize) -> usize {
        match self.format() {
            Format::Cornflakes(c) => c.threshold(hybrid),
            _ => hybrid,
        }
    }
}

impl From<Serialization> for Mode {
    fn from(s: Serialization) -> Mode {
        Mode::Shared(s)
    }
}

serializations::named!(Mode, "mode");

/// The default hybrid threshold (512 bytes, as in the paper).
pub const DEFAULT_HYBRID_THRESHOLD: usize = DEFAULT_THRESHOLD;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Mode::ALL {
            assert_eq!(m.name().parse::<Mode>(), Ok(m));
        }
        assert!("cornflake".parse::<Mode>().is_err());
    }

    #[test]
    fn the_list_is_echos_own_then_the_shared_ones_in_order() {
        let names: Vec<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
        // The shared ones' names are pinned in the serializations crate.
        let shared = Serialization::ALL.map(Serialization::name);
        assert_eq!(names[..4], ["raw", "zero-copy", "one-copy", "two-copy"]);
        assert_eq!(names[4..], shared);
        let err = "cornflake".parse::<Mode>().unwrap_err();
        assert_eq!(
            err,
            "unknown mode \"cornflake\" (one of: raw, zero-copy, one-copy, two-copy, cornflakes, \
             cornflakes-sg, cornflakes-copy, cornflakes-no-ssend, protobuf, capnp, flatbuffers)"
        );
    }

    #[test]
    fn thresholds() {
        let m = |s| Mode::Shared(s);
        assert_eq!(m(Serialization::CORNFLAKES).threshold(512), 512);
        assert_eq!(m(Serialization::CORNFLAKES_SG).threshold(512), 0);
        assert_eq!(m(Serialization::CORNFLAKES_COPY).threshold(512), usize::MAX);
        assert_eq!(Mode::TwoCopy.threshold(512), 512);
    }
}
