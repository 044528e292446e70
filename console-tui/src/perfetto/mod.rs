//! A timeline to look at: a recording (`volt-console --record`), or a few seconds of a
//! live console, as a Perfetto trace (`volt-console --export-perfetto SOURCE OUT`),
//! which ui.perfetto.dev opens.
//!
//! ```no_run
//! use std::path::Path;
//! use volt_console::perfetto;
//!
//! let summary = perfetto::export_recording(Path::new("run.voltrec"), Path::new("run.pftrace"))?;
//! println!("{summary}");
//! # Ok::<(), perfetto::ExportError>(())
//! ```
//!
//! # What the trace shows
//! The runtime is a process (its pid), each worker a thread of it, `worker N`, and the
//! events recorded by other threads go on a track of their own, `outside the workers`.
//! On a worker's track:
//!
//! | what | drawn as | arguments |
//! |---|---|---|
//! | a poll | a slice named by its task (its name in the recorded task lists, else `task <id>`) | `task_id`, `outcome` (`ready`, `pending`, or `unfinished` when the data ends first) |
//! | a park | a slice `parked` or `parked in reactor` | `woke` (`notified`, `timeout or I/O`) |
//! | a steal | an instant `steal` | `victim`, `count`, `runs_task` (the task run first) |
//! | a stall | a slice `stall` inside the stalled poll, over the stall's own span | `task_id`, `task`, `duration_ms` |
//! | an overflow, a cancel, a panic | an instant | the count, or the task |
//!
//! Who woke whom is drawn as flow arrows: from the poll of the task that woke (or
//! spawned) another to that task's next (or first) poll. Spawns and wakes from threads
//! outside the workers are instants on the outside track, with their arrows starting
//! there, as are cancels and panics recorded there. How events become slices, flows and
//! stalls is `timeline`'s business; what needs the whole recording first (the workers,
//! task names, stall reports) is `index`'s.
//!
//! # Two passes, bounded memory
//! A recording is read twice, one update at a time: once for the workers, the task names
//! and the stall reports, once to write the packets. A live process's stream is recorded
//! into a temporary recording first (`live`), then exported the same way. Memory holds
//! the names, the stall reports and, per worker, a window of recent slices, whatever the
//! recording's length.
//!
//! # The format
//! `trace` declares the few messages the export writes with prost, with Perfetto's own
//! field numbers. The crates that ship Perfetto's protos either build them with
//! prost-build when compiled, which needs a `protoc` installed on the machine (the
//! workspace takes its protoc from a crate instead), or generate all of Perfetto's
//! hundreds of schema files for another protobuf runtime, minutes of compiling for the
//! seven messages written here. The export's test reads the file back with Perfetto's own
//! definitions.

mod decode;
mod index;
mod live;
mod timeline;
mod trace;

pub use live::MAX_CAPTURE;
pub use timeline::Counts;

use index::{Index, MAX_WORKERS};

use crate::record::RecordReader;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::time::Duration;
use timeline::Timeline;

/// What to export: a recording, or a console to record from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A file written by `volt-console --record`.
    Recording(PathBuf),
    /// A console's address (`host:port` or `http://host:port`).
    Live(String),
}

impl Source {
    /// What a user's `SOURCE` names: a recording if a file is there, else a console's
    /// address; neither is an error that says both.
    pub fn parse(arg: &str) -> Result<Source, ExportError> {
        let path = Path::new(arg);
        if path.exists() {
            return Ok(Source::Recording(path.to_path_buf()));
        }
        match crate::client::endpoint_uri(arg) {
            Ok(_) => Ok(Source::Live(arg.to_string())),
            Err(e) => Err(ExportError::Source(format!(
                "{arg} is neither a recording (there is no such file) nor a console's address ({e})"
            ))),
        }
    }
}

/// How to record from a live console.
#[derive(Clone, Debug)]
pub struct LiveOptions {
    /// How long to record.
    pub duration: Duration,
    /// The console's token, if it needs one.
    pub token: Option<String>,
    /// Events per update to ask for (see `WatchRequest.max_events_per_update`).
    pub max_events: u32,
}

impl Default for LiveOptions {
    fn default() -> LiveOptions {
        LiveOptions { duration: Duration::from_secs(5), token: None, max_events: crate::client::DEFAULT_MAX_EVENTS }
    }
}

/// Why an export failed.
#[derive(Debug)]
pub enum ExportError {
    /// The input is not something to export from: not a recording, not a reachable
    /// console.
    Source(String),
    /// The input holds nothing to draw: no updates, or no events.
    Empty(String),
    /// Reading or writing failed.
    Io(String),
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::Source(m) | ExportError::Empty(m) | ExportError::Io(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ExportError {}

/// What an export read and wrote.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Updates read.
    pub updates: u64,
    /// Events read.
    pub events: u64,
    /// Worker tracks.
    pub workers: usize,
    /// Task names known.
    pub names: usize,
    /// What was drawn.
    pub counts: Counts,
    /// Damaged updates the recording skipped.
    pub skipped: u64,
    /// Bytes at the recording's end that did not form an update.
    pub truncated_bytes: u64,
    /// The recording goes on with another runtime (this pid), left out.
    pub next_runtime: Option<u32>,
    /// A live stream that ended before its time was up, and why.
    pub ended_early: Option<String>,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.counts;
        write!(
            f,
            "{} events of {} updates: {} workers, {} polls, {} parks, {} steals, {} stalls, {} flows",
            self.events,
            self.updates,
            self.workers,
            c.polls,
            c.parks,
            c.steals,
            c.stalls + c.stall_instants,
            c.flows_ended
        )?;
        if self.skipped > 0 {
            write!(f, "; {} damaged updates skipped", self.skipped)?;
        }
        if self.truncated_bytes > 0 {
            write!(f, "; the recording ends with {} bytes of a cut-off update", self.truncated_bytes)?;
        }
        if let Some(pid) = self.next_runtime {
            write!(f, "; the recording goes on with another runtime (pid {pid}), left out")?;
        }
        if let Some(why) = &self.ended_early {
            write!(f, "; the stream ended early: {why}")?;
        }
        Ok(())
    }
}

/// Export `source` into `out` (a live console is recorded for `live.duration` first).
pub fn export(source: &Source, out: &Path, live: &LiveOptions) -> Result<Summary, ExportError> {
    match source {
        Source::Recording(path) => export_recording(path, out),
        Source::Live(addr) => export_live(addr, out, live),
    }
}

/// Export the recording at `recording` into `out`. The output is not created unless
/// the recording holds events; a failure after that removes it.
pub fn export_recording(recording: &Path, out: &Path) -> Result<Summary, ExportError> {
    if same_file(recording, out) {
        return Err(ExportError::Source(format!(
            "{} is the recording itself: write the trace elsewhere",
            out.display()
        )));
    }
    let index = survey(recording)?;
    let shown = recording.display();
    if index.updates == 0 {
        return Err(ExportError::Empty(format!("{shown} holds no updates: there is nothing to draw")));
    }
    if index.events == 0 {
        return Err(ExportError::Empty(format!(
            "{shown} holds {} updates but no events: the runtime records them only with its event ring on \
             (Builder::event_ring), so there is no timeline to draw",
            index.updates
        )));
    }
    let file = File::create(out).map_err(|e| ExportError::Io(format!("cannot create {}: {e}", out.display())))?;
    let written = write_trace(recording, &index, BufWriter::new(file));
    if written.is_err() {
        let _ = std::fs::remove_file(out);
    }
    let (counts, skipped, truncated_bytes) = written?;
    Ok(Summary {
        updates: index.updates,
        events: index.events,
        workers: index.workers.min(MAX_WORKERS),
        names: index.names.len(),
        counts,
        skipped,
        truncated_bytes,
        next_runtime: index.next_runtime,
        ended_early: None,
    })
}

/// Record `options.duration` of the console at `addr`, then export that into `out`.
pub fn export_live(addr: &str, out: &Path, options: &LiveOptions) -> Result<Summary, ExportError> {
    let recording = live::TempRecording::new();
    let got = live::capture(addr, options, &recording.path)?;
    if got.events == 0 {
        return Err(ExportError::Empty(format!(
            "{addr} sent {} updates but no events in {:.1} s (an idle runtime, or one whose events \
             all went over the per-update cap): there is no timeline to draw",
            got.updates,
            options.duration.as_secs_f64()
        )));
    }
    let mut summary = export_recording(&recording.path, out)?;
    summary.ended_early = got.ended_early;
    Ok(summary)
}

/// The first pass: read the whole recording into an [`Index`].
fn survey(recording: &Path) -> Result<Index, ExportError> {
    let mut reader = open(recording)?;
    let mut index = Index::default();
    while let Some(u) = reader.next_update().map_err(|e| read_error(recording, e))? {
        if !index.learn(&u) {
            break;
        }
    }
    Ok(index)
}

/// The second pass: the trace. Returns what it drew, and the damaged updates and cut-off
/// bytes the reader found.
fn write_trace(recording: &Path, index: &Index, out: BufWriter<File>) -> Result<(Counts, u64, u64), ExportError> {
    let write_error = |e: io::Error| ExportError::Io(format!("cannot write the trace: {e}"));
    let mut reader = open(recording)?;
    let mut timeline = Timeline::new(out, index).map_err(write_error)?;
    for _ in 0..index.updates {
        let Some(u) = reader.next_update().map_err(|e| read_error(recording, e))? else { break };
        for e in &u.events {
            timeline.event(e).map_err(write_error)?;
        }
    }
    let (_, counts) = timeline.finish().map_err(write_error)?;
    Ok((counts, reader.skipped, reader.truncated_bytes))
}

fn open(recording: &Path) -> Result<RecordReader, ExportError> {
    RecordReader::open(recording).map_err(|e| match e.kind() {
        io::ErrorKind::InvalidData => ExportError::Source(e.to_string()),
        _ => ExportError::Io(e.to_string()),
    })
}

fn read_error(recording: &Path, e: io::Error) -> ExportError {
    ExportError::Io(format!("cannot read the recording {}: {e}", recording.display()))
}

/// Whether `a` and `b` name one file that exists.
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
