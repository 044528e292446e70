//! The Redis protocol (RESP2): commands in, replies out.
//!
//! A client sends each command as an array of bulk strings
//! (`*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n`), or as one inline line (`PING\r\n`, what a person
//! types into `nc`). Replies are simple strings, errors, integers, bulk strings, nulls and
//! arrays.

use std::fmt;

/// The longest bulk string and the most arguments a command may carry: beyond them the
/// client is cut off rather than the server allocating what it asks for.
const MAX_BULK: usize = 512 * 1024 * 1024;
const MAX_ARGS: usize = 1024 * 1024;

/// A malformed command. The connection answers with an error and closes: after a framing
/// error nothing that follows can be trusted to start a command.
#[derive(Debug, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

/// A parsed command: its arguments, and how many bytes of the input it took.
pub type Parsed = Option<(Vec<Vec<u8>>, usize)>;

/// Parse one command from the front of `buf`: its arguments and the bytes it took, or
/// `None` while it has not wholly arrived.
pub fn parse_command(buf: &[u8]) -> Result<Parsed, ProtocolError> {
    if buf.is_empty() {
        return Ok(None);
    }
    if buf[0] != b'*' {
        return parse_inline(buf);
    }
    let Some((count, mut at)) = line_number(buf, 1)? else { return Ok(None) };
    if count < 0 {
        return Ok(Some((Vec::new(), at)));
    }
    let count = count as usize;
    if count > MAX_ARGS {
        return Err(ProtocolError(format!("invalid multibulk length {count}")));
    }
    let mut args = Vec::with_capacity(count.min(64));
    for _ in 0..count {
        if at >= buf.len() {
            return Ok(None);
        }
        if buf[at] != b'$' {
            return Err(ProtocolError(format!("expected '$', got '{}'", buf[at] as char)));
        }
        let Some((len, start)) = line_number(buf, at + 1)? else { return Ok(None) };
        if len < 0 || len as usize > MAX_BULK {
            return Err(ProtocolError(format!("invalid bulk length {len}")));
        }
        let end = start + len as usize;
        if buf.len() < end + 2 {
            return Ok(None);
        }
        if &buf[end..end + 2] != b"\r\n" {
            return Err(ProtocolError("bulk string not followed by CRLF".into()));
        }
        args.push(buf[start..end].to_vec());
        at = end + 2;
    }
    Ok(Some((args, at)))
}

/// A decimal number from `from` to the end of its line, and where the next line starts.
fn line_number(buf: &[u8], from: usize) -> Result<Option<(i64, usize)>, ProtocolError> {
    let Some(nl) = buf[from..].iter().position(|&b| b == b'\n') else {
        if buf.len() - from > 32 {
            return Err(ProtocolError("length line too long".into()));
        }
        return Ok(None);
    };
    let line = &buf[from..from + nl];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = std::str::from_utf8(line).map_err(|_| ProtocolError("length is not a number".into()))?;
    let n = text.parse::<i64>().map_err(|_| ProtocolError(format!("invalid length {text:?}")))?;
    Ok(Some((n, from + nl + 1)))
}

/// An inline command: one line of words.
fn parse_inline(buf: &[u8]) -> Result<Parsed, ProtocolError> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > 64 * 1024 {
            return Err(ProtocolError("too big inline request".into()));
        }
        return Ok(None);
    };
    let line = &buf[..nl];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let args = line.split(|b| b.is_ascii_whitespace()).filter(|w| !w.is_empty()).map(<[u8]>::to_vec).collect();
    Ok(Some((args, nl + 1)))
}

/// Append replies to an output buffer.
pub mod reply {
    /// `+OK`.
    pub fn simple(out: &mut Vec<u8>, s: &str) {
        out.push(b'+');
        out.extend_from_slice(s.as_bytes());
        out.extend_from_slice(b"\r\n");
    }

    /// `-ERR ...`.
    pub fn error(out: &mut Vec<u8>, s: &str) {
        out.push(b'-');
        out.extend_from_slice(s.as_bytes());
        out.extend_from_slice(b"\r\n");
    }

    /// `:42`.
    pub fn integer(out: &mut Vec<u8>, n: i64) {
        out.push(b':');
        out.extend_from_slice(n.to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
    }

    /// `$3\r\nabc`.
    pub fn bulk(out: &mut Vec<u8>, data: &[u8]) {
        out.push(b'$');
        out.extend_from_slice(data.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(data);
        out.extend_from_slice(b"\r\n");
    }

    /// `$-1`: no value.
    pub fn null(out: &mut Vec<u8>) {
        out.extend_from_slice(b"$-1\r\n");
    }

    /// The header of an array of `n` replies.
    pub fn array(out: &mut Vec<u8>, n: usize) {
        out.push(b'*');
        out.extend_from_slice(n.to_string().as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_parsed_only_once_whole() {
        let cmd = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
        for cut in 0..cmd.len() {
            assert_eq!(parse_command(&cmd[..cut]).unwrap(), None, "cut at {cut}");
        }
        let (args, used) = parse_command(cmd).unwrap().unwrap();
        assert_eq!(args, vec![b"GET".to_vec(), b"key".to_vec()]);
        assert_eq!(used, cmd.len());
    }

    #[test]
    fn inline_commands_and_bad_frames() {
        let (args, used) = parse_command(b"PING  hello\r\nrest").unwrap().unwrap();
        assert_eq!(args, vec![b"PING".to_vec(), b"hello".to_vec()]);
        assert_eq!(used, 13);
        assert!(parse_command(b"*1\r\n+GET\r\n").is_err());
        assert!(parse_command(b"*x\r\n").is_err());
        assert!(parse_command(b"*1\r\n$3\r\nGETxx").is_err());
    }
}
