//! The console client the dashboard uses: the shared `volt-console-client` library
//! (addresses, the token, connecting with a capped backoff, the watcher thread, event
//! lines), under the name the binary and its tests use.

pub use volt_console_client::*;
