//! Compiles the etcd v3 API protos with protox (pure Rust; no system `protoc`), then generates
//! prost messages and tonic servers and clients from the descriptor set.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["proto/etcdserverpb/rpc.proto", "proto/mvccpb/kv.proto"];
    for p in &protos {
        println!("cargo:rerun-if-changed={p}");
    }
    let fds = protox::compile(protos, ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
