//! Every service of the corpus was generated: its trait, dispatcher and client exist (the
//! crate's `services.rs` names each of them, under `#![deny(warnings)]`), its unary rpcs are
//! its generated methods, and its streaming rpcs were left out.

use std::collections::BTreeMap;

use cornflakes_codegen_corpus::SERVICES;

fn service(name: &str) -> &'static cornflakes_codegen_corpus::Service {
    SERVICES
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("{name} was not generated"))
}

#[test]
fn every_service_of_the_corpus_is_generated_with_its_unary_methods() {
    let mut per_source: BTreeMap<&str, usize> = BTreeMap::new();
    for s in SERVICES {
        *per_source.entry(s.source).or_default() += 1;
    }
    // As many as the vendored files declare (`grep -E '^\s*service\s'` per source).
    let expected = BTreeMap::from([("grpc", 20), ("otlp", 4), ("prost", 4), ("protobuf", 5)]);
    assert_eq!(per_source, expected);
    for s in SERVICES {
        let methods = (s.methods)();
        assert!(
            !methods.is_empty() || !s.streaming.is_empty(),
            "{}: no method at all",
            s.name
        );
        for m in methods.iter().chain(s.streaming) {
            assert!(
                m.strip_prefix(s.name).is_some_and(|r| r.starts_with('.')),
                "{m} is not a method of {}",
                s.name
            );
        }
        for m in &methods {
            assert!(!s.streaming.contains(m), "{m} streams but was generated");
        }
    }
    let health = service("grpc.health.v1.Health");
    assert_eq!(
        (health.methods)(),
        ["grpc.health.v1.Health.Check", "grpc.health.v1.Health.List"]
    );
    assert_eq!(health.streaming, ["grpc.health.v1.Health.Watch"]);
    for signal in ["trace", "metrics", "logs"] {
        let name = format!(
            "opentelemetry.proto.collector.{signal}.v1.{}Service",
            match signal {
                "trace" => "Trace",
                "metrics" => "Metrics",
                _ => "Logs",
            }
        );
        let s = service(&name);
        assert_eq!((s.methods)(), [format!("{name}.Export")], "{name}");
        assert!(s.streaming.is_empty(), "{name}");
    }
    let test_service = service("proto2_unittest.TestService");
    assert_eq!(
        (test_service.methods)(),
        [
            "proto2_unittest.TestService.Foo",
            "proto2_unittest.TestService.Bar"
        ]
    );
    // Every rpc of gRPC's reflection streams: the service is generated without methods (its
    // dispatcher answers every request with the error reply).
    let reflection = service("grpc.reflection.v1.ServerReflection");
    assert!((reflection.methods)().is_empty());
    assert_eq!(
        reflection.streaming,
        ["grpc.reflection.v1.ServerReflection.ServerReflectionInfo"]
    );
}
