//! The conversions of the well-known types, at and past their ranges' edges.

use std::time::{Duration as StdDuration, SystemTime, UNIX_EPOCH};

use cornflakes::{Arena, CornflakesObj};
use cornflakes_types::{
    duration_from_json, duration_to_json, timestamp_from_rfc3339, timestamp_to_rfc3339, Any,
    AnyError, Duration, Timestamp, MAX_DURATION_SECONDS, MAX_TIMESTAMP_SECONDS,
    MIN_TIMESTAMP_SECONDS,
};

#[test]
fn timestamps_and_system_times_round_trip_within_range() {
    let arena = Arena::new();
    for t in [
        UNIX_EPOCH,
        UNIX_EPOCH + StdDuration::new(63_108_020, 21_000_000),
        UNIX_EPOCH - StdDuration::new(1, 1), // before the epoch: nanos stay positive
        UNIX_EPOCH - StdDuration::from_secs(MIN_TIMESTAMP_SECONDS.unsigned_abs()),
        UNIX_EPOCH + StdDuration::new(MAX_TIMESTAMP_SECONDS as u64, 999_999_999),
    ] {
        let ts = Timestamp::from_system_time(t, &arena).unwrap();
        assert!((0..1_000_000_000).contains(&ts.get_nanos()));
        assert_eq!(ts.to_system_time().unwrap(), t);
        assert_eq!(SystemTime::try_from(&ts).unwrap(), t);
    }
    let ts = Timestamp::from_system_time(UNIX_EPOCH - StdDuration::new(1, 1), &arena).unwrap();
    assert_eq!((ts.get_seconds(), ts.get_nanos()), (-2, 999_999_999));
    // Past year 9999, and before year 1: refused both ways.
    let late = UNIX_EPOCH + StdDuration::from_secs(MAX_TIMESTAMP_SECONDS as u64 + 1);
    assert!(Timestamp::from_system_time(late, &arena).is_err());
    let mut bad = Timestamp::new_in(&arena);
    bad.set_seconds(MIN_TIMESTAMP_SECONDS - 1);
    assert!(bad.to_system_time().is_err());
    bad.set_seconds(0);
    bad.set_nanos(-1);
    assert!(bad.to_system_time().is_err());
    bad.set_nanos(1_000_000_000);
    assert!(bad.to_rfc3339().is_err());
}

#[test]
fn timestamps_as_rfc3339() {
    let cases = [
        (0, 0, "1970-01-01T00:00:00Z"),
        (63_108_020, 21_000_000, "1972-01-01T10:00:20.021Z"),
        (-1, 999_999_999, "1969-12-31T23:59:59.999999999Z"),
        (951_782_400, 1_000, "2000-02-29T00:00:00.000001Z"),
        (MIN_TIMESTAMP_SECONDS, 0, "0001-01-01T00:00:00Z"),
        (MAX_TIMESTAMP_SECONDS, 0, "9999-12-31T23:59:59Z"),
    ];
    for (s, n, text) in cases {
        assert_eq!(timestamp_to_rfc3339(s, n).unwrap(), text);
        assert_eq!(timestamp_from_rfc3339(text).unwrap(), (s, n), "{text}");
    }
    // Offsets are applied; lower-case separators are RFC 3339 too.
    assert_eq!(
        timestamp_from_rfc3339("1972-01-01T11:00:20.021+01:00").unwrap(),
        (63_108_020, 21_000_000)
    );
    assert_eq!(
        timestamp_from_rfc3339("1970-01-01t00:00:01z").unwrap(),
        (1, 0)
    );
    for bad in [
        "1970-01-01",
        "1970-02-30T00:00:00Z",
        "1970-01-01T24:00:00Z",
        "1970-01-01T00:00:00.Z",
        "1970-01-01T00:00:00.1234567891Z",
        "1970-01-01T00:00:00+0100",
        "0000-12-31T23:59:59Z",
        "+970-01-01T00:00:00Z",
    ] {
        assert!(timestamp_from_rfc3339(bad).is_err(), "{bad}");
    }
}

#[test]
fn durations_convert_where_std_can_hold_them() {
    let arena = Arena::new();
    let d = Duration::from_std(StdDuration::new(3, 500), &arena).unwrap();
    assert_eq!(d.to_std().unwrap(), StdDuration::new(3, 500));
    assert_eq!(StdDuration::try_from(&d).unwrap(), StdDuration::new(3, 500));
    assert!(Duration::from_std(
        StdDuration::from_secs(MAX_DURATION_SECONDS as u64 + 1),
        &arena
    )
    .is_err());
    let mut neg = Duration::new_in(&arena);
    neg.set_seconds(-1);
    neg.set_nanos(-5);
    assert!(neg.to_std().is_err(), "std durations are never negative");
    neg.set_nanos(5); // signs differ: not a valid duration
    assert!(duration_to_json(neg.get_seconds(), neg.get_nanos()).is_err());
    for (s, n, text) in [
        (1, 500_000_000, "1.500s"),
        (-1, -500_000_000, "-1.500s"),
        (0, -1_000, "-0.000001s"),
        (3, 0, "3s"),
        (0, 1, "0.000000001s"),
    ] {
        assert_eq!(duration_to_json(s, n).unwrap(), text);
        assert_eq!(duration_from_json(text).unwrap(), (s, n), "{text}");
    }
    for bad in [
        "1",
        "s",
        "1.s",
        "--1s",
        "1.0000000001s",
        "315576000001s",
        " 1s",
    ] {
        assert!(duration_from_json(bad).is_err(), "{bad}");
    }
}

#[test]
fn any_packs_and_unpacks_by_type_url() {
    let arena = Arena::new();
    let ts = Timestamp::from_system_time(UNIX_EPOCH + StdDuration::from_secs(42), &arena).unwrap();
    let any = Any::pack("google.protobuf.Timestamp", &ts, &arena);
    assert_eq!(
        any.get_type_url().as_str().unwrap(),
        "type.googleapis.com/google.protobuf.Timestamp"
    );
    assert!(any.is(".google.protobuf.Timestamp"));
    // Through the wire and back.
    let bytes = any.serialize_to_vec();
    let any = Any::deserialize(&bytes, &arena).unwrap();
    let back: Timestamp = any.unpack("google.protobuf.Timestamp", &arena).unwrap();
    assert_eq!(back, ts);
    match any.unpack::<Duration>("google.protobuf.Duration", &arena) {
        Err(AnyError::WrongType { expected, found }) => {
            assert_eq!(
                (expected.as_str(), found.as_str()),
                ("google.protobuf.Duration", "google.protobuf.Timestamp")
            );
        }
        other => panic!("{other:?}"),
    }
    // The right name over bytes that are not that message: a decode error, not a panic.
    let mut lying = Any::new_in(&arena);
    lying.set_type_url(cornflakes::CFString::new(
        "x/google.protobuf.Timestamp",
        &arena,
    ));
    lying.set_value(cornflakes::CFBytes::new(&[1, 2, 3], &arena));
    assert!(matches!(
        lying.unpack::<Timestamp>("google.protobuf.Timestamp", &arena),
        Err(AnyError::Decode(_))
    ));
}

#[cfg(feature = "json")]
#[test]
fn struct_and_value_carry_json() {
    use cornflakes_types::{Struct, Value};
    let arena = Arena::new();
    let json: serde_json::Value =
        serde_json::from_str(r#"{"a": 1.5, "b": [true, null, "s", {"c": []}], "d": {}, "e": "é"}"#)
            .unwrap();
    let s = Struct::from_json(json.as_object().unwrap(), &arena);
    assert_eq!(s.to_json(), json);
    let bytes = s.serialize_to_vec();
    let back = Struct::deserialize(&bytes, &arena).unwrap();
    assert_eq!(back.to_json(), json);
    let v = Value::from_json(&json, &arena);
    assert_eq!(
        Value::deserialize(&v.serialize_to_vec(), &arena)
            .unwrap()
            .to_json(),
        json
    );
    assert_eq!(Value::new_in(&arena).to_json(), serde_json::Value::Null);
}
