//! Who may call: the token a non-loopback bind needs, and the check every call passes
//! (reflection included) when a token is set. See "Security" in the module doc.

use std::io;
use std::net::SocketAddr;
use tonic::{Request, Status};

/// The token to require: `configured` (`Builder::console_token`), else
/// `VOLT_CONSOLE_TOKEN` if set and non-empty. Serving beyond loopback without one is
/// refused, so telemetry never leaves the machine unauthenticated by accident.
pub(super) fn token_for(configured: Option<String>, addr: SocketAddr) -> io::Result<Option<String>> {
    let token = configured.or_else(|| std::env::var("VOLT_CONSOLE_TOKEN").ok()).filter(|t| !t.is_empty());
    if let Some(t) = &token {
        // A client sends the token in a header: a control character (a newline read
        // from a file with it) cannot go there, and whitespace at the ends is dropped on
        // the way. Such a token would refuse every call, so it is refused here.
        if t.chars().any(char::is_control) || t.trim() != t {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "volt console: the token has whitespace at an end or a control character (a trailing newline?), \
                 which no client can send in a header",
            ));
        }
    }
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "volt console: {addr} is not a loopback address, and serving telemetry beyond this machine needs \
                 a token: set VOLT_CONSOLE_TOKEN (or Builder::console_token), or bind 127.0.0.1"
            ),
        ));
    }
    Ok(token)
}

/// Constant-time comparison of the presented token. A call that passes proves its
/// connection to the connection gate (see `limits`): from then on the gate never closes
/// it to make room for another.
pub(super) fn check_token(expected: Option<&str>, req: Request<()>) -> Result<Request<()>, Status> {
    let prove = |req: Request<()>| {
        if let Some(info) = req.extensions().get::<super::limits::GuardedInfo>() {
            info.admission.prove();
        }
        Ok(req)
    };
    let Some(expected) = expected else { return prove(req) };
    // Compared as bytes: a token beyond ASCII arrives as its UTF-8 bytes, which a
    // header's text form would refuse to show.
    let presented =
        req.metadata().get("authorization").and_then(|v| v.as_bytes().strip_prefix(b"Bearer ")).unwrap_or(b"");
    let (a, b) = (presented, expected.as_bytes());
    let diff = a.iter().zip(b.iter()).fold(a.len() ^ b.len(), |d, (x, y)| d | (*x ^ *y) as usize);
    if diff == 0 {
        prove(req)
    } else {
        Err(Status::unauthenticated(
            "volt console: missing or wrong token; send the metadata `authorization: Bearer <VOLT_CONSOLE_TOKEN>`",
        ))
    }
}
