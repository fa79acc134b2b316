//! Generates the kubelet plugin registration types and gRPC stubs from proto/pluginregistration.proto without a
//! system `protoc` (protox parses the file): the server this binary runs, and the client its health check and
//! tests use.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let proto_dir = manifest.join("../../proto").canonicalize()?;
    println!("cargo:rerun-if-changed={}", proto_dir.join("pluginregistration.proto").display());
    let mut compiler = protox::Compiler::new([&proto_dir])?;
    compiler.open_file("pluginregistration.proto")?;
    tonic_prost_build::configure().build_client(true).build_server(true).compile_fds(compiler.file_descriptor_set())?;
    Ok(())
}
