//! A NIC with two queue pairs (`Loopback::multi_queue`): frames are steered to the queue whose
//! UDP port is their destination port, ARP and other ports to queue 0; each queue answers from
//! its own port, memory and connection table, and the single-queue end hears every queue.

use std::net::{Ipv4Addr, SocketAddrV4};

use cornflakes::datapath::{Completions, Connect, Receive, Transmit};
use cornflakes::{Msg, RxMsg};
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Loopback, LoopbackConfig};

const SERVER_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa]);
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 9000);

fn queue(port: u16) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), port)
}

#[test]
fn frames_reach_the_queue_their_destination_port_names() {
    let client = LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 0xb]), CLIENT));
    let queues = (0..2)
        .map(|q| LoopbackConfig::new(StackConfig::new(SERVER_MAC, queue(7000 + q))))
        .collect();
    let (mut c, mut qs) = Loopback::multi_queue(client, queues).unwrap();
    assert_eq!(qs.len(), 2);
    let conns = [
        c.connect(queue(7000)).unwrap(),
        c.connect(queue(7001)).unwrap(),
    ];
    let mut rx: Vec<RxMsg> = Vec::new();
    // The ARP request goes to queue 0, which answers it; queue 1 sees nothing.
    assert_eq!(qs[1].recv_burst(&mut rx).unwrap(), 0);
    assert_eq!(qs[0].recv_burst(&mut rx).unwrap(), 0);
    c.recv_burst(&mut rx).unwrap();
    assert_eq!(qs[0].stack().counters().arp_replies_sent, 1);
    assert_eq!(qs[1].stack().counters().arp_replies_sent, 0);

    // 10 messages to each port, interleaved, in one flush.
    for i in 0..20u32 {
        c.send_copy(conns[(i % 2) as usize], Msg::new(i, 1), &i.to_le_bytes())
            .unwrap();
    }
    c.flush().unwrap();
    let mut got = [Vec::new(), Vec::new()];
    // Queue 1 polls first: the NIC steers everything, queue 1 takes only its own.
    for q in [1, 0] {
        rx.clear();
        qs[q].recv_burst(&mut rx).unwrap();
        for m in &rx {
            got[q].push(m.msg.id);
            // Each queue answers on its own connection table and port.
            qs[q].send_copy(m.conn, m.msg, &m.data).unwrap();
        }
        qs[q].flush().unwrap();
    }
    assert_eq!(got[0], (0..20).step_by(2).collect::<Vec<_>>());
    assert_eq!(got[1], (1..20).step_by(2).collect::<Vec<_>>());
    assert_eq!(
        c.poll_completions(),
        20 + 1,
        "the data frames and the ARP request"
    );

    // The client hears both queues, each reply from the port it was sent to.
    rx.clear();
    while c.recv_burst(&mut rx).unwrap() > 0 {}
    assert_eq!(rx.len(), 20);
    for m in &rx {
        assert_eq!(
            m.conn,
            conns[(m.msg.id % 2) as usize],
            "reply {} from its queue",
            m.msg.id
        );
        assert_eq!(m.peer, queue(7000 + (m.msg.id % 2) as u16));
    }
    // Each queue's own transmit ring: queue 0 also sent the ARP reply.
    assert_eq!(qs[0].poll_completions(), 1 + 10);
    assert_eq!(qs[1].poll_completions(), 10);
}

#[test]
fn a_port_no_queue_owns_goes_to_queue_zero_which_counts_it() {
    let queues = (0..2)
        .map(|q| {
            let mut s = StackConfig::new(SERVER_MAC, queue(7000 + q));
            s.static_arp
                .push((*CLIENT.ip(), MacAddr([2, 0, 0, 0, 0, 0xb])));
            LoopbackConfig::new(s)
        })
        .collect();
    let mut cc = StackConfig::new(MacAddr([2, 0, 0, 0, 0, 0xb]), CLIENT);
    cc.static_arp.push((Ipv4Addr::new(10, 0, 0, 1), SERVER_MAC));
    let (mut c, mut qs) = Loopback::multi_queue(LoopbackConfig::new(cc), queues).unwrap();
    let conn = c.connect(queue(7999)).unwrap();
    c.send_copy(conn, Msg::new(1, 1), b"x").unwrap();
    c.flush().unwrap();
    let mut rx = Vec::new();
    assert_eq!(qs[1].recv_burst(&mut rx).unwrap(), 0);
    assert_eq!(qs[0].recv_burst(&mut rx).unwrap(), 0);
    assert_eq!(qs[0].stack().counters().unknown_port, 1);
    assert_eq!(qs[1].stack().counters().unknown_port, 0);
}
