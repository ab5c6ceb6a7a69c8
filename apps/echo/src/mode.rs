//! The server modes compared by the benchmark.

use std::fmt;
use std::str::FromStr;

use cornflakes::DEFAULT_THRESHOLD;

/// A copying serialization library (crate `baselines`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lib {
    /// Protocol Buffers (prost).
    Protobuf,
    /// Cap'n Proto.
    Capnp,
    /// FlatBuffers.
    Flatbuffers,
}

/// What a mode puts on the wire, which is what the client must send and check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// The hand-written format (`crate::manual`).
    Manual,
    /// Cornflakes objects (`schemas/echo.proto`).
    Cornflakes,
    /// A library's own format.
    Library(Lib),
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

    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Raw => "raw",
            Mode::ZeroCopy => "zero-copy",
            Mode::OneCopy => "one-copy",
            Mode::TwoCopy => "two-copy",
            Mode::Cornflakes => "cornflakes",
            Mode::CornflakesSg => "cornflakes-sg",
            Mode::CornflakesCopy => "cornflakes-copy",
            Mode::CornflakesNoSsend => "cornflakes-no-ssend",
            Mode::Protobuf => "protobuf",
            Mode::Capnp => "capnp",
            Mode::Flatbuffers => "flatbuffers",
        }
    }

    /// What this mode's messages look like on the wire.
    pub fn format(self) -> Format {
        match self {
            Mode::Raw | Mode::ZeroCopy | Mode::OneCopy | Mode::TwoCopy => Format::Manual,
            Mode::Cornflakes
            | Mode::CornflakesSg
            | Mode::CornflakesCopy
            | Mode::CornflakesNoSsend => Format::Cornflakes,
            Mode::Protobuf => Format::Library(Lib::Protobuf),
            Mode::Capnp => Format::Library(Lib::Capnp),
            Mode::Flatbuffers => Format::Library(Lib::Flatbuffers),
        }
    }

    /// The Cornflakes zero-copy threshold this mode uses, given the `--threshold` setting.
    pub fn threshold(self, hybrid: usize) -> usize {
        match self {
            Mode::CornflakesSg => 0,
            Mode::CornflakesCopy => usize::MAX,
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
        Mode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Mode::ALL.iter().map(|m| m.name()).collect();
                format!("unknown mode {s:?}; expected one of {}", names.join(", "))
            })
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
