//! The `grpc` example's service on Volt: called by tonic's client on a Tokio runtime,
//! by the Volt client of the example, and the example's binary in both modes.

mod common;

use common::{Running, BOUND};
use volt_examples::greeter::greeter_client::GreeterClient;
use volt_examples::greeter::{CountRequest, HelloRequest};

/// A Volt runtime serving the greeter on a free port; stops when `stop` is sent.
fn start(
) -> (volt::Runtime, std::net::SocketAddr, futures::channel::oneshot::Sender<()>, volt::JoinHandle<std::io::Result<()>>)
{
    let rt = volt::runtime::Builder::new().worker_threads(2).build().unwrap();
    let (tx, rx) = futures::channel::oneshot::channel::<()>();
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let server = rt.spawn(async move {
        let listener = volt::net::TcpListener::bind("127.0.0.1:0").await?;
        addr_tx.send(listener.local_addr()?).unwrap();
        volt_examples::grpc::serve(listener, async move {
            let _ = rx.await;
        })
        .await
    });
    let addr = addr_rx.recv_timeout(BOUND).unwrap();
    (rt, addr, tx, server)
}

fn stop(rt: &volt::Runtime, tx: futures::channel::oneshot::Sender<()>, server: volt::JoinHandle<std::io::Result<()>>) {
    tx.send(()).unwrap();
    rt.block_on(async { volt::time::timeout(BOUND, server).await }).expect("server stops").unwrap().unwrap();
}

#[test]
fn tonic_client_on_tokio_calls_the_server_on_volt() {
    let (rt, addr, tx, server) = start();
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    tokio.block_on(async {
        let mut client = tokio::time::timeout(BOUND, GreeterClient::connect(format!("http://{addr}")))
            .await
            .unwrap()
            .expect("connect");
        let reply = client.say_hello(HelloRequest { name: "Tokio".into() }).await.unwrap().into_inner();
        assert_eq!(reply.message, "Hello, Tokio!");
        let status = client.say_hello(HelloRequest { name: String::new() }).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);

        let mut stream = client.count(CountRequest { count: 500, interval_ms: 0 }).await.unwrap().into_inner();
        let mut got = Vec::new();
        while let Some(r) = tokio::time::timeout(BOUND, stream.message()).await.unwrap().unwrap() {
            got.push(r.n);
        }
        assert_eq!(got, (1..=500).collect::<Vec<_>>(), "every reply, in order");

        // 50 concurrent calls over the one HTTP/2 connection.
        let calls: Vec<_> = (0..50)
            .map(|i| {
                let mut c = client.clone();
                tokio::spawn(async move {
                    c.say_hello(HelloRequest { name: format!("n{i}") }).await.unwrap().into_inner().message
                })
            })
            .collect();
        for (i, c) in calls.into_iter().enumerate() {
            assert_eq!(c.await.unwrap(), format!("Hello, n{i}!"));
        }
    });
    stop(&rt, tx, server);
}

#[test]
fn volt_client_calls_the_server_on_volt() {
    let (rt, addr, tx, server) = start();
    rt.block_on(async move {
        let mut client = volt_examples::grpc::client(addr).unwrap();
        let reply = volt::time::timeout(BOUND, client.say_hello(HelloRequest { name: "Volt".into() }))
            .await
            .unwrap()
            .unwrap()
            .into_inner();
        assert_eq!(reply.message, "Hello, Volt!");
        let mut stream = client.count(CountRequest { count: 20, interval_ms: 1 }).await.unwrap().into_inner();
        let mut n = 0;
        while let Some(r) = volt::time::timeout(BOUND, stream.message()).await.unwrap().unwrap() {
            n += 1;
            assert_eq!(r.n, n);
        }
        assert_eq!(n, 20);
    });
    stop(&rt, tx, server);
}

/// A client that stops reading a `Count` stream and drops it: the task producing the
/// replies stops too (tonic drops the response stream, its channel closes, and the next
/// send fails), so the server holds no task for a call nobody reads.
#[test]
fn a_dropped_count_stream_stops_its_producer() {
    let (rt, addr, tx, server) = start();
    let metrics = rt.metrics();
    rt.block_on(async move {
        let mut client = volt_examples::grpc::client(addr).unwrap();
        volt::time::timeout(BOUND, client.say_hello(HelloRequest { name: "first".into() })).await.unwrap().unwrap();
        // The server's task, the connection's, and the client's: what stays.
        let idle = metrics.num_alive_tasks();
        let mut stream = client.count(CountRequest { count: 10_000, interval_ms: 100 }).await.unwrap().into_inner();
        for want in 1..=3 {
            let r = volt::time::timeout(BOUND, stream.message()).await.unwrap().unwrap().expect("a reply");
            assert_eq!(r.n, want);
        }
        assert!(metrics.num_alive_tasks() > idle, "the producer runs while the stream is read");
        drop(stream);
        let deadline = std::time::Instant::now() + BOUND;
        while metrics.num_alive_tasks() > idle {
            assert!(
                std::time::Instant::now() < deadline,
                "{} tasks alive, {idle} before the call: the producer kept running",
                metrics.num_alive_tasks()
            );
            volt::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    });
    stop(&rt, tx, server);
}

#[test]
fn the_example_binary_serves_and_calls() {
    let mut server = Running::start("grpc", &["serve", "--addr", "127.0.0.1:0", "--workers", "2"]);
    let line = server.line_with("serving");
    let addr = line.rsplit(' ').next().unwrap().to_owned();
    let out = std::process::Command::new(common::example("grpc"))
        .args(["client", "--addr", &addr, "--name", "Ada", "--count", "3"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout, "SayHello: Hello, Ada!\nCount: 1\nCount: 2\nCount: 3\n");
    server.interrupt();
    server.line_with("stopped");
    assert!(server.wait().success());
}
