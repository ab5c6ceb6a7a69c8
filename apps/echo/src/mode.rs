//! The server modes compared by the benchmark: echo's own hand-written modes, and the
//! serializations every app shares ([`app_server::serialization`]).

use std::fmt;
use std::str::FromStr;

use app_server::serialization::by_name;
pub use app_server::serialization::{Cornflakes, Library, Serialization};
use cornflakes::DEFAULT_THRESHOLD;

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

/// How the echo server handles a request.
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
    /// Cornflakes, hybrid: fields at least the threshold long are zero-copy.
    Cornflakes,
    /// Cornflakes with threshold 0: every field zero-copy.
    CornflakesSg,
    /// Cornflakes with threshold `usize::MAX`: every field copied.
    CornflakesCopy,
    /// Cornflakes hybrid, but sent by building a scatter-gather array first (no
    /// serialize-and-send).
    CornflakesNoSsend,
    /// protobuf through prost.
    Protobuf,
    /// Cap'n Proto.
    Capnp,
    /// FlatBuffers.
    Flatbuffers,
}

impl Mode {
    /// Every mode, in the order the benchmark runs and reports them.
    pub const ALL: [Mode; 11] = [
        Mode::Raw,
        Mode::ZeroCopy,
        Mode::OneCopy,
        Mode::TwoCopy,
        Mode::Cornflakes,
        Mode::CornflakesSg,
        Mode::CornflakesCopy,
        Mode::CornflakesNoSsend,
        Mode::Protobuf,
        Mode::Capnp,
        Mode::Flatbuffers,
    ];

    /// The shared serialization of a mode that is one (not a hand-written mode).
    pub fn serialization(self) -> Option<Serialization> {
        let cf = Serialization::Cornflakes;
        let lib = Serialization::Library;
        Some(match self {
            Mode::Raw | Mode::ZeroCopy | Mode::OneCopy | Mode::TwoCopy => return None,
            Mode::Cornflakes => cf(Cornflakes::Hybrid),
            Mode::CornflakesSg => cf(Cornflakes::AllSg),
            Mode::CornflakesCopy => cf(Cornflakes::AllCopy),
            Mode::CornflakesNoSsend => cf(Cornflakes::NoSsend),
            Mode::Protobuf => lib(Library::Protobuf),
            Mode::Capnp => lib(Library::Capnp),
            Mode::Flatbuffers => lib(Library::Flatbuffers),
        })
    }

    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Raw => "raw",
            Mode::ZeroCopy => "zero-copy",
            Mode::OneCopy => "one-copy",
            Mode::TwoCopy => "two-copy",
            shared => shared.serialization().map_or("", Serialization::name),
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

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        by_name(s, "mode", &Mode::ALL, Mode::name)
    }
}

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
    fn thresholds() {
        assert_eq!(Mode::Cornflakes.threshold(512), 512);
        assert_eq!(Mode::CornflakesSg.threshold(512), 0);
        assert_eq!(Mode::CornflakesCopy.threshold(512), usize::MAX);
    }
}
