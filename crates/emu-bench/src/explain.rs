//! What bounded a mode, in words and numbers: where the server core's time went
//! ([`percore::TimeSplit`]) and what the device moved per request.

use percore::{Part, TimeSplit};
use serde_json::{json, Value};

/// A time split as JSON: each part's nanoseconds and share, busy nanoseconds per request,
/// requests per burst and the dominant part.
pub fn split_json(t: &TimeSplit) -> Value {
    let mut parts = serde_json::Map::new();
    for p in Part::ALL {
        parts.insert(
            p.name().to_owned(),
            json!({
                "ns": t.ns(p),
                "share": t.share(p),
                "ns_per_request": t.per_request_ns(p),
            }),
        );
    }
    json!({
        "parts": parts,
        "busy_ns_per_request": t.busy_per_request_ns(),
        "requests_per_burst": t.requests_per_burst(),
        "bursts": t.bursts,
        "requests": t.requests,
        "dominant": t.dominant().map(|(p, _)| p.name()),
        "sampled_ns": t.sampled_ns,
        "sampled_send_ns": t.sampled_send_ns,
    })
}

/// The dominant busy part and the idle share, short, for a table cell: `handler 58%, idle 9%`
/// (`–` when nothing was timed).
pub fn split_cell(t: Option<&TimeSplit>) -> String {
    let Some(t) = t.filter(|t| t.total_ns() > 0) else {
        return "–".to_owned();
    };
    match t.busiest() {
        Some((p, _)) => format!(
            "{} {:.0}%, idle {:.0}%",
            p.name(),
            100.0 * t.share(p),
            100.0 * t.share(Part::Idle)
        ),
        None => "idle 100%".to_owned(),
    }
}

/// What the device moved per request at `rps` requests per second with these mean frames
/// (bytes): `writes every 4178-byte request frame and reads every 4178-byte reply (20.9 GB/s)`.
pub fn device_note(request: f64, reply: Option<f64>, rps: f64) -> String {
    let reply = reply.unwrap_or(0.0);
    format!(
        "it writes every {request:.0}-byte request frame into a receive buffer and reads every \
         {reply:.0}-byte reply where the server left it ({:.1} GB/s of frames at {:.0} k req/s)",
        (request + reply) * rps / 1e9,
        rps / 1e3
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_split_reaches_json_and_cells_with_its_parts() {
        let t = TimeSplit {
            receive_ns: 100,
            handler_ns: 500,
            flush_reap_ns: 100,
            idle_ns: 300,
            bursts: 2,
            requests: 10,
            sampled_ns: 50,
            sampled_send_ns: 20,
        };
        let j = split_json(&t);
        assert_eq!(j["parts"]["send"]["ns"], 200.0);
        assert_eq!(j["parts"]["idle"]["share"], 0.3);
        assert_eq!(j["busy_ns_per_request"], 70.0);
        assert_eq!(j["dominant"], "handler");
        // The busiest part that is not idle, and idle.
        assert_eq!(split_cell(Some(&t)), "handler 30%, idle 30%");
        assert_eq!(split_cell(None), "–");
        assert_eq!(split_cell(Some(&TimeSplit::default())), "–");
        let d = device_note(4178.0, Some(4178.0), 2_500_000.0);
        assert!(
            d.contains("4178-byte request frame") && d.contains("(20.9 GB/s"),
            "{d}"
        );
    }
}
