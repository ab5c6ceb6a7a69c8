//! The repository README's library example, compiled and run: a reply built from the handles
//! of stored pinned values and sent by serialize-and-send over the in-process loopback NIC.
//! The code between the markers is the README's `rust` block, line for line (checked below),
//! so the README cannot drift from the API.

use std::error::Error;
use std::net::{Ipv4Addr, SocketAddrV4};

use cornflakes::datapath::{Completions, Connect, Receive};
use cornflakes::ConnId;
use cornflakes_codegen_tests::kv;
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};

const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000);
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000);

/// A server and a client datapath on the loopback NIC, the server's connection to the client
/// with its address resolved.
fn pair() -> (Loopback, Loopback, ConnId) {
    let cfg =
        |mac, addr| LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, mac]), addr));
    let (mut server, mut client) = Loopback::pair(cfg(1, SERVER), cfg(2, CLIENT)).unwrap();
    let conn = server.connect(CLIENT).unwrap();
    // Address resolution: the client answers the server's ARP request.
    let mut rx = Vec::new();
    client.recv_burst(&mut rx).unwrap();
    server.recv_burst(&mut rx).unwrap();
    assert!(rx.is_empty());
    (server, client, conn)
}

#[test]
fn the_readme_example_sends_the_long_value_by_reference_and_the_short_one_copied(
) -> Result<(), Box<dyn Error>> {
    let (mut dp, mut client, conn) = pair();
    // README begin
    use cornflakes::datapath::{DatapathMemory, Transmit};
    use cornflakes::{Arena, Msg};
    use kv::{GetMResp, KvMethod}; // generated from schemas/kv.proto by cornflakes-codegen

    // A store keeps its values in the datapath's pinned memory, as `RcBuf` handles.
    let stored = [
        dp.memory().alloc_copy(&[7u8; 1024])?,
        dp.memory().alloc_copy(b"ada")?,
    ];

    // Per request: a reply built from the handles. Each value is decided as it is added: at
    // least the threshold (512 B) long, it is referenced; shorter, it is copied once, into the
    // packet at send time. Building copies nothing and touches no reference count.
    let arena = Arena::with_memory(dp.memory());
    let mut reply = GetMResp::new_in(&arena);
    reply.set_id(1);
    for v in &stored {
        reply.get_mut_vals().append_rcbuf_ref(v, &arena);
    }

    // Serialize-and-send: headers and short values go into one transmit buffer, the 1 KiB
    // value is its own descriptor, held by the datapath until the NIC is done with it.
    dp.send_object(conn, Msg::new(1, KvMethod::GetM.id()), &reply)?;
    dp.flush()?;
    // README end

    // The long value went by reference: the datapath holds a count until the completion; the
    // short one was copied and its handle was never counted.
    assert_eq!((stored[0].ref_count(), stored[1].ref_count()), (2, 1));
    // The client reads the reply in place, each field checked as it is read.
    let mut rx = Vec::new();
    while rx.is_empty() {
        client.recv_burst(&mut rx)?;
    }
    assert_eq!(rx.len(), 1);
    assert_eq!(rx[0].msg.ty, KvMethod::GetM.id());
    let got = GetMResp::view_rcbuf(&rx[0].data)?;
    let vals = got.get_vals()?;
    assert_eq!(got.get_id(), 1);
    assert_eq!(vals.len(), 2);
    assert_eq!(vals.get(0).unwrap()?, &[7u8; 1024][..]);
    assert_eq!(vals.get(1).unwrap()?, b"ada");
    drop((rx, reply));
    dp.poll_completions();
    assert_eq!(dp.in_flight(), 0);
    assert_eq!(stored[0].ref_count(), 1);
    Ok(())
}

/// The README's `rust` block is the code between this file's markers.
#[test]
fn the_readme_shows_this_example() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let this =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/readme.rs")).unwrap();
    let block: Vec<&str> = readme
        .split("```rust\n")
        .nth(1)
        .expect("a rust block in README.md")
        .split("\n```")
        .next()
        .unwrap()
        .lines()
        .collect();
    // The markers, spelled so that these lines do not contain them.
    let (begin, end) = (
        concat!("// README ", "begin\n"),
        concat!("// README ", "end\n"),
    );
    let begin = this.find(begin).unwrap() + begin.len();
    let end = begin + this[begin..].find(end).unwrap();
    let marked: Vec<&str> = this[begin..end]
        .trim_end()
        .lines()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect();
    assert_eq!(
        block, marked,
        "README.md's example differs from tests/readme.rs"
    );
}
