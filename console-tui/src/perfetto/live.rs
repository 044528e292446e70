//! A timeline of a running process: its console's update stream, recorded for a while
//! into a recording like `--record` writes, which is then exported as any recording is
//! (two passes need a file to read twice; memory holds one update at a time).

use super::{ExportError, LiveOptions};
use crate::client;
use crate::record::RecordWriter;
use std::path::{Path, PathBuf};
use std::time::Duration;
use volt_console_proto as proto;

/// Tasks whose names the stream carries (the most a window may hold), busiest first:
/// the tasks that fill the timeline get their names.
const NAMED_TASKS: u32 = 10_000;

/// What a capture got.
#[derive(Debug)]
pub struct Capture {
    /// Updates recorded.
    pub updates: u64,
    /// Events in them.
    pub events: u64,
    /// Why the stream ended before the time was up, if it did.
    pub ended_early: Option<String>,
}

/// Record `options.duration` of the stream of the console at `addr` into `path`. The
/// first update is awaited at least [`client::CALL_TIMEOUT`], however short the
/// duration.
pub fn capture(addr: &str, options: &LiveOptions, path: &Path) -> Result<Capture, ExportError> {
    let unreachable =
        |e: String| ExportError::Source(format!("{addr} is neither a recording nor a reachable console: {e}"));
    client::endpoint_uri(addr).map_err(|e| unreachable(e.to_string()))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| ExportError::Io(format!("cannot start the client's runtime: {e}")))?;
    rt.block_on(async {
        let mut c = client::connect(addr).await.map_err(unreachable)?;
        let watch = proto::WatchRequest {
            max_events_per_update: options.max_events,
            task_query: Some(proto::TaskQuery {
                sort: proto::TaskSort::Busy as i32,
                limit: NAMED_TASKS,
                ..Default::default()
            }),
            skip_lost_wakers: true,
            ..Default::default()
        };
        let mut stream = client::subscribe(&mut c, watch, options.token.as_deref())
            .await
            .map_err(|e| ExportError::Source(format!("{addr} answered, but its update stream did not: {e}")))?;
        let mut out = RecordWriter::create(path).map_err(|e| ExportError::Io(e.to_string()))?;
        let start = tokio::time::Instant::now();
        let first_by = start + options.duration.max(client::CALL_TIMEOUT);
        let deadline = start + options.duration;
        let mut got = Capture { updates: 0, events: 0, ended_early: None };
        loop {
            let until = if got.updates == 0 { first_by } else { deadline };
            let u = match tokio::time::timeout_at(until, stream.message()).await {
                Err(_) => break,
                Ok(Ok(Some(u))) => u,
                Ok(Ok(None)) => {
                    got.ended_early = Some("the server ended the stream".into());
                    break;
                }
                Ok(Err(s)) => {
                    got.ended_early = Some(client::status_text(&s));
                    break;
                }
            };
            if u.runtime.as_ref().is_some_and(|info| info.event_ring_capacity == 0) {
                return Err(ExportError::Empty(format!(
                    "the runtime at {addr} keeps no events (it was built without Builder::event_ring): \
                     there is no timeline to draw"
                )));
            }
            got.updates += 1;
            got.events += u.events.len() as u64;
            out.write(&u)
                .map_err(|e| ExportError::Io(format!("cannot write the recording {}: {e}", path.display())))?;
        }
        if got.updates == 0 {
            let why = got
                .ended_early
                .take()
                .unwrap_or_else(|| format!("no update came within {} s", first_by.duration_since(start).as_secs_f64()));
            return Err(ExportError::Empty(format!("nothing recorded from {addr}: {why}")));
        }
        Ok(got)
    })
}

/// A recording in the temporary directory, removed when dropped.
pub struct TempRecording {
    /// Where it is.
    pub path: PathBuf,
}

impl TempRecording {
    /// A fresh path for one (the file is created by whoever writes it).
    pub fn new() -> TempRecording {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("volt-console-export-{}-{n}.voltrec", std::process::id());
        TempRecording { path: std::env::temp_dir().join(name) }
    }
}

impl Drop for TempRecording {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The longest a live capture may be: a day (the temporary recording grows with it;
/// memory does not).
pub const MAX_CAPTURE: Duration = Duration::from_secs(24 * 3600);
