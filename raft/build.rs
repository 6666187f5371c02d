//! Compiles the peer service proto with protox (pure Rust; no system `protoc`), then generates
//! the prost message and the tonic server and client.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "proto/k3rs/raftpb.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
