//! Compiles our subset of the CRI v1 protos with protox (pure Rust; no system `protoc`), then
//! generates prost messages and tonic clients (the agent only calls runtimes; it serves none).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["proto/runtime/v1/api.proto"];
    for p in &protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let fds = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(false)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
