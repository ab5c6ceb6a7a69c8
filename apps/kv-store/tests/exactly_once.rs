//! Every acknowledged write applied exactly once under 5 % loss and 1 % duplication in both
//! directions, in every serialization (`src/faults.rs`, also `kv faults`), and the control:
//! the same run with the server's retry table off applies retried writes twice.

use kv_store::faults::{run, FaultConfig, FaultReport};
use kv_store::{Serialization, Shared};

#[test]
fn acknowledged_writes_apply_exactly_once_under_loss_and_duplication() {
    println!("{}", FaultReport::header());
    for ser in Serialization::ALL {
        let cfg = FaultConfig {
            writes: 1500,
            ..FaultConfig::new(ser)
        };
        let r = run(&cfg).unwrap();
        println!("{r}");
        // The wire really was faulty and the client really retried.
        assert!(r.frames_lost > 0 && r.frames_duplicated > 0, "{r}");
        assert!(r.retries > 0 && r.retries_answered > 0, "{r}");
        assert!(r.keys_checked > 0 && r.acked > 0, "{r}");
        assert_eq!(r.lost, 0, "{ser}: acknowledged writes lost: {r}");
        assert_eq!(r.applied_twice, 0, "{ser}: writes applied twice: {r}");
        assert_eq!(r.refused, 0, "{ser}: a retry taken for a reused id: {r}");
    }
}

#[test]
fn without_the_retry_table_retried_writes_apply_twice() {
    for ser in [
        Serialization::Shared(Shared::CORNFLAKES),
        Serialization::Shared(Shared::PROTOBUF),
        Serialization::Resp,
    ] {
        let r = run(&FaultConfig {
            writes: 1500,
            dedup_window: 0,
            ..FaultConfig::new(ser)
        })
        .unwrap();
        println!("{r}");
        assert!(
            r.applied_twice > 0,
            "{ser}: the check saw no double write: {r}"
        );
        assert_eq!(r.retries_answered, 0);
    }
}

/// A list too long for one reply in FlatBuffers (`TOO_LARGE`: its per-element overhead) is
/// read back element by element, not taken for an empty one: 750 appends to one key are all
/// found, none counted lost.
#[test]
fn a_list_too_long_for_one_reply_is_read_back_element_by_element() {
    let r = run(&FaultConfig {
        writes: 1500,
        keys: 1,
        ..FaultConfig::new(Serialization::Shared(Shared::FLATBUFFERS))
    })
    .unwrap();
    println!("{r}");
    assert!(r.acked > 500, "{r}");
    assert_eq!((r.lost, r.applied_twice, r.refused), (0, 0, 0), "{r}");
}
