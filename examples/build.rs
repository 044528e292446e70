//! Generates the `grpc` example's messages and service from `proto/greeter.proto`, with
//! protoc from `protoc-bin-vendored` (nothing to install).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);
    tonic_prost_build::configure().compile_with_config(config, &["proto/greeter.proto"], &["proto"])?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
