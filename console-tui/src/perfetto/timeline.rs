//! The second pass: events in, trace packets out.
//!
//! # One track per worker, as a stack
//! A worker records its events in order, so its track is built like a call stack: a
//! poll's start opens a slice, its end closes the innermost open slice of that task
//! (closing at the same instant anything opened inside it and never closed), a park
//! opens a slice and the unpark closes it; an instant goes inside whatever is open. A poll
//! nested in another (`JoinHandle::join` helping on a worker) is a child slice. An end
//! with nothing open to close is dropped; what is still open when the data ends is
//! closed at the data's last timestamp. A timestamp never goes back on a track: an event
//! stamped before the one before it (a poll start put back from a poll's length, a tick
//! off) is moved up to it, so slices on a track always nest.
//!
//! # Written late, within a window
//! A slice is not written when it opens: wakes and spawns inside it add flows to it, and
//! a stall reported later marks it. So each track keeps its newest top-level slices
//! (with everything nested in them) and writes the oldest once it holds more than
//! [`WINDOW`]: a flow or a stall that reaches further back than that finds nothing to
//! attach to and is drawn on its own (a stall as an instant) or not at all (a flow).
//!
//! # Flows: who woke whom
//! A `Schedule` whose wake source is a task starts a flow at that task's poll on the
//! recording worker (the open one, or the one that just ended: a task woken during its
//! own poll is queued as the poll ends); a `Spawn` recorded inside a poll starts one at
//! that poll. The flow ends at the woken (or spawned) task's next poll, on whichever
//! track it runs. Spawns and wakes from threads outside the workers are instants on the
//! outside track, and their flows start there.
//!
//! # Stalls
//! A `Stall` says which worker was stuck, in which task, for how long, and is stamped
//! when the poll ended (or when it was seen): the stall is `[timestamp - duration,
//! timestamp]`, whichever thread recorded it. It is drawn inside the poll of that task
//! on that worker that overlaps it, clamped to the poll and widened to hold the poll's
//! own children, so it nests. A report stamped after its poll ended (recorded late, by
//! another thread) overlaps none: it goes into the newest poll of its task that began
//! before it, over the poll's first `duration` (the stuck time counts from the poll's
//! start). Several reports of one poll make one slice, the longest duration. A stall
//! with no such poll in the window is an instant at its timestamp.

use super::index::Index;
use super::trace::{
    AnnotationValue, DebugAnnotation, EventType, PacketData, PacketWriter, ProcessDescriptor, ThreadDescriptor,
    TrackDescriptor, TrackEvent,
};
use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use volt_console_proto as proto;

/// Top-level slices a worker's track keeps unwritten (see the module docs).
pub const WINDOW: usize = 256;

/// The most worker tracks a trace declares; an event naming a worker past it is left out.
pub const MAX_WORKERS: usize = 4096;

/// A `Schedule`'s argument: the queue in the low byte, the wake source above it.
const SCHEDULE_SOURCE_SHIFT: u32 = 8;
/// A wake source: its kind in the low bits, a task's id above them.
const SOURCE_KIND_BITS: u32 = 3;
const SOURCE_TASK: u64 = 3;
const SOURCE_SPAWN: u64 = 5;
/// A `Stall`'s argument: the worker above its duration in microseconds.
const STALL_WORKER_SHIFT: u32 = 48;

/// The worker a `Stall` event's argument names.
pub fn stall_worker(arg: u64) -> usize {
    (arg >> STALL_WORKER_SHIFT) as usize
}

/// The process track's uuid; worker `w`'s is `WORKER_UUID + w`.
const PROCESS_UUID: u64 = 1;
const OUTSIDE_UUID: u64 = 2;
const WORKER_UUID: u64 = 16;

/// What a `Schedule` says woke its task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WakeSource {
    Task(u64),
    /// The task's spawn queued it (not a wake).
    Spawn,
    /// Anything else (a timer, I/O, the blocking pool, a thread outside).
    Other(u64),
}

impl WakeSource {
    fn from_schedule_arg(arg: u64) -> WakeSource {
        let packed = arg >> SCHEDULE_SOURCE_SHIFT;
        match packed & ((1 << SOURCE_KIND_BITS) - 1) {
            SOURCE_TASK => WakeSource::Task(packed >> SOURCE_KIND_BITS),
            SOURCE_SPAWN => WakeSource::Spawn,
            other => WakeSource::Other(other),
        }
    }

    fn describe(self) -> String {
        match self {
            WakeSource::Task(id) => format!("task {id}"),
            WakeSource::Spawn => "its spawn".into(),
            WakeSource::Other(1) => "the timer wheel".into(),
            WakeSource::Other(2) => "the I/O driver".into(),
            WakeSource::Other(4) => "the blocking pool".into(),
            WakeSource::Other(_) => "a thread outside the runtime".into(),
        }
    }
}

/// What a slice stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SpanKind {
    Poll { task: u64 },
    Park,
    Instant,
}

/// A stall marked on a poll: its span and what the report said.
#[derive(Clone, Copy, Debug)]
struct StallMark {
    begin: u64,
    end: u64,
    duration_us: u64,
}

/// A slice (or an instant) on a track, with what is nested in it.
#[derive(Debug)]
struct Span {
    kind: SpanKind,
    name: String,
    begin: u64,
    /// `None` while open; an instant's is its begin.
    end: Option<u64>,
    args: Vec<DebugAnnotation>,
    flows_out: Vec<u64>,
    flows_in: Vec<u64>,
    stall: Option<StallMark>,
    children: Vec<Span>,
}

impl Span {
    fn new(kind: SpanKind, name: String, begin: u64) -> Span {
        let end = (kind == SpanKind::Instant).then_some(begin);
        Span {
            kind,
            name,
            begin,
            end,
            args: Vec::new(),
            flows_out: Vec::new(),
            flows_in: Vec::new(),
            stall: None,
            children: Vec::new(),
        }
    }

    fn arg(mut self, name: &str, value: AnnotationValue) -> Span {
        self.args.push(DebugAnnotation::new(name, value));
        self
    }

    fn is_poll_of(&self, task: u64) -> bool {
        self.kind == SpanKind::Poll { task }
    }

    /// The newest poll of `task` in this subtree that `fits`.
    fn find_poll(&mut self, task: u64, fits: &impl Fn(&Span) -> bool) -> Option<&mut Span> {
        if self.is_poll_of(task) && fits(self) {
            return Some(self);
        }
        self.children.iter_mut().rev().find_map(|c| c.find_poll(task, fits))
    }
}

/// Where a flow starts on a worker's track.
enum Source {
    /// The open span at this depth.
    Open(usize),
    /// A span that ended: its top-level span's sequence number and the path down to it.
    Ended(u64, Vec<usize>),
}

/// One worker's track.
struct WorkerTrack {
    uuid: u64,
    /// Top-level spans not yet written, oldest first; only the newest can be open.
    recent: VecDeque<Span>,
    /// How many spans are open: the newest top-level span, its last child, that one's
    /// last child, and so on (a span opens as the last child of the innermost open one,
    /// and closes before its parent, so the open ones are always that chain).
    open: usize,
    /// The newest poll to have ended here: its top-level span (by sequence number) and
    /// the child indices down to it.
    last_poll: Option<(u64, Vec<usize>)>,
    /// The sequence number of `recent[0]`.
    first_seq: u64,
    /// The latest timestamp on this track.
    now: u64,
}

impl WorkerTrack {
    fn new(uuid: u64) -> WorkerTrack {
        WorkerTrack { uuid, recent: VecDeque::new(), open: 0, last_poll: None, first_seq: 0, now: 0 }
    }

    /// `ts`, moved up to the track's latest timestamp if it is before it.
    fn at(&mut self, ts: u64) -> u64 {
        self.now = self.now.max(ts);
        self.now
    }

    /// The open span at `depth` (0: the top-level one).
    fn open_at(&mut self, depth: usize) -> &mut Span {
        debug_assert!(depth < self.open);
        let mut s = self.recent.back_mut().expect("an open span");
        for _ in 0..depth {
            s = s.children.last_mut().expect("the open chain");
        }
        s
    }

    /// The open spans, outermost first.
    fn open_spans(&self) -> impl Iterator<Item = &Span> {
        let top = self.recent.back().filter(|_| self.open > 0);
        std::iter::successors(top, |s| s.children.last()).take(self.open)
    }

    /// The depth of the innermost open span that `pick` picks.
    fn innermost_open(&self, pick: impl Fn(&Span) -> bool) -> Option<usize> {
        self.open_spans().enumerate().filter(|(_, s)| pick(s)).map(|(d, _)| d).last()
    }

    /// The innermost open poll of `task`, by depth.
    fn open_poll_depth(&self, task: u64) -> Option<usize> {
        self.innermost_open(|s| s.is_poll_of(task))
    }

    /// Whether the innermost open span is a park.
    fn parked(&self) -> bool {
        self.open_spans().last().is_some_and(|s| s.kind == SpanKind::Park)
    }

    /// Add `span` inside the innermost open span (or at the top), open if `opens`.
    fn push(&mut self, span: Span, opens: bool) {
        if self.open == 0 {
            self.recent.push_back(span);
        } else {
            let depth = self.open - 1;
            self.open_at(depth).children.push(span);
        }
        if opens {
            self.open += 1;
        }
    }

    /// Close the open spans from the innermost down to `depth` at `ts`.
    fn close_to(&mut self, depth: usize, ts: u64, unfinished: &mut u64) {
        while self.open > depth {
            let d = self.open - 1;
            let span = self.open_at(d);
            span.end = Some(ts);
            if d > depth {
                // Opened inside and never closed: it ends with its parent.
                *unfinished += 1;
            }
            self.open -= 1;
        }
    }

    /// The span at `path` below top-level span `seq`, if it is still held.
    fn span_at(&mut self, seq: u64, path: &[usize]) -> Option<&mut Span> {
        let i = seq.checked_sub(self.first_seq)? as usize;
        let mut s = self.recent.get_mut(i)?;
        for &c in path {
            s = s.children.get_mut(c)?;
        }
        Some(s)
    }

    /// The path to the innermost open span (the top-level span's sequence number, then
    /// child indices).
    fn open_path(&mut self, depth: usize) -> (u64, Vec<usize>) {
        let seq = self.first_seq + self.recent.len() as u64 - 1;
        let mut path = Vec::with_capacity(depth);
        let mut s = self.recent.back().expect("an open span");
        for _ in 0..depth {
            path.push(s.children.len() - 1);
            s = s.children.last().expect("the open chain");
        }
        (seq, path)
    }

    /// The newest poll of `task` held here that `fits`.
    fn newest_poll(&mut self, task: u64, fits: &impl Fn(&Span) -> bool) -> Option<&mut Span> {
        self.recent.iter_mut().rev().find_map(|s| s.find_poll(task, fits))
    }

    /// The top-level spans past the window, oldest first, to be written.
    fn overflow(&mut self) -> Vec<Span> {
        let mut out = Vec::new();
        while self.recent.len() > WINDOW {
            out.push(self.recent.pop_front().expect("longer than the window"));
            self.first_seq += 1;
        }
        out
    }
}

/// What the export wrote, for the summary line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Poll slices.
    pub polls: u64,
    /// Park slices.
    pub parks: u64,
    /// Steal instants.
    pub steals: u64,
    /// Stalls drawn as slices inside their poll.
    pub stalls: u64,
    /// Stalls whose poll was not in the data, drawn as instants.
    pub stall_instants: u64,
    /// Flows started (a flow whose end never came is not drawn).
    pub flows: u64,
    /// Flows that reached their end.
    pub flows_ended: u64,
    /// Ends with nothing open to close (left out).
    pub unmatched_ends: u64,
    /// Slices still open when the data (or their parent) ended, closed there.
    pub unfinished: u64,
    /// Events left out: of an unknown kind, or naming a worker past the declared ones.
    pub ignored: u64,
}

/// Builds the trace from events, writing packets as they are complete.
pub struct Timeline<'a, W: Write> {
    out: PacketWriter<W>,
    index: &'a Index,
    workers: Vec<WorkerTrack>,
    /// Flows waiting for a task's next poll, with the time each starts at.
    pending_flows: HashMap<u64, Vec<(u64, u64)>>,
    next_flow: u64,
    /// The latest timestamp of the data.
    last_ts: u64,
    /// What was written so far.
    pub counts: Counts,
}

impl<'a, W: Write> Timeline<'a, W> {
    /// Start a trace into `out`: the process track, one thread track per worker, and the
    /// track for events off the workers.
    pub fn new(out: W, index: &'a Index) -> io::Result<Timeline<'a, W>> {
        let mut out = PacketWriter::new(out);
        // Perfetto groups threads under a process by pid; a recording without one gets 1.
        let pid = if index.pid == 0 { 1 } else { index.pid.min(i32::MAX as u32 / 2) as i32 };
        out.push(
            None,
            PacketData::TrackDescriptor(TrackDescriptor {
                uuid: Some(PROCESS_UUID),
                process: Some(ProcessDescriptor {
                    pid: Some(pid),
                    process_name: Some(format!("volt runtime (pid {})", index.pid)),
                }),
                ..Default::default()
            }),
        )?;
        let workers = index.workers.min(MAX_WORKERS);
        for w in 0..workers {
            let name = format!("worker {w}");
            out.push(
                None,
                PacketData::TrackDescriptor(TrackDescriptor {
                    uuid: Some(WORKER_UUID + w as u64),
                    name: Some(name.clone()),
                    // A thread id of its own, never the pid (that is the main thread's).
                    thread: Some(ThreadDescriptor {
                        pid: Some(pid),
                        tid: Some(pid + 1 + w as i32),
                        thread_name: Some(name),
                    }),
                    ..Default::default()
                }),
            )?;
        }
        out.push(
            None,
            PacketData::TrackDescriptor(TrackDescriptor {
                uuid: Some(OUTSIDE_UUID),
                name: Some("outside the workers".into()),
                parent_uuid: Some(PROCESS_UUID),
                ..Default::default()
            }),
        )?;
        Ok(Timeline {
            out,
            index,
            workers: (0..workers).map(|w| WorkerTrack::new(WORKER_UUID + w as u64)).collect(),
            pending_flows: HashMap::new(),
            next_flow: 1,
            last_ts: 0,
            counts: Counts::default(),
        })
    }

    /// Take in the next event.
    pub fn event(&mut self, e: &proto::Event) -> io::Result<()> {
        use proto::EventKind as K;
        self.last_ts = self.last_ts.max(e.timestamp_ns);
        let Ok(kind) = K::try_from(e.kind) else {
            self.counts.ignored += 1;
            return Ok(());
        };
        if kind == K::Stall {
            return self.stall(e);
        }
        let Some(w) = e.worker else { return self.outside(kind, e) };
        let w = w as usize;
        if w >= self.workers.len() {
            self.counts.ignored += 1;
            return Ok(());
        }
        match kind {
            K::PollStart => self.poll_start(w, e),
            K::PollEnd => self.poll_end(w, e),
            K::Park => {
                let track = &mut self.workers[w];
                let ts = track.at(e.timestamp_ns);
                // A park with one open already: the unpark in between is missing.
                if track.parked() {
                    track.close_to(track.open - 1, ts, &mut self.counts.unfinished);
                    self.counts.unfinished += 1;
                }
                let name = if e.arg == 1 { "parked in reactor" } else { "parked" };
                track.push(Span::new(SpanKind::Park, name.into(), ts), true);
                self.counts.parks += 1;
                self.write_overflow(w)
            }
            K::Unpark => {
                let track = &mut self.workers[w];
                let ts = track.at(e.timestamp_ns);
                if track.parked() {
                    let woke = if e.arg == 1 { "notified" } else { "timeout or I/O" };
                    track.open_at(track.open - 1).args.push(DebugAnnotation::new("woke", str_arg(woke)));
                    track.close_to(track.open - 1, ts, &mut self.counts.unfinished);
                } else {
                    self.counts.unmatched_ends += 1;
                }
                Ok(())
            }
            K::Steal => {
                let span = Span::new(SpanKind::Instant, "steal".into(), e.timestamp_ns)
                    .arg("victim", AnnotationValue::Uint(e.arg >> 32))
                    .arg("count", AnnotationValue::Uint(e.arg & 0xffff_ffff))
                    .arg("runs_task", AnnotationValue::Uint(e.task_id));
                self.counts.steals += 1;
                self.instant(w, span)
            }
            K::Overflow => {
                let span = Span::new(SpanKind::Instant, "overflow to the global queue".into(), e.timestamp_ns)
                    .arg("count", AnnotationValue::Uint(e.arg));
                self.instant(w, span)
            }
            K::Cancel | K::Panic => {
                let what = if kind == K::Cancel { "cancel" } else { "panic" };
                let span = self.task_instant(what, e);
                self.forget(e.task_id);
                self.instant(w, span)
            }
            K::Complete => {
                self.forget(e.task_id);
                Ok(())
            }
            K::Spawn => {
                // A spawn inside a poll: a flow from that poll to the new task's first.
                let track = &mut self.workers[w];
                if let Some(d) = track.innermost_open(|s| matches!(s.kind, SpanKind::Poll { .. })) {
                    let span = track.open_at(d);
                    let (from, flow) = (span.begin, self.next_flow);
                    span.flows_out.push(flow);
                    self.new_flow(from, e.task_id);
                }
                Ok(())
            }
            K::Schedule => {
                if let WakeSource::Task(waker) = WakeSource::from_schedule_arg(e.arg) {
                    self.wake_from_poll(w, waker, e.task_id);
                }
                Ok(())
            }
            K::Transition | K::Stall | K::Unspecified => Ok(()),
        }
    }

    fn poll_start(&mut self, w: usize, e: &proto::Event) -> io::Result<()> {
        let name = self.index.task_name(e.task_id);
        let track = &mut self.workers[w];
        let ts = track.at(e.timestamp_ns);
        let mut span =
            Span::new(SpanKind::Poll { task: e.task_id }, name, ts).arg("task_id", AnnotationValue::Uint(e.task_id));
        if let Some(flows) = self.pending_flows.remove(&e.task_id) {
            // A flow goes forward in time: one that would end before it starts (clocks
            // of two workers a tick apart) is left out, as a trace processor would.
            span.flows_in = flows.into_iter().filter(|&(_, from)| from <= ts).map(|(flow, _)| flow).collect();
            self.counts.flows_ended += span.flows_in.len() as u64;
        }
        track.push(span, true);
        self.counts.polls += 1;
        self.write_overflow(w)
    }

    fn poll_end(&mut self, w: usize, e: &proto::Event) -> io::Result<()> {
        let track = &mut self.workers[w];
        let ts = track.at(e.timestamp_ns);
        let Some(depth) = track.open_poll_depth(e.task_id) else {
            self.counts.unmatched_ends += 1;
            return Ok(());
        };
        let outcome = if e.arg & 0xff == 1 { "ready" } else { "pending" };
        track.open_at(depth).args.push(DebugAnnotation::new("outcome", str_arg(outcome)));
        let path = track.open_path(depth);
        track.close_to(depth, ts, &mut self.counts.unfinished);
        track.last_poll = Some(path);
        Ok(())
    }

    /// A wake by task `waker` recorded on worker `w`: a flow from the waker's poll there
    /// (open, or just ended) to `woken`'s next poll.
    fn wake_from_poll(&mut self, w: usize, waker: u64, woken: u64) {
        let track = &mut self.workers[w];
        let source = match track.open_poll_depth(waker) {
            Some(depth) => Source::Open(depth),
            None => match track.last_poll.clone() {
                Some((seq, path)) if track.span_at(seq, &path).is_some_and(|s| s.is_poll_of(waker)) => {
                    Source::Ended(seq, path)
                }
                _ => return,
            },
        };
        let track = &mut self.workers[w];
        let span = match source {
            Source::Open(depth) => track.open_at(depth),
            Source::Ended(seq, path) => track.span_at(seq, &path).expect("found above"),
        };
        let from = span.begin;
        let flow = self.next_flow;
        span.flows_out.push(flow);
        self.new_flow(from, woken);
    }

    /// A new flow from a span that begins at `from` to `task`'s next poll.
    fn new_flow(&mut self, from: u64, task: u64) -> u64 {
        let flow = self.next_flow;
        self.next_flow += 1;
        self.counts.flows += 1;
        self.pending_flows.entry(task).or_default().push((flow, from));
        flow
    }

    /// A finished task has no next poll: its waiting flows go.
    fn forget(&mut self, task: u64) {
        self.pending_flows.remove(&task);
    }

    fn task_instant(&self, what: &str, e: &proto::Event) -> Span {
        Span::new(SpanKind::Instant, format!("{what} {}", self.index.task_name(e.task_id)), e.timestamp_ns)
            .arg("task_id", AnnotationValue::Uint(e.task_id))
    }

    /// An instant on worker `w`'s track, inside whatever is open there.
    fn instant(&mut self, w: usize, mut span: Span) -> io::Result<()> {
        let track = &mut self.workers[w];
        span.begin = track.at(span.begin);
        span.end = Some(span.begin);
        track.push(span, false);
        self.write_overflow(w)
    }

    /// An event recorded off the workers: an instant on the outside track; a spawn or a
    /// wake also starts a flow to the task's next poll.
    fn outside(&mut self, kind: proto::EventKind, e: &proto::Event) -> io::Result<()> {
        use proto::EventKind as K;
        let mut span = match kind {
            K::Spawn => self.task_instant("spawn", e),
            K::Schedule => match WakeSource::from_schedule_arg(e.arg) {
                // Its spawn's instant says it already.
                WakeSource::Spawn => return Ok(()),
                by => self.task_instant("wake", e).arg("woken_by", str_arg(&by.describe())),
            },
            K::Cancel => self.task_instant("cancel", e),
            K::Panic => self.task_instant("panic", e),
            _ => return Ok(()),
        };
        if matches!(kind, K::Spawn | K::Schedule) {
            span.flows_out.push(self.new_flow(span.begin, e.task_id));
        } else {
            self.forget(e.task_id);
        }
        write_span(&mut self.out, OUTSIDE_UUID, &span)
    }

    /// A stall report: marked on its poll if the window holds it, else an instant.
    fn stall(&mut self, e: &proto::Event) -> io::Result<()> {
        let w = stall_worker(e.arg);
        if w >= self.workers.len() {
            self.counts.ignored += 1;
            return Ok(());
        }
        let duration_us = e.arg & ((1 << STALL_WORKER_SHIFT) - 1);
        let end = e.timestamp_ns;
        let begin = end.saturating_sub(duration_us.saturating_mul(1_000));
        let track = &mut self.workers[w];
        let overlapping = |p: &Span| p.begin <= end && p.end.is_none_or(|e| e >= begin);
        // Stamped when it was recorded, after its poll ended: the stuck time counts from
        // the poll's start.
        let late = track.newest_poll(e.task_id, &overlapping).is_none();
        let mark = if late {
            track.newest_poll(e.task_id, &|p: &Span| p.begin <= end).map(|poll| {
                let begin = poll.begin;
                (poll, begin, begin.saturating_add(duration_us.saturating_mul(1_000)))
            })
        } else {
            track.newest_poll(e.task_id, &overlapping).map(|poll| (poll, begin, end))
        };
        if let Some((poll, begin, end)) = mark {
            poll.stall = Some(match poll.stall {
                // One poll, reported again: one slice over both, the longest duration.
                Some(s) => StallMark {
                    begin: s.begin.min(begin),
                    end: s.end.max(end),
                    duration_us: s.duration_us.max(duration_us),
                },
                None => {
                    self.counts.stalls += 1;
                    StallMark { begin, end, duration_us }
                }
            });
            return Ok(());
        }
        // Its poll is not in the data (or long written): an instant where it was seen,
        // written now, at its own time; an instant nests wherever it falls.
        self.counts.stall_instants += 1;
        let span = stall_args(Span::new(SpanKind::Instant, "stall".into(), end), self.index, e.task_id, duration_us);
        write_span(&mut self.out, track.uuid, &span)
    }

    fn write_overflow(&mut self, w: usize) -> io::Result<()> {
        let track = &mut self.workers[w];
        let uuid = track.uuid;
        for span in track.overflow() {
            write_span(&mut self.out, uuid, &span)?;
        }
        Ok(())
    }

    /// Close what is still open at the data's last timestamp, write everything held, and
    /// give the output back.
    pub fn finish(mut self) -> io::Result<(W, Counts)> {
        let last = self.last_ts;
        for track in &mut self.workers {
            if track.open > 0 {
                let ts = track.at(last);
                // The top-level one counts too: nothing closed it.
                self.counts.unfinished += 1;
                for d in 0..track.open {
                    if let SpanKind::Poll { .. } = track.open_at(d).kind {
                        track.open_at(d).args.push(DebugAnnotation::new("outcome", str_arg("unfinished")));
                    }
                }
                track.close_to(0, ts, &mut self.counts.unfinished);
            }
            for span in track.recent.drain(..) {
                write_span(&mut self.out, track.uuid, &span)?;
            }
        }
        Ok((self.out.finish()?, self.counts))
    }
}

fn str_arg(s: &str) -> AnnotationValue {
    AnnotationValue::String(s.to_string())
}

/// A stall's arguments: the task (id and name) and the duration.
fn stall_args(span: Span, index: &Index, task: u64, duration_us: u64) -> Span {
    span.arg("task_id", AnnotationValue::Uint(task))
        .arg("task", str_arg(&index.task_name(task)))
        .arg("duration_ms", AnnotationValue::Double(duration_us as f64 / 1e3))
}

/// Write `span` and everything nested in it: its begin (or the instant), the stall
/// marked on it, its children, its end.
fn write_span<W: Write>(out: &mut PacketWriter<W>, track: u64, span: &Span) -> io::Result<()> {
    let kind = if span.kind == SpanKind::Instant { EventType::Instant } else { EventType::SliceBegin };
    out.push(
        Some(span.begin),
        PacketData::TrackEvent(TrackEvent {
            r#type: Some(kind as i32),
            track_uuid: Some(track),
            name: Some(span.name.clone()),
            debug_annotations: span.args.clone(),
            flow_ids: span.flows_out.clone(),
            terminating_flow_ids: span.flows_in.clone(),
        }),
    )?;
    if kind == EventType::Instant {
        return Ok(());
    }
    let end = span.end.expect("written spans are closed");
    let stall = span.stall.map(|s| stall_bounds(span, s, end));
    if let Some((begin, stall_end, mark)) = stall {
        let mut args = Vec::new();
        if let SpanKind::Poll { task } = span.kind {
            args.push(DebugAnnotation::new("task_id", AnnotationValue::Uint(task)));
            args.push(DebugAnnotation::new("task", str_arg(&span.name)));
        }
        args.push(DebugAnnotation::new("duration_ms", AnnotationValue::Double(mark.duration_us as f64 / 1e3)));
        out.push(Some(begin), slice_begin(track, "stall", args))?;
        for child in &span.children {
            write_span(out, track, child)?;
        }
        out.push(Some(stall_end), slice_end(track))?;
    } else {
        for child in &span.children {
            write_span(out, track, child)?;
        }
    }
    out.push(Some(end), slice_end(track))
}

/// A stall's slice inside `span` (which ends at `end`): the report's span clamped to the
/// poll's, widened to hold the poll's children so it nests between them and the poll.
fn stall_bounds(span: &Span, mark: StallMark, end: u64) -> (u64, u64, StallMark) {
    let mut begin = mark.begin.clamp(span.begin, end);
    let mut stall_end = mark.end.clamp(span.begin, end);
    if let (Some(first), Some(last)) = (span.children.first(), span.children.iter().filter_map(|c| c.end).max()) {
        begin = begin.min(first.begin);
        stall_end = stall_end.max(last);
    }
    (begin, stall_end.max(begin), mark)
}

fn slice_begin(track: u64, name: &str, args: Vec<DebugAnnotation>) -> PacketData {
    PacketData::TrackEvent(TrackEvent {
        r#type: Some(EventType::SliceBegin as i32),
        track_uuid: Some(track),
        name: Some(name.to_string()),
        debug_annotations: args,
        ..Default::default()
    })
}

fn slice_end(track: u64) -> PacketData {
    PacketData::TrackEvent(TrackEvent {
        r#type: Some(EventType::SliceEnd as i32),
        track_uuid: Some(track),
        ..Default::default()
    })
}
