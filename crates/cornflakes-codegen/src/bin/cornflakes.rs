fn main() {
    let args: Vec<String> = std::env::args().collect();
    let schema = cornflakes_codegen::Schema::load(&[&args[1]], &[&args[2]]).unwrap_or_else(|e| { eprintln!("{e}"); std::process::exit(1) });
    for (n, t) in cornflakes_codegen::Config::new().generate(&schema).unwrap() { println!("=== {n}\n{t}"); }
}
