//! Every acknowledged write applied exactly once, under loss and duplication: `kv faults`
//! and `tests/exactly_once.rs`.
//!
//! A server and a retrying client ([`crate::call::Caller`]) on the in-process loopback NIC,
//! whose wire loses and duplicates frames in both directions ([`datapath_loopback::Faults`],
//! 5 % and 1 % by default). The client runs a seeded mixed workload of writes — appends of
//! unique tokens, puts of unique tokens, and put-then-delete cycles — then reads every key
//! back (over the same lossy wire, retrying) and checks:
//!
//! - every acknowledged append's token is in its list exactly once, and no token (acked or
//!   not) appears twice;
//! - every put key holds its last acknowledged token, or a token of a later put that went
//!   unanswered (which may or may not have run);
//! - every acknowledged delete answered `OK` (its key had been put), and a key whose last
//!   acknowledged write is a delete is gone.
//!
//! An acked write whose effect is missing is *lost*; one that took effect twice (a token
//! twice in a list, a delete answered `NOT_FOUND` because its retry ran after it) is
//! *applied twice*. Both must be 0. With the retry table off (`--dedup-window 0`) the same
//! run shows the writes a retry applies twice.

use std::collections::HashMap;
use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};

use cornflakes::datapath::{Connect, Receive};
use cornflakes_stack::{MacAddr, StackConfig};
use datapath_loopback::{Faults, Loopback, LoopbackConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::call::{CallStats, Caller, RetryPolicy};
use crate::ops::{Op, Status};
use crate::serialization::Serialization;
use crate::server::{memory_config, ServerConfig};
use crate::store::StoreConfig;

/// One run's settings.
#[derive(Clone, Debug)]
pub struct FaultConfig {
    /// The serialization.
    pub serialization: Serialization,
    /// Probability that a frame is lost, each direction.
    pub loss: f64,
    /// Probability that a frame arrives twice, each direction.
    pub duplicate: f64,
    /// Seed of the workload and of the wire's faults.
    pub seed: u64,
    /// Writes in the workload.
    pub writes: usize,
    /// Keys of each kind (append lists, put keys, delete keys).
    pub keys: usize,
    /// Write outcomes the server remembers ([`crate::store::Store::once`]); 0 turns it off.
    pub dedup_window: usize,
    /// The client's retries.
    pub retry: RetryPolicy,
}

impl FaultConfig {
    /// 5 % loss and 1 % duplicates both ways, 3 000 writes over 3 × 16 keys, the server's
    /// default retry table.
    pub fn new(serialization: Serialization) -> FaultConfig {
        FaultConfig {
            serialization,
            loss: 0.05,
            duplicate: 0.01,
            seed: 24,
            writes: 3000,
            keys: 16,
            dedup_window: crate::store::DEFAULT_DEDUP_WINDOW,
            retry: RetryPolicy::default(),
        }
    }
}

/// What a run found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultReport {
    /// The serialization.
    pub serialization: String,
    /// Writes sent.
    pub writes: u64,
    /// Writes acknowledged.
    pub acked: u64,
    /// Writes given up on (no reply after every try: may or may not have run).
    pub unacked: u64,
    /// Acknowledged writes whose effect is missing at the read-back. Must be 0.
    pub lost: u64,
    /// Writes that took effect twice. Must be 0.
    pub applied_twice: u64,
    /// Requests the client sent again.
    pub retries: u64,
    /// Retries the server answered from its table instead of running them.
    pub retries_answered: u64,
    /// Writes the server refused as reusing an id with other bytes. Must be 0: the client
    /// never reuses an id, so one here means a retry was taken for another request.
    pub refused: u64,
    /// Frames the wire lost (both directions).
    pub frames_lost: u64,
    /// Frames the wire duplicated (both directions).
    pub frames_duplicated: u64,
    /// Keys read back.
    pub keys_checked: u64,
}

impl FaultReport {
    /// Whether every acknowledged write applied exactly once (and no write was refused).
    pub fn exactly_once(&self) -> bool {
        self.lost == 0 && self.applied_twice == 0 && self.refused == 0
    }

    /// The table's header row.
    pub fn header() -> &'static str {
        "| serialization | writes | acked | unacked | lost | applied twice | retries | retries answered | frames lost | frames duplicated | keys checked |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    }
}

impl fmt::Display for FaultReport {
    /// One row of the table.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            self.serialization,
            self.writes,
            self.acked,
            self.unacked,
            self.lost,
            self.applied_twice,
            self.retries,
            self.retries_answered,
            self.frames_lost,
            self.frames_duplicated,
            self.keys_checked
        )
    }
}

/// The state a put key or delete key may be in: its last acknowledged state and the tokens
/// of later unanswered puts (which may have run). `None`: absent.
#[derive(Default)]
struct KeyState {
    acked: Option<Option<Vec<u8>>>,
    maybe: Vec<Option<Vec<u8>>>,
}

impl KeyState {
    fn ack(&mut self, v: Option<Vec<u8>>) {
        self.acked = Some(v);
        self.maybe.clear();
    }

    fn allows(&self, v: &Option<Vec<u8>>) -> bool {
        self.acked.as_ref().is_none_or(|a| a == v) || self.maybe.contains(v)
    }
}

const SERVER: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 7000);
const CLIENT: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000);

/// Runs the workload under faults and checks the read-back.
pub fn run(cfg: &FaultConfig) -> Result<FaultReport, String> {
    let faults = |salt: u64| Faults {
        loss: cfg.loss,
        duplicate: cfg.duplicate,
        seed: cfg.seed ^ salt,
    };
    let mut a = LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 1]), SERVER));
    a.memory = memory_config(16 * 1024, 1 << 28);
    a.faults = faults(0x5e);
    let mut b = LoopbackConfig::new(StackConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), CLIENT));
    b.memory = memory_config(16 * 1024, 1 << 28);
    b.faults = faults(0xc1);
    let (a, mut b) = Loopback::pair(a, b).map_err(|e| format!("loopback NICs: {e}"))?;
    let mut server = crate::server::new(
        a,
        ServerConfig {
            store: StoreConfig {
                dedup_window: cfg.dedup_window,
                ..StoreConfig::default()
            },
            ..ServerConfig::new(cfg.serialization)
        },
    );
    let conn = b.connect(SERVER).map_err(|e| format!("connect: {e}"))?;
    server.poll(); // ARP (never lost)
    let mut rx = Vec::new();
    b.recv_burst(&mut rx).map_err(|e| format!("receive: {e}"))?;
    let mut client = Caller::new(b, conn, cfg.serialization, cfg.retry);
    let mut wait = || {
        server.poll();
    };

    let mut rng = SmallRng::seed_from_u64(cfg.seed);
    let mut r = FaultReport {
        serialization: cfg.serialization.to_string(),
        ..FaultReport::default()
    };
    let n = cfg.keys.max(1);
    let key = |kind: &str, i: usize| format!("{kind}{i}");
    // Append keys: tokens acked / sent.
    let mut appended: HashMap<Vec<u8>, bool> = HashMap::new();
    let mut puts: Vec<KeyState> = (0..n).map(|_| KeyState::default()).collect();
    // Delete keys: state, and whether the key is known present (its put acked).
    let mut dels: Vec<KeyState> = (0..n).map(|_| KeyState::default()).collect();
    let mut present = vec![false; n];
    for w in 0..cfg.writes {
        let token = format!("t{w}").into_bytes();
        let i = rng.gen_range(0..n);
        let choice = rng.gen_range(0..10);
        r.writes += 1;
        let reply = if choice < 5 {
            let reply = client.call(
                &Op::Append {
                    key: key("l", i),
                    val: token.clone(),
                },
                &mut wait,
            );
            let acked = reply.as_ref().is_some_and(|r| r.status == Status::Ok);
            appended.insert(token.clone(), acked);
            reply
        } else if choice < 8 {
            let reply = client.call(
                &Op::Put {
                    key: key("p", i),
                    val: token.clone(),
                },
                &mut wait,
            );
            match &reply {
                Some(rep) if rep.status == Status::Ok => puts[i].ack(Some(token)),
                _ => puts[i].maybe.push(Some(token)),
            }
            reply
        } else if !present[i] {
            let reply = client.call(
                &Op::Put {
                    key: key("d", i),
                    val: token.clone(),
                },
                &mut wait,
            );
            match &reply {
                Some(rep) if rep.status == Status::Ok => {
                    dels[i].ack(Some(token));
                    present[i] = true;
                }
                _ => dels[i].maybe.push(Some(token)),
            }
            reply
        } else {
            let reply = client.call(&Op::Delete { key: key("d", i) }, &mut wait);
            match &reply {
                Some(rep) if rep.status == Status::Ok => dels[i].ack(None),
                // The key was put (acked) and nothing else deleted it: this delete ran
                // before, and its retry ran again.
                Some(rep) if rep.status == Status::NotFound => {
                    r.applied_twice += 1;
                    dels[i].ack(None);
                }
                _ => dels[i].maybe.push(None),
            }
            present[i] = false;
            reply
        };
        match reply {
            Some(rep) if rep.status == Status::Ok || rep.status == Status::NotFound => r.acked += 1,
            Some(rep) => return Err(format!("write {w} answered {rep}")),
            None => r.unacked += 1,
        }
    }

    // The read-back, over the same lossy wire (reads are safe to retry).
    let mut read = |op: Op| -> Result<crate::ops::Reply, String> {
        client
            .call(&op, &mut wait)
            .ok_or_else(|| format!("read-back of {op:?}: no reply after every retry"))
    };
    let mut counts: HashMap<Vec<u8>, u64> = HashMap::new();
    for i in 0..n {
        for v in read_list(&mut read, &key("l", i))? {
            *counts.entry(v).or_default() += 1;
        }
        r.keys_checked += 1;
    }
    for (token, acked) in &appended {
        match counts.get(token).copied().unwrap_or(0) {
            0 if *acked => r.lost += 1,
            0 | 1 => {}
            _ => r.applied_twice += 1,
        }
    }
    for (kind, states) in [("p", &puts), ("d", &dels)] {
        for (i, st) in states.iter().enumerate() {
            let rep = read(Op::Get { key: key(kind, i) })?;
            let now = match rep.status {
                Status::Ok => rep.vals.into_iter().next(),
                Status::NotFound => None,
                s => return Err(format!("read-back of {kind}{i}: {}", s.as_str_name())),
            };
            if !st.allows(&now) {
                r.lost += 1;
            }
            r.keys_checked += 1;
        }
    }
    r.refused = server.stats().app.dedup.refused;
    let cs: CallStats = client.stats();
    r.retries = cs.retries;
    r.retries_answered = server.stats().app.dedup.hits;
    let (c, s) = (
        client.datapath().faults_injected(),
        server.datapath().faults_injected(),
    );
    r.frames_lost = c.lost + s.lost;
    r.frames_duplicated = c.duplicated + s.duplicated;
    Ok(r)
}

/// Every value of list `key`, read back with `read`: the whole list in one reply, or — when
/// that reply would not fit a message (`TOO_LARGE`: a long list in a format with much
/// per-element overhead, as FlatBuffers) — element by element until `BAD_INDEX`. A list that
/// is not there is empty; any other status is an error, never taken for an empty list.
fn read_list(
    read: &mut impl FnMut(Op) -> Result<crate::ops::Reply, String>,
    key: &str,
) -> Result<Vec<Vec<u8>>, String> {
    let rep = read(Op::GetList {
        key: key.to_owned(),
    })?;
    match rep.status {
        Status::Ok => return Ok(rep.vals),
        Status::NotFound => return Ok(Vec::new()),
        Status::TooLarge => {}
        s => return Err(format!("read-back of {key}: {}", s.as_str_name())),
    }
    let mut vals = Vec::new();
    loop {
        let rep = read(Op::GetFromList {
            key: key.to_owned(),
            index: vals.len() as u32,
        })?;
        match (rep.status, rep.vals.into_iter().next()) {
            (Status::Ok, Some(v)) => vals.push(v),
            (Status::BadIndex, _) => return Ok(vals),
            (s, _) => {
                return Err(format!(
                    "read-back of {key}[{}]: {}",
                    vals.len(),
                    s.as_str_name()
                ))
            }
        }
    }
}
