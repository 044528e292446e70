//! The `grpc` example's service and client, shared with its tests.
//!
//! The server is tonic's generated `GreeterServer`, served by `volt::hyper::serve` as a
//! tower service (gRPC is HTTP/2; the server sees the client's HTTP/2 preface and speaks
//! it). The client is tonic's generated `GreeterClient` over hyper-util's client on Volt
//! (`volt::hyper::Connector`), so neither side needs a Tokio runtime.

use crate::greeter::greeter_client::GreeterClient;
use crate::greeter::greeter_server::{Greeter, GreeterServer};
use crate::greeter::{CountReply, CountRequest, HelloReply, HelloRequest};
use std::pin::Pin;
use std::time::Duration;
use tonic::{Request, Response, Status};

/// The most replies one `Count` stream sends.
pub const MAX_COUNT: u32 = 10_000;

/// The service: `SayHello` greets, `Count` streams `1..=count`.
#[derive(Debug, Default, Clone)]
pub struct GreeterService;

type CountStream = Pin<Box<dyn futures::Stream<Item = Result<CountReply, Status>> + Send>>;

#[tonic::async_trait]
impl Greeter for GreeterService {
    async fn say_hello(&self, request: Request<HelloRequest>) -> Result<Response<HelloReply>, Status> {
        let name = request.into_inner().name;
        if name.is_empty() {
            return Err(Status::invalid_argument("name must not be empty"));
        }
        Ok(Response::new(HelloReply { message: format!("Hello, {name}!") }))
    }

    type CountStream = CountStream;

    async fn count(&self, request: Request<CountRequest>) -> Result<Response<CountStream>, Status> {
        let CountRequest { count, interval_ms } = request.into_inner();
        if count > MAX_COUNT {
            return Err(Status::invalid_argument(format!("count must be at most {MAX_COUNT}")));
        }
        let pause = Duration::from_millis(u64::from(interval_ms.min(10_000)));
        // A task produces the replies into a channel, and the response streams it: the
        // usual shape of a tonic streaming handler (`ReceiverStream` from volt-stream,
        // tokio-stream's API over Volt's channel). When the client goes away, tonic drops
        // the stream, the channel closes, and the producer stops at its next send.
        let (tx, rx) = volt::sync::mpsc::channel(16);
        volt::spawn(async move {
            for n in 1..=count {
                if n > 1 && !pause.is_zero() {
                    volt::time::sleep(pause).await;
                }
                if tx.send(Ok(CountReply { n })).await.is_err() {
                    break;
                }
            }
        });
        let stream = volt_stream::wrappers::ReceiverStream::new(rx);
        Ok(Response::new(Box::pin(stream)))
    }
}

/// The routes to hand `volt::hyper::serve`.
pub fn routes() -> tonic::service::Routes {
    tonic::service::Routes::new(GreeterServer::new(GreeterService))
}

/// Serve the greeter on `listener` until `shutdown` completes.
pub async fn serve(
    listener: volt::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    volt::hyper::serve(listener, routes())
        .with_graceful_shutdown(shutdown)
        .shutdown_deadline(Duration::from_secs(5))
        .await
}

/// The transport of [`client`]: hyper-util's HTTP/2 client on Volt.
pub type Transport = hyper_util::client::legacy::Client<volt::hyper::Connector, tonic::body::Body>;

/// A greeter client on Volt for `http://addr` (`addr`: a socket address, or `host:port`,
/// whose name the connector looks up on the blocking pool). Call it from inside a Volt
/// runtime.
pub fn client(
    addr: impl std::fmt::Display,
) -> Result<GreeterClient<Transport>, Box<dyn std::error::Error + Send + Sync>> {
    let transport = hyper_util::client::legacy::Client::builder(volt::hyper::Executor::new())
        .timer(volt::hyper::Timer::new())
        .pool_timer(volt::hyper::Timer::new())
        .http2_only(true)
        .build(volt::hyper::Connector::new());
    let origin: http::Uri = format!("http://{addr}").parse()?;
    Ok(GreeterClient::with_origin(transport, origin))
}
