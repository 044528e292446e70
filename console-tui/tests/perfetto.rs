//! `volt-console --export-perfetto`, for real: a recording of a real runtime (tasks that
//! wake each other, spawns from inside polls, a poll that blocks its worker 60 ms),
//! exported by the binary, then read back with Perfetto's own protobuf definitions (the
//! `perfetto_protos` crate, generated from Perfetto's schema files), not with the
//! messages the exporter writes with. Also the live path, and the errors.

mod common;

use futures::{SinkExt, StreamExt};
use perfetto_protos::trace::Trace;
use perfetto_protos::track_event::track_event::Type;
use protobuf::Message;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use volt_console::record::RecordWriter;
use volt_console_proto as proto;

/// A runtime with the console on a free loopback port, the event ring, and a stall
/// threshold well under the test's 60 ms poll.
fn runtime(workers: usize) -> volt::Runtime {
    volt::runtime::Builder::new()
        .worker_threads(workers)
        .event_ring(65_536)
        .stall_threshold(Some(Duration::from_millis(20)))
        .console_bind("127.0.0.1:0")
        .console_publish_interval(Duration::from_millis(20))
        .build()
        .expect("runtime with console")
}

/// A directory of the test's own, removed at the end.
struct TempDir(PathBuf);
impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("volt-perfetto-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }
    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn volt_console(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_volt-console")).args(args).output().expect("run volt-console")
}

fn export(source: &str, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["--export-perfetto", source, out.to_str().unwrap()];
    args.extend_from_slice(extra);
    volt_console(&args)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The workload: `ping` and `pong` wake each other through channels (a wake from inside
/// a poll, by a task), and `spawner` spawns `child-R-N` tasks from its polls and joins
/// them. Both run until `stop`.
struct Workload {
    stop: Arc<AtomicBool>,
    ping: u64,
    pong: u64,
    spawner: u64,
    /// Every task's name by id, children included.
    names: Arc<Mutex<HashMap<u64, String>>>,
}

impl Workload {
    fn start(rt: &volt::Runtime) -> Workload {
        let stop = Arc::new(AtomicBool::new(false));
        let (mut to_pong, mut pong_rx) = futures::channel::mpsc::channel::<u32>(1);
        let (mut to_ping, mut ping_rx) = futures::channel::mpsc::channel::<u32>(1);
        let named = |name: &str| volt::task::Builder::new().name(name);
        let pong = named("pong").spawn_on(
            async move {
                while let Some(n) = pong_rx.next().await {
                    if to_ping.send(n).await.is_err() {
                        break;
                    }
                }
            },
            rt.handle(),
        );
        let s = Arc::clone(&stop);
        let ping = named("ping").spawn_on(
            async move {
                let mut n = 0;
                while !s.load(Relaxed) {
                    n += 1;
                    if to_pong.send(n).await.is_err() || ping_rx.next().await.is_none() {
                        break;
                    }
                    // A pause, so the rings keep everything between two reads.
                    volt::time::sleep(Duration::from_millis(2)).await;
                }
            },
            rt.handle(),
        );
        let s = Arc::clone(&stop);
        let names = Arc::new(Mutex::new(HashMap::new()));
        let spawned = Arc::clone(&names);
        let spawner = named("spawner").spawn_on(
            async move {
                let mut round = 0;
                while !s.load(Relaxed) {
                    round += 1;
                    let children: Vec<_> = (0..3)
                        .map(|i| {
                            let name = format!("child-{round}-{i}");
                            let child = volt::task::Builder::new().name(name.clone()).spawn(async {
                                volt::task::yield_now().await;
                            });
                            spawned.lock().unwrap().insert(child.id().as_u64(), name);
                            child
                        })
                        .collect();
                    for c in children {
                        let _ = c.await;
                    }
                    volt::time::sleep(Duration::from_millis(20)).await;
                }
            },
            rt.handle(),
        );
        let (ping, pong, spawner) = (ping.id().as_u64(), pong.id().as_u64(), spawner.id().as_u64());
        names.lock().unwrap().extend([(ping, "ping".into()), (pong, "pong".into()), (spawner, "spawner".into())]);
        Workload { stop, ping, pong, spawner, names }
    }

    fn names(&self) -> HashMap<u64, String> {
        self.names.lock().unwrap().clone()
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
    }
}

/// A task that holds its worker for 60 ms in one poll.
fn spawn_staller(rt: &volt::Runtime, work: &Workload) -> volt::task::JoinHandle<()> {
    let h = volt::task::Builder::new().name("staller").spawn_on(
        async {
            std::thread::sleep(Duration::from_millis(60));
        },
        rt.handle(),
    );
    work.names.lock().unwrap().insert(h.id().as_u64(), "staller".into());
    h
}

fn is(e: &proto::Event, kind: proto::EventKind) -> bool {
    e.kind == kind as i32
}

/// A `Schedule` event's waker, if a task woke it (the wire's packing: the queue in the
/// low byte, then the source's kind in 3 bits, 3 for a task, and the task's id above).
fn waker(e: &proto::Event) -> Option<u64> {
    let source = e.arg >> 8;
    (is(e, proto::EventKind::Schedule) && source & 7 == 3).then_some(source >> 3)
}

/// Record the console's stream into `path` until it holds a stall of a `staller` poll,
/// a wake of `pong` by `ping` and a spawn of a child inside `spawner`'s poll, then a
/// few updates more. A staller is started again when one ends without a stall report
/// (a stall monitor may miss one on a loaded machine). Returns the stallers' ids.
fn record(rt: &volt::Runtime, work: &Workload, path: &Path) -> Vec<u64> {
    let t = common::tokio_rt();
    t.block_on(async {
        let mut c = common::client(rt).await;
        let watch = proto::WatchRequest { max_events_per_update: 1 << 20, ..Default::default() };
        let mut stream = c.watch_updates(watch).await.unwrap().into_inner();
        let mut out = RecordWriter::create(path).unwrap();
        let mut stallers = vec![];
        let mut staller = spawn_staller(rt, work);
        stallers.push(staller.id().as_u64());
        let (mut stalled, mut woke, mut spawned) = (false, false, false);
        let mut idle_since_staller = 0;
        let mut after = 0;
        let deadline = Instant::now() + Duration::from_secs(60);
        while after < 10 {
            assert!(
                Instant::now() < deadline,
                "within 60 s: a stall {stalled}, ping waking pong {woke}, a spawn in a poll {spawned}"
            );
            let u = stream.message().await.unwrap().expect("the stream stays open");
            out.write(&u).unwrap();
            for e in &u.events {
                stalled |= is(e, proto::EventKind::Stall) && stallers.contains(&e.task_id);
                woke |= e.task_id == work.pong && waker(e) == Some(work.ping);
                spawned |= is(e, proto::EventKind::Spawn) && e.worker.is_some() && e.arg == 0;
            }
            if stalled && woke && spawned {
                after += 1;
            } else if !stalled && staller.is_finished() {
                idle_since_staller += 1;
                if idle_since_staller > 25 {
                    staller = spawn_staller(rt, work);
                    stallers.push(staller.id().as_u64());
                    idle_since_staller = 0;
                }
            }
        }
        stallers
    })
}

/// An argument of a slice, as Perfetto's `DebugAnnotation` carries it.
#[derive(Clone, Debug, PartialEq)]
enum Arg {
    Uint(u64),
    Double(f64),
    Str(String),
}

/// A slice (or an instant) as a trace processor builds it: the begin and end events of
/// a track, sorted by time (stably: file order breaks ties), matched as a stack.
#[derive(Clone, Debug)]
struct Slice {
    track: u64,
    name: String,
    begin: u64,
    end: u64,
    /// The enclosing slice (an index into `Decoded::slices`).
    parent: Option<usize>,
    instant: bool,
    args: HashMap<String, Arg>,
    flows_out: Vec<u64>,
    flows_in: Vec<u64>,
}

impl Slice {
    fn uint(&self, name: &str) -> Option<u64> {
        match self.args.get(name) {
            Some(Arg::Uint(v)) => Some(*v),
            _ => None,
        }
    }
}

/// The trace as read back.
struct Decoded {
    pid: i32,
    /// Thread tracks by name, with their (pid, tid).
    threads: BTreeMap<String, (u64, i32, i32)>,
    process_uuid: u64,
    outside: Option<(u64, Option<u64>)>,
    slices: Vec<Slice>,
}

impl Decoded {
    fn worker_uuids(&self) -> Vec<u64> {
        self.threads.values().map(|t| t.0).collect()
    }

    /// Poll slices: on a worker track, with the `task_id` and `outcome` arguments.
    fn polls(&self) -> impl Iterator<Item = (usize, &Slice)> {
        let workers = self.worker_uuids();
        self.slices.iter().enumerate().filter(move |(_, s)| {
            workers.contains(&s.track) && !s.instant && s.args.contains_key("outcome") && s.uint("task_id").is_some()
        })
    }

    /// Flows with both ends: (source slice, target slice).
    fn flows(&self) -> Vec<(usize, usize)> {
        let mut from = HashMap::new();
        for (i, s) in self.slices.iter().enumerate() {
            for f in &s.flows_out {
                assert!(from.insert(*f, i).is_none(), "flow {f} starts twice");
            }
        }
        let mut out = vec![];
        for (i, s) in self.slices.iter().enumerate() {
            for f in &s.flows_in {
                if let Some(&src) = from.get(f) {
                    out.push((src, i));
                }
            }
        }
        out
    }
}

/// Read `path` with Perfetto's protos and rebuild its tracks and slices, checking what a
/// trace processor needs: every event on a declared track, every end closing an open
/// slice, nothing left open.
fn decode(path: &Path) -> Decoded {
    let bytes = std::fs::read(path).unwrap();
    let trace = Trace::parse_from_bytes(&bytes).expect("Perfetto's protos read the file");
    assert!(!trace.packet.is_empty());
    assert_eq!(trace.packet[0].sequence_flags(), 1, "the first packet clears the sequence's state");
    let mut processes = vec![];
    let mut threads = BTreeMap::new();
    let mut named = vec![];
    let mut events: BTreeMap<u64, Vec<(u64, usize)>> = BTreeMap::new();
    for (i, p) in trace.packet.iter().enumerate() {
        assert_eq!(p.trusted_packet_sequence_id(), 1);
        if p.has_track_descriptor() {
            let d = p.track_descriptor();
            assert!(d.has_uuid());
            if d.process.is_some() {
                processes.push((d.uuid(), d.process.pid()));
            } else if d.thread.is_some() {
                let t = &d.thread;
                let old = threads.insert(t.thread_name().to_string(), (d.uuid(), t.pid(), t.tid()));
                assert!(old.is_none(), "two threads named {}", t.thread_name());
            } else {
                named.push((d.uuid(), d.name().to_string(), d.parent_uuid));
            }
        } else if p.has_track_event() {
            let e = p.track_event();
            assert!(p.timestamp.is_some(), "an event without a timestamp");
            assert!(e.flow_ids_old.is_empty() && e.terminating_flow_ids_old.is_empty());
            events.entry(e.track_uuid()).or_default().push((p.timestamp(), i));
        }
    }
    assert_eq!(processes.len(), 1, "one process track: {processes:?}");
    let (process_uuid, pid) = processes[0];
    let mut declared: Vec<u64> = threads.values().map(|t| t.0).chain(named.iter().map(|n| n.0)).collect();
    declared.push(process_uuid);
    let mut slices: Vec<Slice> = vec![];
    for (track, mut evs) in events {
        assert!(declared.contains(&track), "events on track {track}, which is not declared");
        // What a trace processor does: order by time, file order within a time.
        evs.sort_by_key(|&(ts, i)| (ts, i));
        let mut stack: Vec<usize> = vec![];
        for (ts, i) in evs {
            let e = trace.packet[i].track_event();
            let ty = e.type_();
            assert!(matches!(ty, Type::TYPE_SLICE_BEGIN | Type::TYPE_SLICE_END | Type::TYPE_INSTANT), "{ty:?}");
            let args: HashMap<String, Arg> = e
                .debug_annotations
                .iter()
                .map(|a| {
                    let v = if a.has_uint_value() {
                        Arg::Uint(a.uint_value())
                    } else if a.has_double_value() {
                        Arg::Double(a.double_value())
                    } else {
                        Arg::Str(a.string_value().to_string())
                    };
                    (a.name().to_string(), v)
                })
                .collect();
            if ty == Type::TYPE_SLICE_END {
                // An end's arguments and flows are its slice's, as a trace processor takes them.
                let open = stack.pop().unwrap_or_else(|| panic!("an end at {ts} on track {track} with nothing open"));
                slices[open].end = ts;
                slices[open].args.extend(args);
                slices[open].flows_out.extend(&e.flow_ids);
                continue;
            }
            slices.push(Slice {
                track,
                name: e.name().to_string(),
                begin: ts,
                end: ts,
                parent: stack.last().copied(),
                instant: ty == Type::TYPE_INSTANT,
                args,
                flows_out: e.flow_ids.clone(),
                flows_in: e.terminating_flow_ids.clone(),
            });
            if ty == Type::TYPE_SLICE_BEGIN {
                stack.push(slices.len() - 1);
            }
        }
        assert!(stack.is_empty(), "{} slices left open on track {track}", stack.len());
    }
    let outside = named.iter().find(|n| n.1 == "outside the workers").map(|n| (n.0, n.2));
    Decoded { pid, threads, process_uuid, outside, slices }
}

/// The tracks: one process, a thread `worker N` per worker under it (by pid, each its
/// own tid), and the outside track under the process.
fn check_tracks(d: &Decoded, workers: usize) {
    assert_eq!(d.pid, std::process::id() as i32, "the process is the runtime's");
    let names: Vec<&String> = d.threads.keys().collect();
    let want: Vec<String> = (0..workers).map(|w| format!("worker {w}")).collect();
    assert_eq!(names, want.iter().collect::<Vec<_>>(), "one thread track per worker");
    let mut tids: Vec<i32> = d.threads.values().map(|t| t.2).collect();
    tids.sort();
    tids.dedup();
    assert_eq!(tids.len(), workers, "each worker its own tid");
    assert!(d.threads.values().all(|t| t.1 == d.pid && t.2 != d.pid), "{:?}", d.threads);
    assert_eq!(d.outside, Some((d.outside.unwrap().0, Some(d.process_uuid))), "the outside track is the process's");
}

/// Each poll slice is named by its task: the name given at spawn when the recording's
/// task lists carried it, `task <id>` otherwise.
fn check_names(d: &Decoded, names: &HashMap<u64, String>) {
    for (_, s) in d.polls() {
        let id = s.uint("task_id").unwrap();
        assert!(
            s.name == format!("task {id}") || names.get(&id) == Some(&s.name),
            "a poll of task {id} named {:?}",
            s.name
        );
    }
}

#[test]
fn a_recording_exports_tracks_slices_flows_and_a_stall() {
    let rt = runtime(2);
    let dir = TempDir::new("rec");
    let rec = dir.join("run.voltrec");
    let out = dir.join("run.pftrace");
    let work = Workload::start(&rt);
    let stallers = record(&rt, &work, &rec);
    work.stop.store(true, Relaxed);

    let o = export(rec.to_str().unwrap(), &out, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let said = text(&o.stdout);
    assert!(said.contains("ui.perfetto.dev") && said.contains("2 workers"), "{said}");

    let d = decode(&out);
    check_tracks(&d, 2);
    let names = work.names();
    check_names(&d, &names);
    let polls_of = |name: &str| d.polls().filter(|(_, s)| s.name == name).count();
    for name in ["ping", "pong", "spawner"] {
        assert!(polls_of(name) > 0, "no poll slice named {name}");
    }

    // Who woke whom: a flow from a poll of ping to the next poll of pong, and one from a
    // poll of the spawner to a child's first poll, both ends on slices.
    let flows = d.flows();
    assert!(!flows.is_empty(), "no flow has both ends");
    let task = |i: usize| d.slices[i].uint("task_id");
    let is_poll = |i: usize| d.polls().any(|(j, _)| j == i);
    assert!(flows.iter().all(|&(a, b)| (is_poll(a) || d.slices[a].instant) && is_poll(b)), "a flow ends off a poll");
    assert!(flows.iter().all(|&(a, b)| d.slices[a].begin <= d.slices[b].begin), "a flow goes back in time");
    assert!(
        flows.iter().any(|&(a, b)| task(a) == Some(work.ping) && task(b) == Some(work.pong)),
        "no flow from ping to pong among {} flows",
        flows.len()
    );
    let is_child = |i: usize| task(i).and_then(|t| names.get(&t)).is_some_and(|n| n.starts_with("child-"));
    assert!(
        flows.iter().any(|&(a, b)| task(a) == Some(work.spawner) && is_child(b)),
        "no flow from the spawner to a child it spawned"
    );

    // The stall: a slice on a worker's track, inside a poll of the staller that blocked
    // at least its 60 ms, carrying the task and a duration.
    let stall = d
        .slices
        .iter()
        .find(|s| s.name == "stall" && !s.instant && stallers.contains(&s.uint("task_id").unwrap_or(0)))
        .expect("a stall slice of the staller");
    assert!(d.worker_uuids().contains(&stall.track));
    assert!(matches!(stall.args.get("duration_ms"), Some(Arg::Double(ms)) if *ms > 0.0), "{:?}", stall.args);
    assert_eq!(stall.args.get("task"), Some(&Arg::Str("staller".into())), "{:?}", stall.args);
    let poll = &d.slices[stall.parent.expect("the stall nests in its poll")];
    assert_eq!(poll.uint("task_id"), stall.uint("task_id"));
    assert!(poll.begin <= stall.begin && stall.end <= poll.end);
    assert!(poll.end - poll.begin >= 60_000_000, "the staller's poll took {} ns", poll.end - poll.begin);

    // Parks are slices too, with what woke the worker.
    assert!(d.slices.iter().any(|s| s.name.starts_with("parked") && !s.instant && s.args.contains_key("woke")));
}

/// From a live process: `--export-perfetto ADDR OUT --seconds N` records for N seconds
/// and exports that.
#[test]
fn a_live_console_exports_its_next_seconds() {
    let rt = runtime(3);
    let work = Workload::start(&rt);
    let dir = TempDir::new("live");
    let out = dir.join("live.pftrace");
    let addr = rt.console_addr().unwrap().to_string();
    let o = export(&addr, &out, &["--seconds", "1"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("recording 1.0 s of"), "{}", text(&o.stderr));
    let d = decode(&out);
    check_tracks(&d, 3);
    check_names(&d, &work.names());
    assert!(d.polls().any(|(_, s)| s.name == "ping"), "no poll of ping in a second of it");
    assert!(!d.flows().is_empty(), "no flow in a second of ping-pong");
}

/// Inputs that are not something to export say so, exit with failure and write nothing.
#[test]
fn bad_inputs_are_clear_errors() {
    let dir = TempDir::new("errors");
    let out = dir.join("out.pftrace");
    let fails_with = |source: &str, extra: &[&str], want: &str| {
        let o = export(source, &out, extra);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{source}: succeeded");
        assert!(err.contains(want), "{source}: {err:?} does not say {want:?}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!out.exists(), "{source}: wrote {}", out.display());
    };
    let missing = dir.join("missing.voltrec");
    fails_with(missing.to_str().unwrap(), &[], "neither a recording (there is no such file) nor a console's address");

    let junk = dir.join("junk.voltrec");
    std::fs::write(&junk, b"hello, not a recording").unwrap();
    fails_with(junk.to_str().unwrap(), &[], "is not a volt-console recording");

    let empty = dir.join("empty.voltrec");
    drop(RecordWriter::create(&empty).unwrap());
    fails_with(empty.to_str().unwrap(), &[], "holds no updates");
    fails_with(empty.to_str().unwrap(), &["--seconds", "1"], "--seconds is for a live console");

    // Nothing listens on port 1.
    fails_with("127.0.0.1:1", &["--seconds", "1"], "is neither a recording nor a reachable console");

    // A real recording of a runtime without its event ring: updates, no events.
    let rt = common::runtime(2, false);
    let quiet = dir.join("no-events.voltrec");
    common::tokio_rt().block_on(async {
        let mut c = common::client(&rt).await;
        let mut s = c.watch_updates(proto::WatchRequest::default()).await.unwrap().into_inner();
        let mut w = RecordWriter::create(&quiet).unwrap();
        for _ in 0..3 {
            common::spawn_work(&rt, 10);
            w.write(&s.message().await.unwrap().unwrap()).unwrap();
        }
    });
    fails_with(quiet.to_str().unwrap(), &[], "holds 3 updates but no events");
    // The same runtime, live.
    fails_with(&rt.console_addr().unwrap().to_string(), &["--seconds", "1"], "keeps no events");

    // The output may not be the recording itself.
    let o = export(quiet.to_str().unwrap(), &quiet, &[]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("is the recording itself"), "{}", text(&o.stderr));
    assert_eq!(volt_console::record::read(&quiet).unwrap().updates.len(), 3, "the recording was overwritten");
}
