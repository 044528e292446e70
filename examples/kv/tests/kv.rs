//! The server as its clients meet it: real sockets on loopback, Redis's wire protocol,
//! and the paused clock for expiry. Written with `#[tokio::test]` as a Tokio
//! application's tests would be; here `tokio` is Volt.

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A key set to expire in five minutes is there until then and gone after, and the
/// purge task removes it from the map, all on the paused clock: the test takes
/// milliseconds of real time.
#[tokio::test(start_paused = true)]
async fn a_key_expires_after_minutes_on_the_paused_clock() {
    let db = kv::Db::new();
    db.set(b"session".to_vec(), b"alive".to_vec(), Some(Duration::from_secs(300)));
    db.set(b"forever".to_vec(), b"here".to_vec(), None);
    let start = tokio::time::Instant::now();
    tokio::time::advance(Duration::from_secs(299)).await;
    assert_eq!(db.get(b"session").as_deref(), Some(&b"alive"[..]), "still there 1 s before its expiry");
    tokio::time::advance(Duration::from_secs(2)).await;
    assert_eq!(db.get(b"session"), None, "gone after its expiry");
    assert_eq!(db.get(b"forever").as_deref(), Some(&b"here"[..]));
    // The purge task runs on the same runtime: let it.
    for _ in 0..1000 {
        if db.len() == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(db.len(), 1, "the purge task removed the expired key");
    assert_eq!(start.elapsed(), Duration::from_secs(301), "only the virtual clock moved");
}

/// Setting an earlier expiry wakes the purge task that sleeps until a later one.
#[tokio::test(start_paused = true)]
async fn an_earlier_expiry_wakes_the_purge_task() {
    let db = kv::Db::new();
    db.set(b"late".to_vec(), b"1".to_vec(), Some(Duration::from_secs(3600)));
    tokio::task::yield_now().await;
    db.set(b"early".to_vec(), b"2".to_vec(), Some(Duration::from_secs(60)));
    tokio::time::sleep(Duration::from_secs(61)).await;
    for _ in 0..1000 {
        if db.len() == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    assert_eq!(db.len(), 1, "the early key was purged at its own deadline, not the late one's");
    assert!(db.get(b"late").is_some());
}

/// Send a command as a RESP array.
async fn command(conn: &mut TcpStream, args: &[&str]) {
    let mut out = format!("*{}\r\n", args.len());
    for a in args {
        out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    conn.write_all(out.as_bytes()).await.unwrap();
}

/// Read until `want` bytes have arrived (replies here are short and known).
async fn expect(conn: &mut TcpStream, want: &str) {
    let mut got = vec![0u8; want.len()];
    tokio::time::timeout(Duration::from_secs(10), conn.read_exact(&mut got))
        .await
        .expect("the reply came")
        .expect("the connection stayed open");
    assert_eq!(String::from_utf8_lossy(&got), want);
}

async fn start() -> (std::net::SocketAddr, tokio::sync::oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(kv::run(listener, kv::Db::new(), async move {
        let _ = stop_rx.await;
    }));
    (addr, stop_tx, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_set_ping_publish_and_subscribe_over_the_wire() {
    let (addr, stop, server) = start().await;
    let mut a = TcpStream::connect(addr).await.unwrap();
    command(&mut a, &["PING"]).await;
    expect(&mut a, "+PONG\r\n").await;
    command(&mut a, &["GET", "k"]).await;
    expect(&mut a, "$-1\r\n").await;
    command(&mut a, &["SET", "k", "hello"]).await;
    expect(&mut a, "+OK\r\n").await;
    command(&mut a, &["GET", "k"]).await;
    expect(&mut a, "$5\r\nhello\r\n").await;
    // An inline command, as typed into `nc`.
    a.write_all(b"PING hi\r\n").await.unwrap();
    expect(&mut a, "$2\r\nhi\r\n").await;
    command(&mut a, &["SET", "k", "v", "EX", "0"]).await;
    expect(&mut a, "-ERR invalid expire time in 'set' command\r\n").await;

    let mut sub = TcpStream::connect(addr).await.unwrap();
    command(&mut sub, &["SUBSCRIBE", "news", "sport"]).await;
    expect(&mut sub, "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n").await;
    expect(&mut sub, "*3\r\n$9\r\nsubscribe\r\n$5\r\nsport\r\n:2\r\n").await;
    command(&mut a, &["PUBLISH", "news", "extra"]).await;
    expect(&mut a, ":1\r\n").await;
    expect(&mut sub, "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nextra\r\n").await;
    command(&mut sub, &["UNSUBSCRIBE", "news"]).await;
    expect(&mut sub, "*3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:1\r\n").await;
    command(&mut a, &["PUBLISH", "nobody", "x"]).await;
    expect(&mut a, ":0\r\n").await;

    // Shutdown closes every connection and the server returns.
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server).await.expect("the server stopped").unwrap();
    for conn in [&mut a, &mut sub] {
        let mut rest = Vec::new();
        let n = tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut rest)).await.unwrap().unwrap_or(0);
        assert_eq!(n, 0, "nothing more after the shutdown: {rest:?}");
    }
}

/// A malformed frame gets an error and the connection closes; others are unaffected.
#[tokio::test]
async fn a_malformed_command_closes_only_its_connection() {
    let (addr, stop, server) = start().await;
    let mut good = TcpStream::connect(addr).await.unwrap();
    let mut bad = TcpStream::connect(addr).await.unwrap();
    bad.write_all(b"*1\r\n+GET\r\n").await.unwrap();
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), bad.read_to_end(&mut reply)).await.unwrap().unwrap();
    assert!(reply.starts_with(b"-ERR Protocol error"), "{:?}", String::from_utf8_lossy(&reply));
    command(&mut good, &["PING"]).await;
    expect(&mut good, "+PONG\r\n").await;
    stop.send(()).unwrap();
    server.await.unwrap();
}

/// Many clients at once on two workers: every SET is visible to every GET after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_lose_no_write() {
    let (addr, stop, server) = start().await;
    let mut clients = Vec::new();
    for c in 0..50 {
        clients.push(tokio::spawn(async move {
            let mut conn = TcpStream::connect(addr).await.unwrap();
            for i in 0..20 {
                let (key, value) = (format!("c{c}:{i}"), format!("v{i}"));
                command(&mut conn, &["SET", &key, &value]).await;
                expect(&mut conn, "+OK\r\n").await;
            }
        }));
    }
    for c in clients {
        c.await.unwrap();
    }
    let mut conn = TcpStream::connect(addr).await.unwrap();
    for c in 0..50 {
        for i in 0..20 {
            command(&mut conn, &["GET", &format!("c{c}:{i}")]).await;
            let v = format!("v{i}");
            expect(&mut conn, &format!("${}\r\n{v}\r\n", v.len())).await;
        }
    }
    stop.send(()).unwrap();
    server.await.unwrap();
}
