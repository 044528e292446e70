//! Generates the protobuf messages and the tonic service from `proto/`, with protoc from
//! `protoc-bin-vendored` (nothing to install), and writes the descriptor set that gRPC
//! reflection serves.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("volt_console_descriptor.bin"))
        .type_attribute(".volt.console.v1", "#[derive(serde::Serialize)]")
        .compile_with_config(
            config,
            &["proto/volt/console/v1/telemetry.proto", "proto/volt/console/v1/console.proto"],
            &["proto"],
        )?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
