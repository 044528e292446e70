//! Example programs for Volt; see `examples/`. The library holds what an example shares
//! with its tests.

pub mod grpc;
pub mod http;

/// The `grpc` example's generated messages, client and server (`proto/greeter.proto`).
pub mod greeter {
    #![allow(missing_docs, clippy::all)]
    tonic::include_proto!("volt.examples.greeter");
}
