//! What a user crate looks like: the same schema as Cornflakes objects and as prost messages,
//! and a serialize-and-send of its own into a transmit buffer with its own framing.

// Generated code must not warn, even in a private module where most accessors are unused.
#![deny(warnings)]

/// The Cornflakes objects of `proto/shop.proto` (private: nothing here uses most accessors).
mod cf {
    cornflakes::include_schema!("shop");
}

/// The prost messages of the same file, from prost-build's `shop.rs` in the same `$OUT_DIR`.
pub mod pb {
    include!(concat!(env!("OUT_DIR"), "/shop.rs"));
}

pub use cf::{Item, Kind, Price};

/// The Cornflakes objects of `proto/second.proto` (a map, a oneof, a custom option).
pub mod second {
    cornflakes::include_schema!("second");
}

/// The prost messages of `proto/second.proto`.
pub mod pb_second {
    include!(concat!(env!("OUT_DIR"), "/second.rs"));
}

/// The service of `proto/greet.proto`: messages, the `Greeter` trait, its dispatcher
/// (`GreeterServer`) and client (`GreeterClient`).
pub mod greet {
    cornflakes::include_schema!("greet");
}

/// The crate's `greet.Greeter`: greets each visitor with the photo it sent, and counts visits.
#[derive(Default)]
pub struct Greeter {
    visits: u32,
}

impl greet::Greeter for Greeter {
    fn greet<'r, D: cornflakes::Datapath>(
        &'r mut self,
        req: greet::HelloView<'r>,
        reply: cornflakes_rpc::Reply<'r, D, greet::Greeting<'r>>,
    ) -> Result<cornflakes_rpc::Replied, cornflakes_rpc::Unanswered> {
        self.visits += 1;
        let arena = reply.arena();
        let text = arena
            .bump()
            .alloc_str(&format!("hello, {}", req.get_name()?));
        let mut g = greet::Greeting::new_in(arena);
        g.set_text(cornflakes::CFString::new_ref(text, arena));
        g.set_photo(reply.bytes(req.get_photo()?));
        g.set_visits(self.visits);
        reply.send(&g)
    }

    fn visits<'r, D: cornflakes::Datapath>(
        &'r mut self,
        _req: greet::HelloView<'r>,
        reply: cornflakes_rpc::Reply<'r, D, greet::Greeting<'r>>,
    ) -> Result<cornflakes_rpc::Replied, cornflakes_rpc::Unanswered> {
        let mut g = greet::Greeting::new_in(reply.arena());
        g.set_visits(self.visits);
        reply.send(&g)
    }
}

use cornflakes::wire::BufferTooSmall;
use cornflakes::{CornflakesObj, RcBuf, SendPlan};

/// Length of this crate's own framing header: a magic and the message length.
pub const FRAME_HEADER: usize = 8;
const MAGIC: u32 = 0xC0FF_EE01;

/// A transmit "descriptor" of this crate's own NIC: a buffer the device reads.
pub enum Desc {
    /// The first buffer: framing header, object header and copy areas.
    Head(Vec<u8>),
    /// A zero-copy value, kept alive until the device is done.
    ZeroCopy(RcBuf),
}

/// Serialize-and-send into a transmit buffer of `tx_room` bytes with at most `max_desc`
/// descriptors: the framing header and the object's head in the first, one per zero-copy value.
pub fn send<O: CornflakesObj>(
    obj: &O,
    tx_room: usize,
    max_desc: usize,
) -> Result<Vec<Desc>, BufferTooSmall> {
    let plan = SendPlan::new(obj, max_desc - 1);
    let mut tx = vec![0u8; tx_room];
    if tx.len() < FRAME_HEADER {
        return Err(BufferTooSmall {
            needed: FRAME_HEADER + plan.head_len(),
            available: tx.len(),
        });
    }
    tx[..4].copy_from_slice(&MAGIC.to_le_bytes());
    tx[4..8].copy_from_slice(&(plan.total_len() as u32).to_le_bytes());
    let head = plan.write_head(&mut tx[FRAME_HEADER..])?;
    tx.truncate(FRAME_HEADER + head);
    let mut out = vec![Desc::Head(tx)];
    plan.for_each_zero_copy(|b| out.push(Desc::ZeroCopy(b.to_rcbuf())));
    Ok(out)
}

/// What the peer receives: the descriptors' bytes in order, without the framing header.
pub fn receive(descs: &[Desc]) -> Vec<u8> {
    let mut wire = Vec::new();
    for d in descs {
        match d {
            Desc::Head(b) => {
                assert_eq!(b[..4], MAGIC.to_le_bytes());
                wire.extend_from_slice(&b[FRAME_HEADER..]);
            }
            Desc::ZeroCopy(b) => wire.extend_from_slice(b),
        }
    }
    wire
}
