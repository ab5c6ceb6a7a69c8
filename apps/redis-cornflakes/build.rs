//! Compiles `schemas/kv.proto` into Cornflakes objects (`schema`), the KV store's protocol
//! the server's Cornflakes port speaks, as a user of the library would (docs/codegen.md).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    cornflakes_codegen::Config::new()
        .compile_protos(&["../../schemas/kv.proto"], &["../../schemas"])?;
    Ok(())
}
