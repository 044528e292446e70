//! A channel to a console server and the `WatchUpdates` subscription on it.

use crate::addr::endpoint_uri;
use crate::token::request;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint};
use volt_console_proto as proto;
use volt_console_proto::console_client::ConsoleClient;

/// A console client on a connected channel.
pub type Client = ConsoleClient<Channel>;

/// How long a one-off call may take before the caller is told it failed.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a TCP connect may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The largest message decoded: an update carries at most what the runtime's rings
/// hold, well under this.
const MAX_MESSAGE: usize = 64 << 20;

/// How often an idle connection is checked: HTTP/2 pings (answered by any server's
/// HTTP/2 layer) and TCP keepalive, so a peer that vanished without closing the
/// connection is found even while no call is waiting on it.
const KEEPALIVE: Duration = Duration::from_secs(10);

/// The endpoint for `uri` (`http://host:port`), with the connect timeout and keepalive.
pub fn endpoint(uri: String) -> Result<Endpoint, String> {
    Ok(Endpoint::from_shared(uri)
        .map_err(|e| e.to_string())?
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_keepalive(Some(KEEPALIVE))
        .http2_keep_alive_interval(KEEPALIVE)
        .keep_alive_timeout(KEEPALIVE)
        .keep_alive_while_idle(true))
}

/// Connect to `endpoint`; the error is the transport's, with its causes.
pub async fn open(endpoint: Endpoint) -> Result<Client, String> {
    let channel = endpoint.connect().await.map_err(|e| crate::error::error_chain(&e))?;
    Ok(ConsoleClient::new(channel).max_decoding_message_size(MAX_MESSAGE))
}

/// Connect to `addr` as a user gave it (see [`crate::addr`]).
pub async fn connect(addr: &str) -> Result<Client, String> {
    let endpoint = endpoint(endpoint_uri(addr)?).map_err(|e| format!("{addr:?}: {e}"))?;
    open(endpoint).await.map_err(|e| format!("cannot connect to {addr}: {e}"))
}

/// Subscribe to the update stream with `watch`, carrying the token.
/// A server that accepts the connection and then never answers (not a console, or a
/// stuck one) is an error after [`CALL_TIMEOUT`], so the caller backs off and tries
/// again instead of waiting for good.
pub async fn subscribe(
    client: &mut Client,
    watch: proto::WatchRequest,
    token: Option<&str>,
) -> Result<tonic::Streaming<proto::Update>, String> {
    match tokio::time::timeout(CALL_TIMEOUT, client.watch_updates(request(watch, token))).await {
        Ok(Ok(s)) => Ok(s.into_inner()),
        Ok(Err(s)) => Err(status_text(&s)),
        Err(_) => Err(format!("the server did not answer the subscription within {} s", CALL_TIMEOUT.as_secs())),
    }
}

/// A gRPC status as one line: its message, its code, and the cause underneath (a
/// transport failure's status says only "transport error"; the reason is its source).
pub fn status_text(s: &tonic::Status) -> String {
    let msg = crate::error::with_causes(s.message().to_string(), std::error::Error::source(s));
    format!("{msg} ({:?})", s.code())
}
