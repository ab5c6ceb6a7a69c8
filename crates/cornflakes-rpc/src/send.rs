//! How a server's Cornflakes replies are built and handed to the datapath: the paper's four
//! configurations ([`Cornflakes`]: the arena threshold and the [`SendPath`]).

use cornflakes::datapath::object_to_sga;
use cornflakes::{ConnId, CornflakesObj, Datapath, Msg, SendError};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_and_send_paths_follow_the_configuration() {
        assert_eq!(Cornflakes::Hybrid.threshold(300), 300);
        assert_eq!(Cornflakes::NoSsend.threshold(300), 300);
        assert_eq!(Cornflakes::AllSg.threshold(300), 0);
        assert_eq!(Cornflakes::AllCopy.threshold(300), usize::MAX);
        assert_eq!(Cornflakes::NoSsend.send_path(), SendPath::SgaThenSend);
        assert_eq!(Cornflakes::AllSg.send_path(), SendPath::SerializeAndSend);
    }
}
