//! The timeline's tests: events in, and the trace read back the way a trace processor
//! reads it, as slices nested per track with their flows and arguments.

use super::track::{SPILL, WINDOW};
use super::*;
use crate::perfetto::decode::{SCHEDULE_SOURCE_SHIFT, SOURCE_KIND_BITS, STALL_WORKER_SHIFT};
use crate::perfetto::trace::{EventType, Trace, TrackEvent};
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
    assert_eq!((arg(&d[3], "victim"), arg(&d[3], "count"), arg(&d[3], "runs_task")), (Some("1"), Some("3"), Some("5")));
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
