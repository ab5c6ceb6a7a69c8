//! Each generator's output matches the statistics it states, within tolerance.

use kv_workloads::*;
use std::collections::HashMap;

fn near(what: &str, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got}, want {want} ± {tol}"
    );
}

/// Load set and `initial_value` agree, and both `load` and `requests` are deterministic.
fn consistent(w: &dyn Workload, seed: u64) {
    let mut n = 0;
    for (key, val) in w.load() {
        if n < 200 {
            assert_eq!(
                w.initial_value(&key).as_ref(),
                Some(&val),
                "{}: {key}",
                w.name()
            );
        }
        n += 1;
    }
    assert!(n > 0);
    assert_eq!(w.requests(300, seed), w.requests(300, seed));
    assert_ne!(w.requests(300, seed), w.requests(300, seed + 1));
    assert_eq!(w.initial_value("no such key"), None);
}

#[test]
fn ycsb_zipf_keys_and_shapes() {
    let w = Ycsb::new(YcsbConfig::default()).unwrap();
    consistent(&w, 1);
    let reqs = w.requests(200_000, 1);
    let s = w.describe(&reqs);
    println!("{s}");
    assert_eq!(s.requests, 200_000);
    assert_eq!(s.ops["get"], 200_000);
    assert_eq!(s.write_share, 0.0);
    near("mean key", s.mean_key_bytes, 30.5, 0.05);
    near("zipf", s.zipf_estimated.unwrap(), 0.99, 0.05);
    assert_eq!(s.mean_request_value_bytes, 4096.0);
    assert_eq!(s.share_requests_ge_512, 1.0);
    for r in &reqs[..1000] {
        let k = r.keys()[0].len();
        assert!(k == 30 || k == 31, "{k}");
    }

    let m = Ycsb::new(YcsbConfig::with_shape("2x2048", YcsbAccess::GetM).unwrap()).unwrap();
    consistent(&m, 2);
    for r in m.requests(2000, 2) {
        let Request::GetM { keys } = r else {
            panic!("{r:?}")
        };
        assert_eq!(keys.len(), 2);
        assert_ne!(keys[0], keys[1]);
    }
    let l = Ycsb::new(YcsbConfig::with_shape("4x1024", YcsbAccess::GetList).unwrap()).unwrap();
    consistent(&l, 3);
    let s = l.describe(&l.requests(10_000, 3));
    assert_eq!(s.ops["getlist"], 10_000);
    assert_eq!(s.mean_element_bytes, 1024.0);
    assert_eq!(s.mean_request_value_bytes, 4096.0);
    assert_eq!(
        s.elements_per_request.keys().copied().collect::<Vec<_>>(),
        vec![4]
    );
    assert_eq!(l.name(), "ycsb-c 4x1024 getlist");
    assert!(Ycsb::new(YcsbConfig {
        keys: 1,
        values_per_request: 2,
        ..Default::default()
    })
    .is_err());
}

#[test]
fn google_sizes_follow_the_histogram() {
    let hist = SizeHistogram::new(&GOOGLE_BYTES_HISTOGRAM).unwrap();
    // The paper: 34% of sizes are 8 B or less, 94.9% are 512 or less.
    near("share <= 8", GOOGLE_BYTES_HISTOGRAM[0].share, 0.338, 1e-12);
    near("share > 512", hist.share_at_least(513), 0.0506, 0.002);
    for (min, max) in [(1, 1), (1, 4), (1, 8), (1, 16)] {
        let cfg = GoogleConfig {
            keys: 50_000,
            resample_over_frame: false,
            ..GoogleConfig::with_lists(min, max)
        };
        let w = Google::new(cfg).unwrap();
        consistent(&w, 4);
        let s = w.describe(&w.requests(100_000, 4));
        println!("{s}");
        assert_eq!(s.ops["getlist"], 100_000);
        assert_eq!(s.mean_key_bytes, 64.0);
        near(
            "element mean",
            s.mean_element_bytes / hist.mean(),
            1.0,
            0.06,
        );
        near(
            "elements >= 512",
            s.share_elements_ge_512,
            hist.share_at_least(512),
            0.006,
        );
        // Lengths uniform in min..=max (inclusive).
        let lens = &s.elements_per_request;
        assert_eq!(*lens.keys().next().unwrap(), min);
        assert_eq!(*lens.keys().last().unwrap(), max);
        let each = 100_000.0 / (max - min + 1) as f64;
        for (&len, &n) in lens {
            near(&format!("length {len}"), n as f64 / each, 1.0, 0.08);
        }
        // Keys uniform: almost every key is named by 100 000 draws over 50 000 keys.
        assert!(
            s.distinct_keys as f64 > 0.85 * 50_000.0,
            "{}",
            s.distinct_keys
        );
    }
    // Resampling keeps every list within the frame budget; the prototype's lengths exclude max.
    let cfg = GoogleConfig {
        keys: 5_000,
        frame_budget: 4000,
        ..GoogleConfig::with_lists(1, 16)
    };
    let w = Google::new(cfg).unwrap();
    for (_, vals) in w.load() {
        assert!(vals.iter().map(Vec::len).sum::<usize>() <= 4000);
    }
    let cfg = GoogleConfig {
        keys: 5_000,
        prototype_exclusive_max: true,
        ..GoogleConfig::with_lists(1, 4)
    };
    let w = Google::new(cfg).unwrap();
    let s = w.describe(&w.requests(20_000, 5));
    assert_eq!(
        s.elements_per_request.keys().copied().collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    assert!(Google::new(GoogleConfig {
        key_size: 8,
        ..Default::default()
    })
    .is_err());
}

#[test]
fn twitter_synthetic_matches_cluster_4() {
    let w = Twitter::new(TwitterConfig::default()).unwrap();
    consistent(&w, 6);
    let reqs = w.requests(200_000, 6);
    let s = w.describe(&reqs);
    println!("{s}");
    near("write share", s.write_share, 0.07, 0.004);
    near("zipf", s.zipf_estimated.unwrap(), 1.10, 0.05);
    near("mean key", s.mean_key_bytes, 67.0, 2.0);
    near("mean value", s.mean_request_value_bytes / 2439.0, 1.0, 0.06);
    near("requests >= 512", s.share_requests_ge_512, 0.32, 0.02);
    // A put rewrites a key with a value of its loaded size, new bytes.
    let mut versions: HashMap<&str, u32> = HashMap::new();
    for r in &reqs {
        if let Request::Put { key, val } = r {
            let old = w.initial_value(key).unwrap();
            assert_eq!(old[0].len(), val.len());
            assert_ne!(&old[0], val);
            *versions.entry(key).or_default() += 1;
        }
    }
    assert!(!versions.is_empty());
    // Other seeds of the load set keep the statistics.
    let w2 = Twitter::new(TwitterConfig {
        load_seed: 99,
        ..Default::default()
    })
    .unwrap();
    let s2 = w2.describe(&w2.requests(100_000, 7));
    near(
        "mean value (seed 99)",
        s2.mean_request_value_bytes / 2439.0,
        1.0,
        0.06,
    );
    near(
        "requests >= 512 (seed 99)",
        s2.share_requests_ge_512,
        0.32,
        0.02,
    );
    assert!(Twitter::new(TwitterConfig {
        write_share: 1.5,
        ..Default::default()
    })
    .is_err());
}

#[test]
fn twitter_trace_replays_the_file() {
    let dir = std::env::temp_dir().join(format!("kvw-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cluster.csv");
    std::fs::write(
        &path,
        "0,aa,10,100,1,get,0\n\
         0,bb,4,600,1,set,0\n\
         1,aa,10,0,2,get,0\n\
         1,cc,4,0,2,get,0\n\
         2,aa,10,5,2,incr,0\n\
         2,bb,4,0,3,delete,0\n\
         3,bb,4,700,3,add,60\n",
    )
    .unwrap();
    let w = Twitter::new(TwitterConfig {
        trace: Some(path.clone()),
        ..Default::default()
    })
    .unwrap();
    let loaded: Vec<(String, Vec<Vec<u8>>)> = w.load().collect();
    let names: Vec<&str> = loaded.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, vec!["aa~~~~~~~~", "bb~~"]);
    assert_eq!(loaded[0].1[0].len(), 100);
    assert_eq!(loaded[1].1[0].len(), 600);
    let reqs = w.requests(8, 0);
    let kinds: Vec<&str> = reqs.iter().map(Request::kind).collect();
    assert_eq!(
        kinds,
        vec!["get", "put", "get", "get", "delete", "put", "get", "put"]
    );
    let Request::Put { val, .. } = &reqs[5] else {
        panic!()
    };
    assert_eq!(val.len(), 700);
    assert_eq!(
        w.initial_value("cc~~"),
        None,
        "a key never given a size is not loaded"
    );
    let s = w.describe(&reqs);
    assert!(s.notes[0].contains("1 incr/decr skipped"), "{s}");
    // A malformed line is an error naming the file and line.
    std::fs::write(&path, "0,aa,10,100,1,get,0\n0,aa,10,zz,1,get,0\n").unwrap();
    let e = Twitter::new(TwitterConfig {
        trace: Some(path.clone()),
        ..Default::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("cluster.csv:2") && e.contains("value size"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cdn_sizes_match_tc1_and_objects_are_fetched_piecewise() {
    // A large population of sizes only (bytes are generated by `load`, not here).
    let big = Cdn::new(CdnConfig {
        total_bytes: 8 << 30,
        ..Default::default()
    })
    .unwrap();
    let sizes = big.object_sizes();
    let n = sizes.len() as f64;
    let share = |p: &dyn Fn(u64) -> bool| sizes.iter().filter(|&&s| p(s)).count() as f64 / n;
    near("model mean", big.size_distribution().mean(), 20_800.0, 1.0);
    near("< 5 KB", share(&|s| s < 5_000), 0.36, 0.01);
    near("<= 55 KB", share(&|s| s <= 55_000), 0.91, 0.005);
    near("<= 155 KB", share(&|s| s <= 155_000), 0.99, 0.002);
    assert!(sizes.iter().all(|&s| (1000..=116_000_000).contains(&s)));
    let mean = sizes.iter().sum::<u64>() as f64 / n;
    println!("{}", big.describe(&[]).notes.join("\n"));
    near("population mean", mean / 20_800.0, 1.0, 0.12);
    let counts = big.requests_per_pass();
    let per_object = counts.iter().map(|&c| f64::from(c)).sum::<f64>() / n;
    near("requests per object", per_object, 2.5, 0.1);
    assert!(
        counts.iter().filter(|&&c| c == 1).count() as f64 / n > 0.5,
        "most requested once"
    );

    let w = Cdn::new(CdnConfig {
        total_bytes: 8 << 20,
        ..Default::default()
    })
    .unwrap();
    consistent(&w, 8);
    let reqs = w.requests(5_000, 8);
    let bounds = w.unit_boundaries(&reqs);
    assert_eq!(bounds[0], 0);
    // Each unit is one object's pieces 0..n in order, and the run ends on a whole object.
    for (u, &start) in bounds.iter().enumerate() {
        let end = bounds.get(u + 1).copied().unwrap_or(reqs.len());
        let Request::GetFromList { key, .. } = &reqs[start] else {
            panic!()
        };
        let val = w.initial_value(key).unwrap();
        assert_eq!(end - start, val.len());
        for (j, r) in reqs[start..end].iter().enumerate() {
            assert_eq!(
                r,
                &Request::GetFromList {
                    key: key.clone(),
                    index: j as u32
                }
            );
        }
        assert!(val.iter().all(|p| p.len() <= 8192 && !p.is_empty()));
        assert_eq!(key.len(), 64);
    }
    assert!(reqs.len() >= 5_000);
    let s = w.describe(&reqs);
    println!("{s}");
    assert_eq!(s.units, bounds.len());
    assert_eq!(s.write_share, 0.0);
    assert!(Cdn::new(CdnConfig {
        max_object: 100_000,
        ..Default::default()
    })
    .is_err());
}
