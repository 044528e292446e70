//! The accept loop and one task per connection.

use crate::db::Db;
use crate::resp::{parse_command, reply};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, mpsc, watch, Semaphore};
use tokio::task::JoinHandle;

/// Connections served at once; further clients wait in the listen queue.
pub const MAX_CONNECTIONS: usize = 10_000;

/// Serve `listener` until `shutdown` completes, then stop accepting, tell every
/// connection to close, and return once all of them have.
pub async fn run(listener: TcpListener, db: Db, shutdown: impl Future) {
    let limit = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let (closing_tx, closing_rx) = watch::channel(false);
    // Each connection holds a clone; `recv` returns `None` once all have dropped theirs.
    let (done_tx, mut done_rx) = mpsc::channel::<()>(1);
    let accept = async {
        loop {
            let permit = Arc::clone(&limit).acquire_owned().await.expect("the limit is never closed");
            let (socket, _) = match listener.accept().await {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, say: wait a moment rather than spin.
                    eprintln!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let _ = socket.set_nodelay(true);
            let conn = Connection { socket, db: db.clone(), closing: closing_rx.clone(), _done: done_tx.clone() };
            tokio::spawn(async move {
                if let Err(e) = conn.serve().await {
                    if e.kind() != std::io::ErrorKind::ConnectionReset {
                        eprintln!("connection: {e}");
                    }
                }
                drop(permit);
            });
        }
    };
    tokio::select! {
        _ = accept => {}
        _ = shutdown => {}
    }
    let _ = closing_tx.send(true);
    drop(done_tx);
    let _ = done_rx.recv().await;
}

struct Connection {
    socket: TcpStream,
    db: Db,
    closing: watch::Receiver<bool>,
    _done: mpsc::Sender<()>,
}

/// What a subscribed connection receives: a channel's name and a message.
type Delivery = (Vec<u8>, Vec<u8>);

impl Connection {
    async fn serve(mut self) -> std::io::Result<()> {
        let mut input = Vec::with_capacity(4096);
        let mut output = Vec::with_capacity(4096);
        // Subscriptions: one forwarding task per channel, into one queue.
        let (deliver_tx, mut deliver_rx) = mpsc::channel::<Delivery>(256);
        let mut subscriptions: HashMap<Vec<u8>, JoinHandle<()>> = HashMap::new();
        let result = 'conn: loop {
            // Answer every whole command already read, then write the answers at once.
            loop {
                let parsed = match parse_command(&input) {
                    Ok(parsed) => parsed,
                    Err(e) => {
                        reply::error(&mut output, &format!("ERR {e}"));
                        self.socket.write_all(&output).await?;
                        break 'conn Ok(());
                    }
                };
                let Some((args, used)) = parsed else { break };
                input.drain(..used);
                if args.is_empty() {
                    continue;
                }
                if !self.execute(&args, &mut output, &mut subscriptions, &deliver_tx) {
                    self.socket.write_all(&output).await?;
                    break 'conn Ok(());
                }
            }
            if !output.is_empty() {
                self.socket.write_all(&output).await?;
                output.clear();
            }
            let mut chunk = [0u8; 4096];
            tokio::select! {
                read = self.socket.read(&mut chunk) => {
                    let n = read?;
                    if n == 0 {
                        break Ok(());
                    }
                    input.extend_from_slice(&chunk[..n]);
                }
                Some((channel, message)) = deliver_rx.recv(), if !subscriptions.is_empty() => {
                    reply::array(&mut output, 3);
                    reply::bulk(&mut output, b"message");
                    reply::bulk(&mut output, &channel);
                    reply::bulk(&mut output, &message);
                }
                _ = self.closing.changed() => break Ok(()),
            }
        };
        for (_, forward) in subscriptions {
            forward.abort();
        }
        result
    }

    /// Run one command, appending its reply. `false`: close the connection after the
    /// reply.
    fn execute(
        &self,
        args: &[Vec<u8>],
        out: &mut Vec<u8>,
        subscriptions: &mut HashMap<Vec<u8>, JoinHandle<()>>,
        deliver: &mpsc::Sender<Delivery>,
    ) -> bool {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
        let arity_error = |out: &mut Vec<u8>| {
            reply::error(out, &format!("ERR wrong number of arguments for '{}' command", name.to_lowercase()))
        };
        match (name.as_str(), args.len()) {
            ("PING", 1) => reply::simple(out, "PONG"),
            ("PING", 2) => reply::bulk(out, &args[1]),
            ("GET", 2) => match self.db.get(&args[1]) {
                Some(value) => reply::bulk(out, &value),
                None => reply::null(out),
            },
            ("SET", n) if n >= 3 => match expiry(&args[3..]) {
                Ok(ttl) => {
                    self.db.set(args[1].clone(), args[2].clone(), ttl);
                    reply::simple(out, "OK");
                }
                Err(e) => reply::error(out, e),
            },
            ("PUBLISH", 3) => {
                let n = self.db.publish(&args[1], args[2].clone());
                reply::integer(out, n as i64);
            }
            ("SUBSCRIBE", n) if n >= 2 => {
                for channel in &args[1..] {
                    if !subscriptions.contains_key(channel) {
                        let rx = self.db.subscribe(channel);
                        let forward = tokio::spawn(forward(channel.clone(), rx, deliver.clone()));
                        subscriptions.insert(channel.clone(), forward);
                    }
                    reply::array(out, 3);
                    reply::bulk(out, b"subscribe");
                    reply::bulk(out, channel);
                    reply::integer(out, subscriptions.len() as i64);
                }
            }
            ("UNSUBSCRIBE", n) => {
                let channels: Vec<Vec<u8>> =
                    if n == 1 { subscriptions.keys().cloned().collect() } else { args[1..].to_vec() };
                for channel in channels {
                    if let Some(forward) = subscriptions.remove(&channel) {
                        forward.abort();
                    }
                    reply::array(out, 3);
                    reply::bulk(out, b"unsubscribe");
                    reply::bulk(out, &channel);
                    reply::integer(out, subscriptions.len() as i64);
                }
            }
            // redis-benchmark and redis-cli ask for these before they start.
            ("CONFIG", _) | ("COMMAND", _) => reply::array(out, 0),
            ("QUIT", 1) => {
                reply::simple(out, "OK");
                return false;
            }
            ("PING" | "GET" | "SET" | "PUBLISH" | "SUBSCRIBE" | "QUIT", _) => arity_error(out),
            _ => reply::error(out, &format!("ERR unknown command '{}'", name.to_lowercase())),
        }
        true
    }
}

/// `SET`'s options: `EX seconds` or `PX milliseconds`.
fn expiry(options: &[Vec<u8>]) -> Result<Option<Duration>, &'static str> {
    match options {
        [] => Ok(None),
        [unit, amount] => {
            let amount: u64 = std::str::from_utf8(amount)
                .ok()
                .and_then(|s| s.parse().ok())
                .filter(|&n| n > 0)
                .ok_or("ERR invalid expire time in 'set' command")?;
            match unit.to_ascii_uppercase().as_slice() {
                b"EX" => Ok(Some(Duration::from_secs(amount))),
                b"PX" => Ok(Some(Duration::from_millis(amount))),
                _ => Err("ERR syntax error"),
            }
        }
        _ => Err("ERR syntax error"),
    }
}

/// Carry one channel's messages to a subscribed connection. A subscriber that fell too
/// far behind skips what it missed, as Redis drops a slow subscriber's backlog.
async fn forward(channel: Vec<u8>, mut rx: broadcast::Receiver<Vec<u8>>, deliver: mpsc::Sender<Delivery>) {
    loop {
        match rx.recv().await {
            Ok(message) => {
                if deliver.send((channel.clone(), message)).await.is_err() {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Lagged(_)) => continue,
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}
