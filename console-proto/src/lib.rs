//! The wire format of Volt's console: the `volt.console.v1` protobuf messages and the
//! `Console` gRPC service, generated at build time from `proto/volt/console/v1/*.proto`.
//!
//! The runtime's console server (`volt` with the `console` feature), `volt-console` and
//! the `volt-exporter` sidecar all use these types; the `.proto` files are the one
//! definition.

#![allow(missing_docs, clippy::all)]

/// Package `volt.console.v1`.
pub mod v1 {
    tonic::include_proto!("volt.console.v1");
}

pub use v1::*;

/// The `prost` these types were generated for (`Message::encoded_len`, for size bounds).
pub use prost;

/// The encoded `FileDescriptorSet` of the protos, for gRPC reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("volt_console_descriptor");
