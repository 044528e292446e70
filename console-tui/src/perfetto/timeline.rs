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
//! A slice is not written when it opens: wakes and spawns inside it add flows to it, even
//! just after it ended (a task woken during its own poll is queued as the poll ends). So
//! each track keeps its newest top-level slices (with everything nested in them) and
//! writes the oldest once it holds more than [`WINDOW`]; a flow from a slice further back
//! than that is not drawn. A slice that stays open long with much nested in it (a `join`
//! helping for seconds) would hold all of that: past [`SPILL`] nested slices, its begin
//! and everything closed inside it are written, and what is added to it later (its
//! outcome, flows from it) goes on its end, which Perfetto reads as well.
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
//! A `Stall` says which worker was stuck in which task, for how long, and is stamped when
//! the poll ended (or, recorded by another thread, when it was seen): the stall is
//! `[timestamp - duration, timestamp]`, whoever recorded it. The first pass collects the
//! reports (they are few), so a report need not come near its poll in the stream. As a
//! poll ends, the reports of its task on its worker that overlap it are drawn inside it,
//! clamped to the poll and widened to hold the poll's own children so that it nests;
//! several make one slice, the longest duration. A report stamped after its poll ended
//! (seen late) overlaps none: the first poll of its task before it that lasted that long
//! takes it, stuck from its start. A report no poll takes (its poll is not in the data)
//! is an instant at its timestamp.

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

/// Slices held inside an open top-level slice before what can be is written.
pub const SPILL: usize = 4096;

/// The most worker tracks a trace declares; an event naming a worker past it is left out.
pub const MAX_WORKERS: usize = 4096;

/// A `Schedule`'s argument: the queue in the low byte, the wake source above it: its
/// kind in the low [`SOURCE_KIND_BITS`] (0 outside, 1 the timer wheel, 2 the I/O
/// driver, 3 a task, 4 the blocking pool, 5 the task's spawn) and a task's id above them.
const SCHEDULE_SOURCE_SHIFT: u32 = 8;
const SOURCE_KIND_BITS: u32 = 3;
/// A `Stall`'s argument: the worker above its duration in microseconds.
const STALL_WORKER_SHIFT: u32 = 48;

/// A stall report: when it was stamped, and how long the poll had been stuck then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallReport {
    pub ts: u64,
    pub duration_ns: u64,
}

impl StallReport {
    /// A `Stall` event as its worker and report.
    pub fn of(e: &proto::Event) -> (usize, StallReport) {
        let duration_us = e.arg & ((1 << STALL_WORKER_SHIFT) - 1);
        let report = StallReport { ts: e.timestamp_ns, duration_ns: duration_us.saturating_mul(1_000) };
        ((e.arg >> STALL_WORKER_SHIFT) as usize, report)
    }

    /// The span it stands for.
    fn span(&self) -> (u64, u64) {
        (self.ts.saturating_sub(self.duration_ns), self.ts)
    }
}

/// The process track's uuid; worker `w`'s is `WORKER_UUID + w`.
const PROCESS_UUID: u64 = 1;
const OUTSIDE_UUID: u64 = 2;
const WORKER_UUID: u64 = 16;

/// What a `Schedule` says woke its task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WakeSource {
    Outside,
    Timer,
    Io,
    Task(u64),
    Blocking,
    /// The task's spawn queued it (not a wake).
    Spawn,
}

impl WakeSource {
    fn from_schedule_arg(arg: u64) -> WakeSource {
        let packed = arg >> SCHEDULE_SOURCE_SHIFT;
        match packed & ((1 << SOURCE_KIND_BITS) - 1) {
            1 => WakeSource::Timer,
            2 => WakeSource::Io,
            3 => WakeSource::Task(packed >> SOURCE_KIND_BITS),
            4 => WakeSource::Blocking,
            5 => WakeSource::Spawn,
            _ => WakeSource::Outside,
        }
    }

    fn describe(self) -> String {
        match self {
            WakeSource::Outside => "a thread outside the runtime".into(),
            WakeSource::Timer => "the timer wheel".into(),
            WakeSource::Io => "the I/O driver".into(),
            WakeSource::Task(id) => format!("task {id}"),
            WakeSource::Blocking => "the blocking pool".into(),
            WakeSource::Spawn => "its spawn".into(),
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

/// A stall marked on a poll: its span and the longest duration reported.
#[derive(Clone, Copy, Debug)]
struct StallMark {
    begin: u64,
    end: u64,
    duration_ns: u64,
}

impl StallMark {
    /// This mark and `(begin, end, duration_ns)` as one.
    fn merge(this: Option<StallMark>, begin: u64, end: u64, duration_ns: u64) -> StallMark {
        match this {
            Some(m) => StallMark {
                begin: m.begin.min(begin),
                end: m.end.max(end),
                duration_ns: m.duration_ns.max(duration_ns),
            },
            None => StallMark { begin, end, duration_ns },
        }
    }
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
    /// Its begin is written (with this many of its arguments and flows out): the rest
    /// go on its end.
    begun: Option<(usize, usize)>,
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
            begun: None,
        }
    }

    fn arg(mut self, name: &str, value: AnnotationValue) -> Span {
        self.args.push(DebugAnnotation::new(name, value));
        self
    }

    fn is_poll_of(&self, task: u64) -> bool {
        self.kind == SpanKind::Poll { task }
    }
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
    /// Spans held inside the open top-level span.
    nested: usize,
}

impl WorkerTrack {
    fn new(uuid: u64) -> WorkerTrack {
        WorkerTrack { uuid, recent: VecDeque::new(), open: 0, last_poll: None, first_seq: 0, now: 0, nested: 0 }
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
            self.nested += 1;
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
        if self.open == 0 {
            self.nested = 0;
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

    /// The path to the open span at `depth` (the top-level span's sequence number, then
    /// child indices).
    fn open_path(&self, depth: usize) -> (u64, Vec<usize>) {
        let seq = self.first_seq + self.recent.len() as u64 - 1;
        let mut path = Vec::with_capacity(depth);
        let mut s = self.recent.back().expect("an open span");
        for _ in 0..depth {
            path.push(s.children.len() - 1);
            s = s.children.last().expect("the open chain");
        }
        (seq, path)
    }

    /// Past [`SPILL`] spans held inside the open top-level one: write the open spans'
    /// begins and everything closed inside them, keeping only the open chain.
    fn spill<W: Write>(&mut self, out: &mut PacketWriter<W>) -> io::Result<()> {
        if self.nested <= SPILL {
            return Ok(());
        }
        // Paths into the spans written are gone.
        if self.last_poll.as_ref().is_some_and(|(seq, _)| *seq + 1 == self.first_seq + self.recent.len() as u64) {
            self.last_poll = None;
        }
        let uuid = self.uuid;
        for depth in 0..self.open {
            let inner_open = depth + 1 < self.open;
            let span = self.open_at(depth);
            if span.begun.is_none() {
                write_begin(out, uuid, span)?;
                span.begun = Some((span.args.len(), span.flows_out.len()));
            }
            // The last child is the next open span, if there is one: it stays.
            let keep = usize::from(inner_open);
            let closed = span.children.len() - keep;
            for child in span.children.drain(..closed) {
                write_span(out, uuid, &child)?;
            }
        }
        self.nested = self.open.saturating_sub(1);
        Ok(())
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
    /// Stall reports no poll in the data took, drawn as instants.
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

/// The flows: ids handed out, and those waiting for a task's next poll.
#[derive(Default)]
struct Flows {
    /// Flows waiting for a task's next poll, with the time each starts at.
    pending: HashMap<u64, Vec<(u64, u64)>>,
    /// The last id handed out (ids start at 1).
    last: u64,
    started: u64,
    ended: u64,
}

impl Flows {
    /// Start a flow at `from`, to `task`'s next poll.
    fn start(&mut self, from: &mut Span, task: u64) {
        self.last += 1;
        self.started += 1;
        from.flows_out.push(self.last);
        self.pending.entry(task).or_default().push((self.last, from.begin));
    }

    /// End at `poll` (a poll of `task` that just began) the flows waiting for it. A flow
    /// goes forward in time: one that would end before it starts (two workers' clocks a
    /// tick apart) is left out, as a trace processor would leave it.
    fn end_at(&mut self, poll: &mut Span, task: u64) {
        let Some(waiting) = self.pending.remove(&task) else { return };
        poll.flows_in = waiting.into_iter().filter(|&(_, from)| from <= poll.begin).map(|(flow, _)| flow).collect();
        self.ended += poll.flows_in.len() as u64;
    }

    /// A finished task has no next poll: its waiting flows go.
    fn forget(&mut self, task: u64) {
        self.pending.remove(&task);
    }
}

/// Builds the trace from events, writing packets as they are complete.
pub struct Timeline<'a, W: Write> {
    out: PacketWriter<W>,
    index: &'a Index,
    workers: Vec<WorkerTrack>,
    flows: Flows,
    /// Stall reports no poll has taken yet, by worker and task, oldest first.
    stalls: HashMap<(usize, u64), VecDeque<StallReport>>,
    /// The latest timestamp of the data.
    last_ts: u64,
    counts: Counts,
}

impl<'a, W: Write> Timeline<'a, W> {
    /// Start a trace into `out`, declaring its tracks.
    pub fn new(out: W, index: &'a Index) -> io::Result<Timeline<'a, W>> {
        let workers = index.workers.min(MAX_WORKERS);
        let mut out = PacketWriter::new(out);
        for track in tracks(index.pid, workers) {
            out.push(None, PacketData::TrackDescriptor(track))?;
        }
        Ok(Timeline {
            out,
            index,
            workers: (0..workers).map(|w| WorkerTrack::new(WORKER_UUID + w as u64)).collect(),
            flows: Flows::default(),
            stalls: index.stalls.iter().map(|(k, v)| (*k, v.iter().copied().collect())).collect(),
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
        let Some(w) = e.worker.map(|w| w as usize) else { return self.outside(kind, e) };
        if w >= self.workers.len() {
            self.counts.ignored += 1;
            return Ok(());
        }
        match kind {
            K::PollStart => self.poll_start(w, e),
            K::PollEnd => self.poll_end(w, e),
            K::Park => self.park(w, e),
            K::Unpark => {
                self.unpark(w, e);
                Ok(())
            }
            K::Spawn => {
                self.spawn_in_poll(w, e.task_id);
                Ok(())
            }
            K::Schedule => {
                if let WakeSource::Task(waker) = WakeSource::from_schedule_arg(e.arg) {
                    self.wake_from_poll(w, waker, e.task_id);
                }
                Ok(())
            }
            K::Complete => {
                self.flows.forget(e.task_id);
                Ok(())
            }
            K::Steal | K::Overflow | K::Cancel | K::Panic => {
                let span = match kind {
                    K::Steal => {
                        self.counts.steals += 1;
                        Span::new(SpanKind::Instant, "steal".into(), e.timestamp_ns)
                            .arg("victim", AnnotationValue::Uint(e.arg >> 32))
                            .arg("count", AnnotationValue::Uint(e.arg & 0xffff_ffff))
                            .arg("runs_task", AnnotationValue::Uint(e.task_id))
                    }
                    K::Overflow => Span::new(SpanKind::Instant, "overflow to the global queue".into(), e.timestamp_ns)
                        .arg("count", AnnotationValue::Uint(e.arg)),
                    _ => {
                        self.flows.forget(e.task_id);
                        self.task_instant(if kind == K::Cancel { "cancel" } else { "panic" }, e)
                    }
                };
                self.instant(w, span)
            }
            // Stalls come from the first pass (see the module docs).
            K::Transition | K::Stall | K::Unspecified => Ok(()),
        }
    }

    /// A poll begins: a slice named by its task, where the flows waiting for it end.
    fn poll_start(&mut self, w: usize, e: &proto::Event) -> io::Result<()> {
        let track = &mut self.workers[w];
        let ts = track.at(e.timestamp_ns);
        let mut span = Span::new(SpanKind::Poll { task: e.task_id }, self.index.task_name(e.task_id), ts)
            .arg("task_id", AnnotationValue::Uint(e.task_id));
        self.flows.end_at(&mut span, e.task_id);
        track.push(span, true);
        self.counts.polls += 1;
        self.write_held(w)
    }

    /// A poll ends: the innermost open poll of its task closes (and whatever is open
    /// inside it), with its outcome and the stalls reported of it. With no such poll
    /// open, the end is dropped.
    fn poll_end(&mut self, w: usize, e: &proto::Event) -> io::Result<()> {
        let track = &mut self.workers[w];
        let ts = track.at(e.timestamp_ns);
        let Some(depth) = track.open_poll_depth(e.task_id) else {
            self.counts.unmatched_ends += 1;
            return Ok(());
        };
        let outcome = if e.arg & 0xff == 1 { "ready" } else { "pending" };
        track.open_at(depth).args.push(DebugAnnotation::new("outcome", str_arg(outcome)));
        let (seq, path) = track.open_path(depth);
        track.close_to(depth, ts, &mut self.counts.unfinished);
        self.mark_stalls(w, e.task_id, seq, &path)?;
        self.workers[w].last_poll = Some((seq, path));
        Ok(())
    }

    /// Mark on the poll of `task` that just closed on worker `w` (at `path` below
    /// top-level span `seq`) the stall reports that are its (see the module docs).
    /// Reports stamped before it began are no later poll's either: instants.
    fn mark_stalls(&mut self, w: usize, task: u64, seq: u64, path: &[usize]) -> io::Result<()> {
        let Some(reports) = self.stalls.get_mut(&(w, task)) else { return Ok(()) };
        let poll = self.workers[w].span_at(seq, path).expect("the poll just closed");
        let (begin, end) = (poll.begin, poll.end.expect("closed"));
        let mut stale = Vec::new();
        let mut mark = None;
        reports.retain(|r| {
            let (from, to) = r.span();
            if to < begin {
                stale.push(*r);
            } else if from < end {
                mark = Some(StallMark::merge(mark, from, to, r.duration_ns));
            } else {
                return true;
            }
            false
        });
        if mark.is_none() {
            let late = reports.iter().position(|r| r.ts > end && end - begin >= r.duration_ns);
            if let Some(r) = late.and_then(|i| reports.remove(i)) {
                mark = Some(StallMark { begin, end: begin + r.duration_ns, duration_ns: r.duration_ns });
            }
        }
        if reports.is_empty() {
            self.stalls.remove(&(w, task));
        }
        if let Some(m) = mark {
            let poll = self.workers[w].span_at(seq, path).expect("the poll just closed");
            if poll.begun.is_some() {
                // What it holds is written already: the stall cannot go around it.
                let r = StallReport { ts: m.end, duration_ns: m.duration_ns };
                self.stall_instant(w, task, r)?;
            } else {
                self.counts.stalls += 1;
                poll.stall = mark;
            }
        }
        for r in stale {
            self.stall_instant(w, task, r)?;
        }
        Ok(())
    }

    /// A stall report no poll took: an instant where it was stamped, written now (an
    /// instant nests wherever it falls).
    fn stall_instant(&mut self, w: usize, task: u64, r: StallReport) -> io::Result<()> {
        self.counts.stall_instants += 1;
        let span = Span::new(SpanKind::Instant, "stall".into(), r.ts)
            .arg("task_id", AnnotationValue::Uint(task))
            .arg("task", str_arg(&self.index.task_name(task)))
            .arg("duration_ms", AnnotationValue::Double(r.duration_ns as f64 / 1e6));
        write_span(&mut self.out, self.workers[w].uuid, &span)
    }

    /// The worker parks: a slice until it unparks. A park while one is open means the
    /// unpark between them is missing: the open one ends here.
    fn park(&mut self, w: usize, e: &proto::Event) -> io::Result<()> {
        let track = &mut self.workers[w];
        let ts = track.at(e.timestamp_ns);
        if track.parked() {
            track.close_to(track.open - 1, ts, &mut self.counts.unfinished);
            self.counts.unfinished += 1;
        }
        let name = if e.arg == 1 { "parked in reactor" } else { "parked" };
        track.push(Span::new(SpanKind::Park, name.into(), ts), true);
        self.counts.parks += 1;
        self.write_held(w)
    }

    /// The worker unparks: the open park closes, saying what woke it. With none open,
    /// the unpark is dropped.
    fn unpark(&mut self, w: usize, e: &proto::Event) {
        let track = &mut self.workers[w];
        let ts = track.at(e.timestamp_ns);
        if !track.parked() {
            self.counts.unmatched_ends += 1;
            return;
        }
        let woke = if e.arg == 1 { "notified" } else { "timeout or I/O" };
        let depth = track.open - 1;
        track.open_at(depth).args.push(DebugAnnotation::new("woke", str_arg(woke)));
        track.close_to(depth, ts, &mut self.counts.unfinished);
    }

    /// A spawn on worker `w`: inside a poll, a flow from that poll to the new task's
    /// first.
    fn spawn_in_poll(&mut self, w: usize, child: u64) {
        let track = &mut self.workers[w];
        if let Some(depth) = track.innermost_open(|s| matches!(s.kind, SpanKind::Poll { .. })) {
            self.flows.start(track.open_at(depth), child);
        }
    }

    /// A wake by task `waker` recorded on worker `w`: a flow from the waker's poll there
    /// (open, or just ended) to `woken`'s next poll.
    fn wake_from_poll(&mut self, w: usize, waker: u64, woken: u64) {
        let track = &mut self.workers[w];
        if let Some(depth) = track.open_poll_depth(waker) {
            self.flows.start(track.open_at(depth), woken);
            return;
        }
        let Some((seq, path)) = track.last_poll.clone() else { return };
        if let Some(poll) = track.span_at(seq, &path).filter(|s| s.is_poll_of(waker)) {
            self.flows.start(poll, woken);
        }
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
        self.write_held(w)
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
            self.flows.start(&mut span, e.task_id);
        } else {
            self.flows.forget(e.task_id);
        }
        write_span(&mut self.out, OUTSIDE_UUID, &span)
    }

    /// Write what worker `w`'s track need not hold any more: the spans that fell out of
    /// its window, and past [`SPILL`] what is closed inside its open span.
    fn write_held(&mut self, w: usize) -> io::Result<()> {
        let track = &mut self.workers[w];
        let uuid = track.uuid;
        for span in track.overflow() {
            write_span(&mut self.out, uuid, &span)?;
        }
        track.spill(&mut self.out)
    }

    /// Close what is still open at the data's last timestamp, write everything held, and
    /// give the output back with what was drawn.
    pub fn finish(mut self) -> io::Result<(W, Counts)> {
        let last = self.last_ts;
        for w in 0..self.workers.len() {
            let track = &mut self.workers[w];
            if track.open == 0 {
                continue;
            }
            let ts = track.at(last);
            // The top-level one counts too: nothing closed it.
            self.counts.unfinished += 1;
            let mut polls = Vec::new();
            for d in 0..track.open {
                if let SpanKind::Poll { task } = track.open_at(d).kind {
                    track.open_at(d).args.push(DebugAnnotation::new("outcome", str_arg("unfinished")));
                    polls.push((task, track.open_path(d)));
                }
            }
            track.close_to(0, ts, &mut self.counts.unfinished);
            // Innermost first, as they would have ended.
            for (task, (seq, path)) in polls.into_iter().rev() {
                self.mark_stalls(w, task, seq, &path)?;
            }
        }
        for track in &mut self.workers {
            for span in track.recent.drain(..) {
                write_span(&mut self.out, track.uuid, &span)?;
            }
        }
        let mut left: Vec<_> = std::mem::take(&mut self.stalls).into_iter().collect();
        left.sort_by_key(|(key, _)| *key);
        for ((w, task), reports) in left {
            for r in reports {
                self.stall_instant(w, task, r)?;
            }
        }
        self.counts.flows = self.flows.started;
        self.counts.flows_ended = self.flows.ended;
        Ok((self.out.finish()?, self.counts))
    }
}

/// The tracks of a trace: the runtime's process (Perfetto groups threads under it by
/// pid; a recording without one gets 1), a thread per worker, and the track for events
/// off the workers under the process.
fn tracks(pid: u32, workers: usize) -> Vec<TrackDescriptor> {
    let shown = pid;
    let pid = if pid == 0 { 1 } else { pid.min(i32::MAX as u32 / 2) as i32 };
    let mut out = vec![TrackDescriptor {
        uuid: Some(PROCESS_UUID),
        process: Some(ProcessDescriptor { pid: Some(pid), process_name: Some(format!("volt runtime (pid {shown})")) }),
        ..Default::default()
    }];
    for w in 0..workers {
        let name = format!("worker {w}");
        out.push(TrackDescriptor {
            uuid: Some(WORKER_UUID + w as u64),
            name: Some(name.clone()),
            // A thread id of its own, never the pid (that is the main thread's).
            thread: Some(ThreadDescriptor { pid: Some(pid), tid: Some(pid + 1 + w as i32), thread_name: Some(name) }),
            ..Default::default()
        });
    }
    out.push(TrackDescriptor {
        uuid: Some(OUTSIDE_UUID),
        name: Some("outside the workers".into()),
        parent_uuid: Some(PROCESS_UUID),
        ..Default::default()
    });
    out
}

fn str_arg(s: &str) -> AnnotationValue {
    AnnotationValue::String(s.to_string())
}

/// Write `span` and everything nested in it: its begin (or the instant), the stall
/// marked on it, its children, its end.
fn write_span<W: Write>(out: &mut PacketWriter<W>, track: u64, span: &Span) -> io::Result<()> {
    if span.begun.is_none() {
        write_begin(out, track, span)?;
    }
    if span.kind == SpanKind::Instant {
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
        args.push(DebugAnnotation::new("duration_ms", AnnotationValue::Double(mark.duration_ns as f64 / 1e6)));
        out.push(Some(begin), slice_begin(track, "stall", args))?;
        for child in &span.children {
            write_span(out, track, child)?;
        }
        out.push(Some(stall_end), slice_end(track, Vec::new(), Vec::new()))?;
    } else {
        for child in &span.children {
            write_span(out, track, child)?;
        }
    }
    // What came after its begin was written goes on its end.
    let (args, flows) = span.begun.unwrap_or((span.args.len(), span.flows_out.len()));
    out.push(Some(end), slice_end(track, span.args[args..].to_vec(), span.flows_out[flows..].to_vec()))
}

/// Write `span`'s begin (or the instant), with its arguments and flows so far.
fn write_begin<W: Write>(out: &mut PacketWriter<W>, track: u64, span: &Span) -> io::Result<()> {
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
    )
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

fn slice_end(track: u64, args: Vec<DebugAnnotation>, flow_ids: Vec<u64>) -> PacketData {
    PacketData::TrackEvent(TrackEvent {
        r#type: Some(EventType::SliceEnd as i32),
        track_uuid: Some(track),
        debug_annotations: args,
        flow_ids,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perfetto::trace::Trace;
    use prost::Message;
    use proto::EventKind as K;

    const W0: Option<u32> = Some(0);
    const W1: Option<u32> = Some(1);

    fn ev(timestamp_ns: u64, worker: Option<u32>, kind: K, task_id: u64, arg: u64) -> proto::Event {
        proto::Event { timestamp_ns, worker, kind: kind as i32, task_id, arg }
    }

    /// A `Schedule` argument: the local queue, woken by task `waker`.
    fn woken_by(waker: u64) -> u64 {
        (3 | waker << SOURCE_KIND_BITS) << SCHEDULE_SOURCE_SHIFT | 1
    }

    /// A slice as a trace processor builds it from one track's events.
    #[derive(Debug, PartialEq)]
    struct Drawn {
        track: u64,
        name: String,
        begin: u64,
        end: u64,
        depth: usize,
        flows_out: Vec<u64>,
        flows_in: Vec<u64>,
        args: Vec<(String, String)>,
    }

    /// Run `events` through both passes as one update of a runtime of two workers (task
    /// 1 named `one`), and rebuild the slices per track: sorted by time (file order
    /// within a time), matched as a stack; an end with nothing open fails the test.
    fn draw(events: &[proto::Event]) -> (Vec<Drawn>, Counts) {
        let mut index = Index::default();
        let one = proto::Task { id: 1, name: Some("one".into()), ..Default::default() };
        index.learn(&proto::Update {
            runtime: Some(proto::RuntimeInfo { workers: 2, pid: 42, ..Default::default() }),
            tasks: Some(proto::TaskChanges { changed: vec![one], ..Default::default() }),
            events: events.to_vec(),
            ..Default::default()
        });
        let mut t = Timeline::new(Vec::new(), &index).unwrap();
        for e in events {
            t.event(e).unwrap();
        }
        let (bytes, counts) = t.finish().unwrap();
        let trace = Trace::decode(&bytes[..]).unwrap();
        let mut by_track: HashMap<u64, Vec<(u64, usize, TrackEvent)>> = HashMap::new();
        for (i, p) in trace.packet.into_iter().enumerate() {
            if let Some(PacketData::TrackEvent(e)) = p.data {
                by_track.entry(e.track_uuid.unwrap()).or_default().push((p.timestamp.unwrap(), i, e));
            }
        }
        let mut out = Vec::new();
        let mut tracks: Vec<_> = by_track.into_iter().collect();
        tracks.sort_by_key(|t| t.0);
        for (track, mut evs) in tracks {
            evs.sort_by_key(|e| (e.0, e.1));
            let mut open: Vec<usize> = Vec::new();
            for (ts, _, e) in evs {
                let args: Vec<_> = e
                    .debug_annotations
                    .iter()
                    .map(|a| {
                        let v = match a.value.as_ref().unwrap() {
                            AnnotationValue::Uint(v) => v.to_string(),
                            AnnotationValue::Double(v) => v.to_string(),
                            AnnotationValue::String(v) => v.clone(),
                        };
                        (a.name.clone().unwrap(), v)
                    })
                    .collect();
                if e.r#type == Some(EventType::SliceEnd as i32) {
                    // An end's arguments and flows are its slice's, as Perfetto reads them.
                    let s: &mut Drawn = &mut out[open.pop().expect("an end with nothing open")];
                    s.end = ts;
                    s.args.extend(args);
                    s.flows_out.extend(e.flow_ids);
                    continue;
                }
                out.push(Drawn {
                    track,
                    name: e.name.unwrap(),
                    begin: ts,
                    end: ts,
                    depth: open.len(),
                    flows_out: e.flow_ids,
                    flows_in: e.terminating_flow_ids,
                    args,
                });
                if e.r#type == Some(EventType::SliceBegin as i32) {
                    open.push(out.len() - 1);
                }
            }
            assert!(open.is_empty(), "left open on track {track}");
        }
        (out, counts)
    }

    fn shape(d: &[Drawn]) -> Vec<(u64, &str, u64, u64, usize)> {
        d.iter().map(|s| (s.track, s.name.as_str(), s.begin, s.end, s.depth)).collect()
    }

    fn arg<'a>(d: &'a Drawn, name: &str) -> Option<&'a str> {
        d.args.iter().find(|a| a.0 == name).map(|a| a.1.as_str())
    }

    const T0: u64 = WORKER_UUID;
    const T1: u64 = WORKER_UUID + 1;

    #[test]
    fn polls_nest_parks_are_slices_and_ends_without_a_begin_are_dropped() {
        let (d, counts) = draw(&[
            ev(5, W0, K::PollEnd, 9, 0),
            ev(10, W0, K::PollStart, 1, 0),
            // `join` helping: a poll inside a poll.
            ev(12, W0, K::PollStart, 2, 0),
            ev(15, W0, K::PollEnd, 2, 1),
            ev(20, W0, K::PollEnd, 1, 0),
            ev(21, W0, K::Unpark, 0, 1),
            ev(22, W0, K::Park, 0, 1),
            ev(30, W0, K::Unpark, 0, 1),
            ev(31, W0, K::Steal, 5, 1 << 32 | 3),
        ]);
        assert_eq!(
            shape(&d),
            vec![
                (T0, "one", 10, 20, 0),
                (T0, "task 2", 12, 15, 1),
                (T0, "parked in reactor", 22, 30, 0),
                (T0, "steal", 31, 31, 0)
            ]
        );
        assert_eq!(arg(&d[0], "outcome"), Some("pending"));
        assert_eq!(arg(&d[1], "outcome"), Some("ready"));
        assert_eq!(arg(&d[2], "woke"), Some("notified"));
        assert_eq!(
            (arg(&d[3], "victim"), arg(&d[3], "count"), arg(&d[3], "runs_task")),
            (Some("1"), Some("3"), Some("5"))
        );
        assert_eq!(counts.unmatched_ends, 2);
        assert_eq!((counts.polls, counts.parks, counts.steals), (2, 1, 1));
    }

    #[test]
    fn what_is_left_open_closes_with_its_parent_or_at_the_last_timestamp() {
        let (d, counts) = draw(&[
            ev(10, W0, K::PollStart, 1, 0),
            ev(11, W0, K::PollStart, 2, 0),
            // The end of 2 is missing: it ends with 1.
            ev(20, W0, K::PollEnd, 1, 1),
            ev(25, W0, K::PollStart, 3, 0),
            ev(50, W1, K::Park, 0, 0),
            ev(70, W1, K::Steal, 0, 0),
        ]);
        assert_eq!(
            shape(&d),
            vec![
                (T0, "one", 10, 20, 0),
                (T0, "task 2", 11, 20, 1),
                (T0, "task 3", 25, 70, 0),
                (T1, "parked", 50, 70, 0),
                (T1, "steal", 70, 70, 1)
            ]
        );
        assert_eq!(arg(&d[2], "outcome"), Some("unfinished"));
        assert_eq!(counts.unfinished, 3);
    }

    #[test]
    fn time_never_goes_back_on_a_track() {
        let (d, _) = draw(&[
            ev(100, W0, K::PollStart, 1, 0),
            ev(200, W0, K::PollEnd, 1, 0),
            // Put back from its length, a tick before the previous end.
            ev(199, W0, K::PollStart, 2, 0),
            ev(300, W0, K::PollEnd, 2, 0),
        ]);
        assert_eq!(shape(&d), vec![(T0, "one", 100, 200, 0), (T0, "task 2", 200, 300, 0)]);
    }

    #[test]
    fn wakes_and_spawns_are_flows_from_the_waking_poll_to_the_next_one() {
        let (d, counts) = draw(&[
            ev(10, W0, K::PollStart, 1, 0),
            ev(10, W0, K::Spawn, 2, 0),
            ev(10, W0, K::Schedule, 3, woken_by(1)),
            ev(20, W0, K::PollEnd, 1, 0),
            // Woken during its own poll: queued as the poll ends.
            ev(20, W0, K::Schedule, 1, woken_by(1)),
            ev(25, W1, K::PollStart, 2, 0),
            ev(30, W1, K::PollEnd, 2, 1),
            ev(31, W1, K::PollStart, 3, 0),
            ev(35, W1, K::PollEnd, 3, 0),
            ev(40, W0, K::PollStart, 1, 0),
            ev(45, W0, K::PollEnd, 1, 0),
            // A wake by a task polled nowhere here: no flow.
            ev(46, W0, K::Schedule, 3, woken_by(77)),
            // From outside: an instant, and a flow to the task's next poll.
            ev(50, None, K::Schedule, 3, 0 << SCHEDULE_SOURCE_SHIFT | 2),
            ev(60, W1, K::PollStart, 3, 0),
            ev(61, W1, K::PollEnd, 3, 1),
        ]);
        let find = |name: &str, begin: u64| d.iter().find(|s| s.name == name && s.begin == begin).unwrap();
        let first = find("one", 10);
        assert_eq!(first.flows_out.len(), 3, "{first:?}");
        for target in [find("task 2", 25), find("task 3", 31), find("one", 40)] {
            assert_eq!(target.flows_in.len(), 1, "{target:?}");
            assert!(first.flows_out.contains(&target.flows_in[0]), "{target:?}");
        }
        let wake = find("wake task 3", 50);
        assert_eq!(wake.track, OUTSIDE_UUID);
        assert_eq!(arg(wake, "woken_by"), Some("a thread outside the runtime"));
        assert_eq!(find("task 3", 60).flows_in, wake.flows_out);
        assert_eq!((counts.flows, counts.flows_ended), (4, 4));
    }

    #[test]
    fn a_stall_is_drawn_inside_its_poll_whoever_recorded_it() {
        let stall = |worker: u64, us: u64| worker << STALL_WORKER_SHIFT | us;
        let (d, counts) = draw(&[
            // Recorded by the worker as the poll ended, with the poll's length.
            ev(1_000_000, W0, K::PollStart, 7, 0),
            ev(61_000_000, W0, K::PollEnd, 7, 0),
            ev(61_000_000, W0, K::Stall, 7, stall(0, 60_000)),
            // Recorded by another thread while the poll ran, as far as it had run.
            ev(70_000_000, W1, K::PollStart, 1, 0),
            ev(90_000_000, None, K::Stall, 1, stall(1, 20_000)),
            ev(95_000_000, W1, K::PollEnd, 1, 1),
            // Recorded late, after its poll ended: stuck from the poll's start. The
            // poll after it was too short to be the stalled one.
            ev(100_000_000, W0, K::PollStart, 8, 0),
            ev(130_000_000, W0, K::PollEnd, 8, 0),
            ev(130_000_100, W0, K::PollStart, 8, 0),
            ev(130_000_200, W0, K::PollEnd, 8, 1),
            ev(150_000_000, None, K::Stall, 8, stall(0, 12_000)),
            // A stall whose poll is not in the data: an instant.
            ev(160_000_000, None, K::Stall, 9, stall(1, 15_000)),
        ]);
        let stalls: Vec<_> = d.iter().filter(|s| s.name == "stall").collect();
        let spans: Vec<_> = stalls.iter().map(|s| (s.track, s.begin, s.end, s.depth)).collect();
        assert_eq!(
            spans,
            vec![
                (T0, 1_000_000, 61_000_000, 1),
                (T0, 100_000_000, 112_000_000, 1),
                (T1, 70_000_000, 90_000_000, 1),
                (T1, 160_000_000, 160_000_000, 0)
            ]
        );
        assert_eq!((arg(stalls[0], "task_id"), arg(stalls[0], "duration_ms")), (Some("7"), Some("60")));
        assert_eq!(arg(stalls[2], "task"), Some("one"));
        assert_eq!((counts.stalls, counts.stall_instants), (3, 1));
    }

    #[test]
    fn a_stall_around_nested_polls_holds_them() {
        let (d, _) = draw(&[
            ev(10_000_000, W0, K::PollStart, 1, 0),
            ev(11_000_000, W0, K::PollStart, 2, 0),
            ev(12_000_000, W0, K::PollEnd, 2, 1),
            ev(30_000_000, W0, K::PollEnd, 1, 0),
            // Its span starts after the nested poll did: widened to hold it.
            ev(30_000_000, W0, K::Stall, 1, 15_000),
        ]);
        assert_eq!(
            shape(&d),
            vec![
                (T0, "one", 10_000_000, 30_000_000, 0),
                (T0, "stall", 11_000_000, 30_000_000, 1),
                (T0, "task 2", 11_000_000, 12_000_000, 2)
            ]
        );
    }

    /// A poll that helps a `join` for long holds only its open chain: past `SPILL`
    /// nested polls its begin and theirs are written, and its outcome and a flow from it
    /// go on its end.
    #[test]
    fn a_long_join_writes_what_it_holds_as_it_goes() {
        let n = 2 * SPILL as u64 + 10;
        let mut events = vec![ev(0, W0, K::PollStart, 1, 0)];
        for i in 0..n {
            events.push(ev(10 + 2 * i, W0, K::PollStart, 1000 + i, 0));
            events.push(ev(11 + 2 * i, W0, K::PollEnd, 1000 + i, 1));
        }
        let end = 20 + 2 * n;
        events.push(ev(end, W0, K::Schedule, 5, woken_by(1)));
        events.push(ev(end, W0, K::PollEnd, 1, 1));
        events.push(ev(end + 1, W1, K::PollStart, 5, 0));
        events.push(ev(end + 2, W1, K::PollEnd, 5, 0));
        // Held: never more than the bound, however many it nests.
        let mut index = Index::default();
        index.workers = 2;
        let mut t = Timeline::new(std::io::sink(), &index).unwrap();
        for e in &events {
            t.event(e).unwrap();
            assert!(t.workers[0].nested <= SPILL + 1);
        }
        let (d, counts) = draw(&events);
        let outer = &d[0];
        assert_eq!((outer.name.as_str(), outer.begin, outer.end, outer.depth), ("one", 0, end, 0));
        assert_eq!(arg(outer, "outcome"), Some("ready"));
        let nested = &d[1..=n as usize];
        assert!(nested
            .iter()
            .enumerate()
            .all(|(i, s)| s.depth == 1 && s.begin == 10 + 2 * i as u64 && s.end == s.begin + 1));
        let woken = d.iter().find(|s| s.name == "task 5").unwrap();
        assert_eq!(outer.flows_out, woken.flows_in);
        assert_eq!(counts.flows_ended, 1);
    }

    #[test]
    fn events_past_the_window_are_written_in_order() {
        let mut events = Vec::new();
        for i in 0..(3 * WINDOW as u64) {
            events.push(ev(10 * i, W0, K::PollStart, 100 + i, 0));
            events.push(ev(10 * i + 5, W0, K::PollEnd, 100 + i, 1));
        }
        // A wake from the first poll, long after it was written: nothing to attach to.
        events.push(ev(100_000, W0, K::Schedule, 5, woken_by(100)));
        let (d, counts) = draw(&events);
        assert_eq!(d.len(), 3 * WINDOW);
        assert!(d.iter().enumerate().all(|(i, s)| s.begin == 10 * i as u64 && s.end == s.begin + 5 && s.depth == 0));
        assert_eq!(counts.flows, 0);
    }
}
