//! Compiles `schemas/kv.proto` into Cornflakes objects (`schema`), the KV store's protocol
//! the server's Cornflakes port speaks, as a user of the library would (docs/codegen.md). The
//! bench only builds requests and reads replies, so the `Kv` service's server trait and client
//! are not generated (`services(false)`): no RPC runtime is linked for them.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    cornflakes_codegen::Config::new()
        .services(false)
        .compile_protos(&["../../schemas/kv.proto"], &["../../schemas"])?;
    Ok(())
}
