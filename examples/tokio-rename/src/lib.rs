//! A small app written against Tokio's API, built on Volt through the rename in its
//! Cargo.toml (`tokio = { package = "volt", .. }`).

use std::time::Duration;

tokio::task_local! {
    /// The request being served, for the code deep inside it.
    pub static REQUEST: u32;
}

/// Spawn `n` tasks that each sleep, read their task-local, and answer; sum the answers.
pub async fn run(n: u32) -> u32 {
    let mut handles = Vec::new();
    for i in 0..n {
        handles.push(tokio::spawn(REQUEST.scope(i, async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            REQUEST.get()
        })));
    }
    let mut sum = 0;
    for h in handles {
        tokio::select! {
            r = h => sum += r.expect("the task finished"),
            _ = tokio::time::sleep(Duration::from_secs(10)) => panic!("a task took 10 s"),
        }
    }
    sum
}

/// A producer task and a stream of what it sends, the way a tonic handler returns a
/// streaming response: `tokio_stream::wrappers::ReceiverStream` over
/// `tokio::sync::mpsc`, both Volt's through the renames. Returns the squares of `0..n`.
pub async fn squares(n: u64) -> Vec<u64> {
    use tokio_stream::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::channel(8);
    tokio::spawn(async move {
        for i in 0..n {
            if tx.send(i).await.is_err() {
                break;
            }
        }
    });
    tokio_stream::wrappers::ReceiverStream::new(rx).map(|i| i * i).collect().await
}

/// Connections accepted through `TcpListenerStream` until `n` have come, each answered
/// with one line; returns what the clients read.
pub async fn greet_connections(n: usize) -> Vec<String> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    use tokio_stream::StreamExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind on loopback");
    let addr = listener.local_addr().expect("a bound listener's address");
    let server = tokio::spawn(async move {
        let mut incoming = tokio_stream::wrappers::TcpListenerStream::new(listener).take(n);
        while let Some(conn) = incoming.next().await {
            let mut conn = conn.expect("an accepted connection");
            conn.write_all(b"hello\n").await.expect("a reply");
        }
    });
    let mut out = Vec::new();
    for _ in 0..n {
        let conn = tokio::net::TcpStream::connect(addr).await.expect("a connection");
        let mut line = String::new();
        BufReader::new(conn).read_line(&mut line).await.expect("the reply");
        out.push(line);
    }
    server.await.expect("the server task");
    out
}

/// The graceful shutdown of Tokio's guides, through the renames: workers spawned on a
/// `tokio_util::task::TaskTracker` run until a `CancellationToken` fires, then the
/// tracker is closed and waited for. Returns how many workers saw the cancellation.
pub async fn graceful_shutdown(workers: usize) -> usize {
    let tracker = tokio_util::task::TaskTracker::new();
    let token = tokio_util::sync::CancellationToken::new();
    let stopped = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for _ in 0..workers {
        let (token, stopped) = (token.clone(), stopped.clone());
        tracker.spawn(async move {
            token.cancelled().await;
            tokio::time::sleep(Duration::from_millis(1)).await;
            stopped.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
    }
    token.cancel();
    tracker.close();
    tracker.wait().await;
    stopped.load(std::sync::atomic::Ordering::SeqCst)
}
