//! Runs exactly N iterations of one (library, operation, shape) so that
//! `valgrind --tool=callgrind` can report instructions per message: run it
//! for two values of N and divide the difference of the totals by the
//! difference of N (setup cost cancels out).
//!
//! ```text
//! count_baselines <protobuf|capnp|flatbuffers|memcpy> <encode|echo> <single|list|treeD> <K>x<BYTES> <N>
//! count_baselines protobuf encode list 2x2048 1000
//! ```
//!
//! `encode` builds the message from plain byte slices and serializes it into
//! a reused transmit buffer; `echo` deserializes a serialized message and
//! reserializes it into the transmit buffer (the echo server's work).

use baselines::{memcpy_baseline, CodecError, EchoMsg, Library, Shape};
use std::hint::black_box;
use std::process::ExitCode;

const USAGE: &str = "usage: count_baselines <protobuf|capnp|flatbuffers|memcpy> <encode|echo> \
                     <single|list|tree1..tree5> <K>x<BYTES> <N>";

struct Args {
    lib: Option<Library>,
    echo: bool,
    shape: Shape,
    count: usize,
    size: usize,
    iterations: u64,
}

fn parse(args: &[String]) -> Result<Args, String> {
    let [lib, op, shape, vals, n] = args else {
        return Err(USAGE.to_owned());
    };
    let lib = match lib.as_str() {
        "memcpy" => None,
        other => Some(other.parse::<Library>().map_err(|e| e.to_string())?),
    };
    let echo = match op.as_str() {
        "encode" => false,
        "echo" => true,
        other => return Err(format!("unknown operation {other:?}\n{USAGE}")),
    };
    let shape: Shape = shape.parse().map_err(|e| format!("{e}"))?;
    let (count, size) = vals
        .split_once('x')
        .and_then(|(k, b)| Some((k.parse().ok()?, b.parse().ok()?)))
        .ok_or_else(|| format!("bad value spec {vals:?}, expected e.g. 2x2048\n{USAGE}"))?;
    shape.check_values(count).map_err(|e| e.to_string())?;
    let iterations = n.parse().map_err(|_| format!("bad N {n:?}\n{USAGE}"))?;
    if lib.is_none() && echo {
        return Err("memcpy has no echo operation".to_owned());
    }
    Ok(Args {
        lib,
        echo,
        shape,
        count,
        size,
        iterations,
    })
}

fn run(a: &Args) -> Result<u64, CodecError> {
    let owned: Vec<Vec<u8>> = (0..a.count).map(|i| vec![i as u8 + 1; a.size]).collect();
    let vals: Vec<&[u8]> = owned.iter().map(Vec::as_slice).collect();
    let msg = EchoMsg {
        id: 42,
        shape: a.shape,
        vals: &vals,
    };
    let cap = 4096 + a.count * (a.size + 64) * 2;
    let mut tx = vec![0u8; cap];
    let mut total = 0u64;
    let Some(lib) = a.lib else {
        for _ in 0..a.iterations {
            total += memcpy_baseline(42, black_box(&vals), black_box(&mut tx))? as u64;
        }
        return Ok(total);
    };
    let mut codec = lib.codec();
    if a.echo {
        let mut rx = vec![0u8; cap];
        let n = codec.encode(&msg, &mut rx)?;
        for _ in 0..a.iterations {
            total += codec.echo(a.shape, black_box(&rx[..n]), black_box(&mut tx))? as u64;
        }
    } else {
        for _ in 0..a.iterations {
            total += codec.encode(black_box(&msg), black_box(&mut tx))? as u64;
        }
    }
    Ok(total)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a = match parse(&args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    match run(&a) {
        Ok(total) => {
            println!("{} bytes serialized in {} iterations", total, a.iterations);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
