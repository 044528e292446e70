//! Helpers shared by the console's integration tests.
#![allow(dead_code)]

use std::time::Duration;
use volt_console::client;
use volt_console_proto::console_client::ConsoleClient;

pub fn runtime(workers: usize, ring: bool) -> volt::Runtime {
    let mut b = volt::runtime::Builder::new();
    b.worker_threads(workers).console_bind("127.0.0.1:0").console_publish_interval(Duration::from_millis(20));
    if ring {
        b.event_ring(4096);
    }
    b.build().expect("runtime with console")
}

pub fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

pub async fn client(rt: &volt::Runtime) -> ConsoleClient<tonic::transport::Channel> {
    client::connect(&rt.console_addr().unwrap().to_string()).await.expect("connect")
}

/// Keep the runtime busy with `n` small tasks.
pub fn spawn_work(rt: &volt::Runtime, n: usize) {
    for i in 0..n {
        rt.spawn(async move {
            if i % 2 == 0 {
                volt::task::yield_now().await;
            }
        });
    }
}

/// A task named `name` that polls a few times, then waits (polling every 5 ms) until the
/// returned sender sends.
pub fn spawn_waiter(rt: &volt::Runtime, name: &str) -> (volt::task::JoinHandle<()>, std::sync::mpsc::Sender<()>) {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let rx = std::sync::Mutex::new(rx);
    let h = volt::task::Builder::new().name(name).spawn_on(
        async move {
            for _ in 0..3 {
                volt::task::yield_now().await;
            }
            while rx.lock().unwrap().try_recv().is_err() {
                volt::time::sleep(Duration::from_millis(5)).await;
            }
        },
        rt.handle(),
    );
    (h, tx)
}
