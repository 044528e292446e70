//! A Redis-protocol key-value server with pub/sub, written as a Tokio application.
//!
//! Commands: `PING`, `GET`, `SET` (with `EX`/`PX` expiry), `PUBLISH`, `SUBSCRIBE`,
//! `UNSUBSCRIBE`, `QUIT`. `redis-cli` and `redis-benchmark` work against it.
//!
//! The source says `tokio::` throughout. In `examples/kv` the `tokio` dependency is Volt
//! (`tokio = { package = "volt", ... }`); `examples/kv-tokio` builds the same files on
//! Tokio.

pub mod db;
pub mod resp;
pub mod server;

pub use db::Db;
pub use server::run;
