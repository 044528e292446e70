//! Recordings: `--record FILE` writes every update it receives; `--replay FILE` plays
//! them back.
//!
//! Format: the 8 bytes `VOLTREC1`, then each `volt.console.v1.Update` as a
//! varint-length-delimited protobuf message. Updates carry their own uptime, which paces
//! the replay. A file cut short (the recorder was killed mid-write) replays up to its last
//! whole update.

use prost::Message;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::Path;
use volt_console_proto as proto;

/// The first bytes of a recording.
pub const MAGIC: &[u8; 8] = b"VOLTREC1";

/// Appends updates to a recording file.
pub struct RecordWriter {
    out: BufWriter<File>,
    written: u64,
}

impl RecordWriter {
    /// Create (or truncate) `path` and write the header.
    pub fn create(path: &Path) -> io::Result<RecordWriter> {
        let f = File::create(path)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot create the recording {}: {e}", path.display())))?;
        let mut out = BufWriter::new(f);
        out.write_all(MAGIC)?;
        out.flush()?;
        Ok(RecordWriter { out, written: 0 })
    }

    /// Append one update and flush it, so a killed recorder loses at most the update it
    /// was writing.
    pub fn write(&mut self, u: &proto::Update) -> io::Result<()> {
        self.out.write_all(&u.encode_length_delimited_to_vec())?;
        self.out.flush()?;
        self.written += 1;
        Ok(())
    }

    /// Updates written so far.
    pub fn written(&self) -> u64 {
        self.written
    }
}

/// A recording read back.
#[derive(Debug)]
pub struct Recording {
    pub updates: Vec<proto::Update>,
    /// Bytes at the end that did not form a whole update (0 for a complete file).
    pub truncated_bytes: usize,
}

/// Read a whole recording.
pub fn read(path: &Path) -> io::Result<Recording> {
    let mut buf = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut buf))
        .map_err(|e| io::Error::new(e.kind(), format!("cannot read the recording {}: {e}", path.display())))?;
    if buf.len() < MAGIC.len() || &buf[..MAGIC.len()] != MAGIC {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is not a volt-console recording (no VOLTREC1 header)", path.display()),
        ));
    }
    let mut rest = &buf[MAGIC.len()..];
    let mut updates = Vec::new();
    while !rest.is_empty() {
        let before = rest;
        match proto::Update::decode_length_delimited(&mut rest) {
            Ok(u) => updates.push(u),
            Err(_) => {
                return Ok(Recording { updates, truncated_bytes: before.len() });
            }
        }
    }
    Ok(Recording { updates, truncated_bytes: 0 })
}
