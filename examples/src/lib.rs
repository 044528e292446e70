//! Example programs for Volt; see `examples/`. The library holds what an example shares
//! with its tests.

pub mod grpc;
pub mod http;

/// A future that completes at the first Ctrl-C or SIGTERM (the handler runs on a thread
/// of its own), for a server's graceful shutdown. A second one exits the process at once
/// (status 130), without waiting for the requests in flight.
pub fn shutdown_signal() -> std::io::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let tx = std::sync::Mutex::new(Some(tx));
    ctrlc::set_handler(move || match tx.lock().unwrap_or_else(|e| e.into_inner()).take() {
        Some(tx) => {
            let _ = tx.send(());
        }
        None => {
            eprintln!("interrupted again: exiting without waiting");
            std::process::exit(130);
        }
    })
    .map_err(std::io::Error::other)?;
    Ok(async move {
        let _ = rx.await;
    })
}

/// The `grpc` example's generated messages, client and server (`proto/greeter.proto`).
pub mod greeter {
    #![allow(missing_docs, clippy::all)]
    tonic::include_proto!("volt.examples.greeter");
}
