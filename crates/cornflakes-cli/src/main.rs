//! The `cornflakes` command: generate Rust from `.proto` files, and convert between JSON and
//! the Cornflakes object wire format with a schema read at run time.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use cornflakes::{Arena, CornflakesObj, PinnedMemory};
use cornflakes_codegen::dynamic::{DynMessage, Names};
use cornflakes_codegen::{Config, Schema};

#[derive(Parser)]
#[command(
    name = "cornflakes",
    version,
    about = "Cornflakes schema compiler and wire-format codec"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(clap::Args)]
struct SchemaArgs {
    /// The .proto file defining the message.
    #[arg(long)]
    schema: PathBuf,
    /// Directories searched for the schema and its imports (default: the schema's directory).
    #[arg(short = 'I', long = "include")]
    include: Vec<PathBuf>,
    /// Fully qualified message name (`pkg.Name`); a unique unqualified name also works.
    #[arg(long)]
    message: String,
    /// Wire bytes as hexadecimal text instead of raw bytes.
    #[arg(long)]
    hex: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Generate Rust code: one `<package>.cornflakes.rs` per package in the output directory.
    Gen {
        /// .proto files to compile.
        #[arg(required = true)]
        protos: Vec<PathBuf>,
        /// Directories searched for the files and their imports (default: each file's directory).
        #[arg(short = 'I', long = "include")]
        include: Vec<PathBuf>,
        /// Output directory.
        #[arg(short = 'o', long = "out")]
        out: PathBuf,
        /// Path of the runtime crate in generated code.
        #[arg(long, default_value = "::cornflakes")]
        runtime_path: String,
        /// Path of the `cornflakes-rpc` crate in generated services.
        #[arg(long, default_value = "::cornflakes_rpc")]
        rpc_path: String,
        /// Generate no services (messages and enums only).
        #[arg(long)]
        no_services: bool,
    },
    /// Read a message as JSON on stdin, write its wire bytes to stdout.
    Encode {
        #[command(flatten)]
        args: SchemaArgs,
        /// Place string/bytes values at least this long in the ZERO-COPY AREA, as a sender
        /// with the values in pinned memory would (default: every value is copied).
        #[arg(long)]
        zero_copy_threshold: Option<usize>,
    },
    /// Read wire bytes on stdin, write the message as JSON to stdout.
    Decode {
        #[command(flatten)]
        args: SchemaArgs,
        /// Name fields by their JSON names (lowerCamelCase, or `json_name`), protobuf's
        /// default, instead of as written in the .proto (both are read by `encode`).
        #[arg(long)]
        json_names: bool,
    },
}

fn includes_or_parents(include: &[PathBuf], files: &[&Path]) -> Vec<PathBuf> {
    if !include.is_empty() {
        return include.to_vec();
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for f in files {
        let d = f
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        if !dirs.contains(&d) {
            dirs.push(d);
        }
    }
    dirs
}

fn load(args: &SchemaArgs) -> Result<(Schema, usize), String> {
    let includes = includes_or_parents(&args.include, &[&args.schema]);
    let schema = Schema::load(&[&args.schema], &includes).map_err(|e| e.to_string())?;
    let id = match schema.message(&args.message) {
        Some(id) => id,
        None => {
            let suffix = format!(".{}", args.message);
            let matches: Vec<usize> = (0..schema.messages.len())
                .filter(|&i| {
                    let n = &schema.messages[i].full_name;
                    !schema.messages[i].map_entry && (n.ends_with(&suffix) || *n == args.message)
                })
                .collect();
            match matches.as_slice() {
                [one] => *one,
                _ => {
                    return Err(format!(
                        "no message `{}` in {} (messages: {})",
                        args.message,
                        args.schema.display(),
                        schema.message_names().join(", ")
                    ))
                }
            }
        }
    };
    Ok((schema, id))
}

fn parse_hex(text: &[u8]) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = text
        .iter()
        .copied()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!(
            "hex input has an odd number of digits ({})",
            digits.len()
        ));
    }
    digits
        .chunks(2)
        .enumerate()
        .map(|(i, p)| {
            std::str::from_utf8(p)
                .ok()
                .and_then(|s| u8::from_str_radix(s, 16).ok())
                .ok_or_else(|| {
                    format!(
                        "hex input byte {i}: `{}` is not two hex digits",
                        String::from_utf8_lossy(p)
                    )
                })
        })
        .collect()
}

fn read_stdin() -> Result<Vec<u8>, String> {
    let mut buf = Vec::new();
    std::io::stdin()
        .read_to_end(&mut buf)
        .map_err(|e| format!("reading stdin: {e}"))?;
    Ok(buf)
}

fn write_stdout(bytes: &[u8]) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|_| out.flush())
        .map_err(|e| format!("writing stdout: {e}"))
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.cmd {
        Cmd::Gen {
            protos,
            include,
            out,
            runtime_path,
            rpc_path,
            no_services,
        } => {
            let files: Vec<&Path> = protos.iter().map(PathBuf::as_path).collect();
            let includes = includes_or_parents(&include, &files);
            Config::new()
                .out_dir(&out)
                .runtime_path(&runtime_path)
                .rpc_path(&rpc_path)
                .services(!no_services)
                .rerun_if_changed(false)
                .compile_protos(&protos, &includes)
                .map_err(|e| e.to_string())
        }
        Cmd::Encode {
            args,
            zero_copy_threshold,
        } => {
            let (schema, id) = load(&args)?;
            let input = read_stdin()?;
            let json: serde_json::Value = serde_json::from_slice(&input)
                .map_err(|e| format!("stdin is not valid JSON: {e}"))?;
            let mem;
            let arena = match zero_copy_threshold {
                Some(t) => {
                    mem = PinnedMemory::with_defaults()
                        .map_err(|e| format!("allocating pinned memory: {e}"))?;
                    Arena::with_memory(&mem).with_threshold(t)
                }
                None => Arena::new(),
            };
            let m = DynMessage::from_json(&schema, id, &json, &arena).map_err(|e| e.to_string())?;
            let bytes = m.serialize_to_vec();
            if args.hex {
                let mut s: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                s.push('\n');
                write_stdout(s.as_bytes())
            } else {
                write_stdout(&bytes)
            }
        }
        Cmd::Decode { args, json_names } => {
            let (schema, id) = load(&args)?;
            let input = read_stdin()?;
            let bytes = if args.hex { parse_hex(&input)? } else { input };
            let arena = Arena::new();
            let m = DynMessage::decode(&schema, id, &bytes, &arena).map_err(|e| e.to_string())?;
            let names = if json_names {
                Names::Json
            } else {
                Names::Proto
            };
            let mut text = m.to_json_with(names).map_err(|e| e.to_string())?;
            text.push('\n');
            write_stdout(text.as_bytes())
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
