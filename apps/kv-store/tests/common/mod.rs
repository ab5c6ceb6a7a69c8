//! The request script both the loopback and the AF_XDP tests run: every request type, values
//! on both sides of the hybrid threshold, empty and larger than a 1500-byte frame, missing keys
//! and bad indexes, each reply compared byte for byte.

#![allow(dead_code)]

use cornflakes::{Arena, ConnId, Datapath, Msg};
use kv_store::client::send_op;
use kv_store::{Op, OpKind, Reply, Serialization, Status};

/// A client's request side: numbers requests and sends them in `ser` on `conn`.
pub struct Requests {
    pub conn: ConnId,
    pub ser: Serialization,
    arena: Arena,
    buf: Vec<u8>,
    next_id: u32,
}

impl Requests {
    pub fn new(conn: ConnId, ser: Serialization) -> Requests {
        Requests {
            conn,
            ser,
            arena: Arena::new(),
            buf: Vec::new(),
            next_id: 1,
        }
    }

    /// Sends `op` with the next id over `dp`, flushed; returns its framing header.
    pub fn send<D: Datapath>(&mut self, dp: &mut D, op: &Op) -> Msg {
        let msg = Msg::new(self.next_id, OpKind::of(op).msg_type());
        self.next_id += 1;
        send_op(
            dp,
            self.conn,
            msg,
            self.ser,
            op,
            &mut self.arena,
            &mut self.buf,
        )
        .unwrap();
        dp.flush().unwrap();
        msg
    }
}

pub fn val(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

pub fn ok(vals: Vec<Vec<u8>>) -> Reply {
    Reply {
        status: Status::Ok,
        vals,
        statuses: Vec::new(),
    }
}

pub fn st(s: Status) -> Reply {
    Reply::status(s)
}

pub fn k(s: &str) -> String {
    s.to_owned()
}

/// Runs every request type through `call` (send `op`, return the decoded reply) against an
/// empty store speaking `ser`, and checks each reply.
pub fn every_request(ser: Serialization, call: &mut dyn FnMut(&Op) -> Reply) {
    // Sizes on both sides of the hybrid threshold, empty, and bigger than one 1500-byte frame.
    let (small, big, huge) = (val(40, 1), val(2048, 2), val(9000, 3));
    assert_eq!(
        call(&Op::Put {
            key: k("a"),
            val: small.clone()
        }),
        st(Status::Ok)
    );
    assert_eq!(
        call(&Op::Get { key: k("a") }),
        ok(vec![small.clone()]),
        "{ser}"
    );
    call(&Op::Put {
        key: k("b"),
        val: big.clone(),
    });
    call(&Op::Put {
        key: k("e"),
        val: Vec::new(),
    });
    assert_eq!(
        call(&Op::Get { key: k("b") }),
        ok(vec![big.clone()]),
        "{ser}"
    );
    assert_eq!(call(&Op::Get { key: k("e") }), ok(vec![vec![]]), "{ser}");
    assert_eq!(
        call(&Op::PutM {
            keys: vec![k("c"), k("d")],
            vals: vec![huge.clone(), small.clone()],
        }),
        st(Status::Ok)
    );
    let getm = call(&Op::GetM {
        keys: vec![k("c"), k("missing"), k("d")],
    });
    assert_eq!(getm.status, Status::NotFound, "{ser}");
    assert_eq!(
        getm.statuses,
        vec![Status::Ok, Status::NotFound, Status::Ok]
    );
    assert_eq!(
        getm.vals,
        vec![huge.clone(), vec![], small.clone()],
        "{ser}"
    );
    assert_eq!(
        call(&Op::Append {
            key: k("l"),
            val: big.clone()
        }),
        st(Status::Ok)
    );
    call(&Op::Append {
        key: k("l"),
        val: small.clone(),
    });
    assert_eq!(
        call(&Op::GetList { key: k("l") }),
        ok(vec![big.clone(), small.clone()]),
        "{ser}"
    );
    assert_eq!(
        call(&Op::GetFromList {
            key: k("l"),
            index: 1
        }),
        ok(vec![small.clone()]),
        "{ser}"
    );
    assert_eq!(
        call(&Op::GetFromList {
            key: k("l"),
            index: 2
        }),
        st(Status::BadIndex),
        "{ser}"
    );
    assert_eq!(
        call(&Op::GetFromList {
            key: k("nope"),
            index: 0
        }),
        st(Status::NotFound),
        "{ser}"
    );
    assert_eq!(call(&Op::GetList { key: k("nope") }), st(Status::NotFound));
    assert_eq!(call(&Op::Get { key: k("nope") }), st(Status::NotFound));
    assert_eq!(call(&Op::Delete { key: k("a") }), st(Status::Ok));
    assert_eq!(call(&Op::Delete { key: k("a") }), st(Status::NotFound));
    assert_eq!(call(&Op::Get { key: k("a") }), st(Status::NotFound));
}
