//! The dashboard rendered on ratatui's `TestBackend` from fixed updates, and its keys and
//! warnings driven directly.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::style::Color;
use ratatui::Terminal;
use volt_console::app::{Action, App, SortKey, TaskHistory, View};
use volt_console::ui;
use volt_console_proto as proto;

fn worker(index: u32, state: proto::WorkerState, depth: u64, polled: u64) -> proto::WorkerSnapshot {
    proto::WorkerSnapshot {
        index,
        state: state as i32,
        local_queue_depth: depth,
        lifo_occupied: index == 0,
        tasks_polled: polled,
        // 0.4 ms a poll: 1000 polls a second keep a worker busy 40% of the time.
        busy_ns: polled * 400_000,
        tasks_stolen: polled / 10,
        times_parked: polled / 100,
        ewma_task_ns: 8_100 + index as u64 * 1000,
        global_queue_interval: 61 - index,
        ..Default::default()
    }
}

/// Four workers: 0 running with 128 queued, 1 searching, 2 and 3 parked.
fn update(uptime_s: u64, polls: [u64; 4], spawned: u64) -> proto::Update {
    use proto::WorkerState::*;
    let states = [Running, Searching, Parked, Parked];
    let depths = [128, 0, 0, 0];
    proto::Update {
        seq: uptime_s,
        uptime_ns: uptime_s * 1_000_000_000,
        snapshot: Some(proto::Snapshot {
            workers: (0..4).map(|i| worker(i as u32, states[i], depths[i], polls[i])).collect(),
            global_queue_depth: 5,
            num_searching: 1,
            num_parked: 2,
            parked_bitmap: 0b1100,
            tasks_spawned: spawned,
            ..Default::default()
        }),
        runtime: Some(proto::RuntimeInfo {
            workers: 4,
            max_searching: 2,
            event_ring_capacity: 4096,
            publish_interval_ns: 250_000_000,
            pid: 1,
            version: "0.1.0".into(),
            started_unix_ns: 0,
        }),
        ..Default::default()
    }
}

fn fixed_app() -> App {
    let mut app = App::new("127.0.0.1:6670");
    app.status = volt_console::app::Status::Live;
    app.apply(update(1, [1000, 1000, 1000, 1000], 100));
    app.apply(update(2, [2000, 1500, 1000, 1000], 2100));
    app
}

fn render(app: &App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    t
}

fn line(t: &Terminal<TestBackend>, y: u16) -> String {
    let b = t.backend().buffer();
    (0..b.area.width).map(|x| b[(x, y)].symbol()).collect()
}

fn find(t: &Terminal<TestBackend>, needle: &str) -> (u16, String) {
    let h = t.backend().buffer().area.height;
    (0..h).map(|y| (y, line(t, y))).find(|(_, l)| l.contains(needle)).unwrap_or_else(|| {
        let screen: Vec<String> = (0..h).map(|y| line(t, y)).collect();
        panic!("{needle:?} not on screen:\n{}", screen.join("\n"))
    })
}

#[test]
fn header_shows_source_uptime_workers_and_rates() {
    let t = render(&fixed_app(), 140, 40);
    let header = line(&t, 1);
    assert_eq!(
        header.trim_end_matches('│').trim_end(),
        "│127.0.0.1:6670 ● live  uptime 00:00:02  workers 4  spawn 2000/s  poll 1500/s  steal 150/s  park 15/s  missed 0"
    );
    assert!(line(&t, 0).starts_with("┌ volt-console "));
    // Parked workers with a queue that holds tasks: flagged once it has lasted two updates.
    let (_, warning) = find(&t, "⚠");
    assert!(warning.contains("2 worker(s) parked while the global queue holds 5 task(s)"), "{warning}");
}

#[test]
fn the_parked_bitmap_is_one_cell_per_worker() {
    let t = render(&fixed_app(), 140, 40);
    let (y, l) = find(&t, "parked    ");
    assert!(l.contains("│parked    □□■■ 2/4"), "{l}");
    let x0 = l.chars().position(|c| c == '□').unwrap() as u16;
    let b = t.backend().buffer();
    let cells: Vec<(&str, Color)> = (x0..x0 + 4).map(|x| (b[(x, y)].symbol(), b[(x, y)].fg)).collect();
    assert_eq!(cells, [("□", Color::Green), ("□", Color::Green), ("■", Color::Blue), ("■", Color::Blue)]);
    let (_, s) = find(&t, "searching ");
    assert!(s.contains("│searching ▰▱ 1/2"), "{s}");
}

#[test]
fn the_workers_table_has_one_row_per_worker() {
    let t = render(&fixed_app(), 140, 40);
    let (y, head) = find(&t, "local queue");
    assert_eq!(
        head.trim_end().trim_end_matches('│').trim_end(),
        "│#   state      local queue      LIFO  polls/s   busy  steals/s  parks/s  EWMA task  gq int"
    );
    let rows: Vec<String> =
        (y + 1..y + 5).map(|y| line(&t, y).trim_end().trim_end_matches('│').trim_end().to_string()).collect();
    assert_eq!(
        rows,
        [
            "│0   running    █████░░░░░  128  ●     1000      40%   100       10       8.1µs      61",
            "│1   searching  ░░░░░░░░░░    0  ○     500       20%   50        5        9.1µs      60",
            "│2   parked     ░░░░░░░░░░    0  ○     0         0%    0         0        10.1µs     59",
            "│3   parked     ░░░░░░░░░░    0  ○     0         0%    0         0        11.1µs     58",
        ]
    );
    // The state column is coloured by state.
    let b = t.backend().buffer();
    assert_eq!(b[(5, y + 1)].fg, Color::Green);
    assert_eq!(b[(5, y + 2)].fg, Color::Yellow);
    assert_eq!(b[(5, y + 3)].fg, Color::Blue);
}

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn task(id: u64, name: Option<&str>, polls: u64, busy_ns: u64) -> proto::Task {
    proto::Task { id, name: name.map(Into::into), polls, busy_ns, ..Default::default() }
}

#[test]
fn keys_switch_views_move_sort_open_details_and_quit() {
    let mut app = fixed_app();
    let mut u = update(3, [3000, 2000, 1000, 1000], 3000);
    u.tasks = Some(proto::TaskChanges {
        changed: vec![task(7, Some("b-task"), 10, 500), task(8, Some("a-task"), 30, 100), task(9, None, 20, 900)],
        removed: vec![],
        full: true,
        ..Default::default()
    });
    app.apply(u);
    assert_eq!(app.screen.view, View::Workers);
    assert_eq!(app.on_key(key(KeyCode::Tab)), Action::None);
    assert_eq!(app.screen.view, View::Tasks);
    let order = |app: &App| app.sorted_tasks().iter().map(|r| r.task.id).collect::<Vec<_>>();
    assert_eq!(order(&app), [9, 7, 8], "busy time, most first");
    app.on_key(key(KeyCode::Char('p')));
    assert_eq!((app.screen.sort, order(&app)), (SortKey::Polls, vec![8, 9, 7]));
    app.on_key(key(KeyCode::Char('n')));
    assert_eq!((app.screen.sort, order(&app)), (SortKey::Name, vec![8, 7, 9]), "named first, by name");
    app.on_key(key(KeyCode::Char('j')));
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Down));
    assert_eq!(app.screen.selected, 2, "stops at the last row");
    app.on_key(key(KeyCode::Char('k')));
    assert_eq!(app.on_key(key(KeyCode::Enter)), Action::FetchTask(7), "opening details asks the server");
    assert_eq!(app.model.detail_id(), Some(7));
    let t = render(&app, 140, 40);
    find(&t, "task (Esc closes)");
    find(&t, "b-task");
    app.on_key(key(KeyCode::Esc));
    assert_eq!(app.model.detail_id(), None);
    app.on_key(key(KeyCode::Char('?')));
    assert!(app.screen.help);
    find(&render(&app, 140, 40), "this help");
    app.on_key(key(KeyCode::Char('x')));
    assert!(!app.screen.help);
    app.on_key(key(KeyCode::Char(' ')));
    assert!(app.screen.paused);
    app.on_key(key(KeyCode::Char('e')));
    assert_eq!(app.screen.view, View::Events);
    app.on_key(key(KeyCode::BackTab));
    assert_eq!(app.screen.view, View::Groups);
    app.on_key(key(KeyCode::BackTab));
    assert_eq!(app.screen.view, View::Tasks);
    // A finished task leaves the list.
    let mut u = update(4, [3000, 2000, 1000, 1000], 3000);
    u.tasks = Some(proto::TaskChanges { changed: vec![], removed: vec![7], full: false, ..Default::default() });
    app.apply(u);
    assert_eq!(order(&app), [8, 9]);
    assert_eq!(app.on_key(key(KeyCode::Char('q'))), Action::Quit);
    assert_eq!(app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)), Action::Quit);
}

fn ev(ts: u64, worker: u32, kind: proto::EventKind, task: u64, arg: u64) -> proto::Event {
    proto::Event { timestamp_ns: ts, worker: Some(worker), kind: kind as i32, task_id: task, arg }
}

#[test]
fn warnings_flag_slow_polls_dropped_events_and_self_waking_tasks() {
    use proto::EventKind::*;
    let mut app = App::new("x");
    let mut u = update(1, [0; 4], 0);
    u.snapshot.as_mut().unwrap().num_parked = 0;
    u.tasks = Some(proto::TaskChanges {
        changed: vec![task(42, Some("hog"), 1, 0)],
        removed: vec![],
        full: true,
        ..Default::default()
    });
    u.events = vec![ev(1_000, 0, PollStart, 42, 0), ev(16_001_000, 0, PollEnd, 42, 0)];
    // A task that woke itself during each of 1,000 polls.
    for i in 0..1000u64 {
        u.events.push(ev(20_000_000 + i * 10, 1, PollStart, 77, 0));
        u.events.push(ev(20_000_000 + i * 10 + 5, 1, PollEnd, 77, 0));
        u.events.push(ev(20_000_000 + i * 10 + 5, 1, Transition, 77, 2 << 8 | 1));
    }
    (u.events_missed, u.events_missed_ring, u.events_missed_cap) = (12, 5, 7);
    app.apply(u);
    let w = app.warnings();
    assert!(w.iter().any(|w| w == "task 42 (hog) polled for 16.0 ms: it blocks a worker"), "{w:?}");
    assert!(w.iter().any(|w| w.starts_with("5 events missed: the ring overwrote them")), "{w:?}");
    assert!(w.iter().any(|w| w.starts_with("7 events missed: over the per-update cap")), "{w:?}");
    assert!(w.iter().any(|w| w == "task 77 woke itself 1000 times in a row without completing"), "{w:?}");
    assert!(!w.iter().any(|w| w.contains("parked while")), "{w:?}");
    // Once it waits on something (RUNNING -> IDLE), it is no longer spinning.
    let mut u = update(2, [0; 4], 0);
    u.snapshot.as_mut().unwrap().num_parked = 0;
    u.events = vec![ev(30_000_000, 1, Transition, 77, 2 << 8)];
    app.apply(u);
    assert!(!app.warnings().iter().any(|w| w.contains("woke itself")));
}

#[test]
fn task_details_join_the_server_history_to_the_log_without_repeats() {
    use proto::EventKind as K;
    let mut app = fixed_app();
    let mut u = update(3, [3000, 2000, 1000, 1000], 3000);
    u.tasks = Some(proto::TaskChanges {
        changed: vec![task(5, Some("job"), 3, 900)],
        removed: vec![],
        full: true,
        ..Default::default()
    });
    // This console connected at 100 ns: its log has the task's events from then on.
    // Events of one worker often share a timestamp (those inside a poll carry its start).
    u.events = vec![
        ev(100, 0, K::PollStart, 5, 0),
        ev(100, 0, K::Spawn, 6, 0),
        ev(150, 0, K::PollEnd, 5, 0),
        ev(200, 1, K::Schedule, 5, 1),
        ev(300, 1, K::PollStart, 5, 0),
        ev(300, 1, K::Spawn, 5, 0), // same kind and time as the next: both are kept
        ev(300, 1, K::Spawn, 5, 0),
        ev(400, 1, K::PollEnd, 5, 1),
    ];
    app.apply(u);
    app.on_key(key(KeyCode::Char('t')));
    assert_eq!(app.on_key(key(KeyCode::Enter)), Action::FetchTask(5));
    let ids =
        |app: &App| app.model.detail_task().unwrap().1.iter().map(|e| (e.timestamp_ns, e.kind)).collect::<Vec<_>>();
    // Before the answer: the log's events of this task.
    assert_eq!(ids(&app).len(), 7);
    app.history_requested(5, Ok(()));
    assert_eq!(app.model.detail.as_ref().unwrap().history, Some(TaskHistory::Pending));
    find(&render(&app, 140, 40), "asking the server");
    // The server's history reaches back to the spawn (before this console connected) and
    // stops in the middle of the 300 ns poll.
    let history = vec![
        ev(10, 0, K::Spawn, 5, 1),
        ev(20, 0, K::PollStart, 5, 0),
        ev(30, 0, K::PollEnd, 5, 0),
        ev(100, 0, K::PollStart, 5, 0),
        ev(150, 0, K::PollEnd, 5, 0),
        ev(200, 1, K::Schedule, 5, 1),
        ev(300, 1, K::PollStart, 5, 0),
        ev(300, 1, K::Spawn, 5, 0),
    ];
    let mut fresher = task(5, Some("job"), 4, 1_000);
    fresher.state = proto::TaskState::Idle as i32;
    // An answer for a task whose view is closed changes nothing.
    app.apply_task(9, Ok(proto::TaskDetails { task: None, recent_events: vec![], ..Default::default() }));
    assert_eq!(app.model.detail.as_ref().unwrap().history, Some(TaskHistory::Pending));
    app.apply_task(5, Ok(proto::TaskDetails { task: Some(fresher), recent_events: history, ..Default::default() }));
    let (s, p, e, st) = (K::Spawn as i32, K::PollStart as i32, K::PollEnd as i32, K::Schedule as i32);
    assert_eq!(
        ids(&app),
        [(10, s), (20, p), (30, e), (100, p), (150, e), (200, st), (300, p), (300, s), (300, s), (400, e)],
        "the history, then only what the log has beyond it"
    );
    assert_eq!(app.model.detail_task().unwrap().0.task.polls, 4, "the answer refreshes the row");
    let screen = render(&app, 140, 40);
    find(&screen, "8 from the server's history");
    find(&screen, "spawn");
    // A failed answer falls back to the log, and says why.
    app.apply_task(5, Err("no live task with id 5 (NotFound)".into()));
    assert_eq!(ids(&app).len(), 7);
    find(&render(&app, 140, 40), "this console's only: no live task");
    // Closing the view forgets the history.
    app.on_key(key(KeyCode::Esc));
    assert_eq!(app.model.detail, None);
}

#[test]
fn the_bridge_row_shows_its_threads_tasks_queue_and_busy_share_or_off() {
    // Without a bridge in the snapshot: "off", in the scheduler box.
    let t = render(&fixed_app(), 140, 40);
    let (y_search, _) = find(&t, "searching ");
    let (y, l) = find(&t, "bridge ");
    assert_eq!(y, y_search + 1, "the line under the searchers");
    assert!(l.starts_with("│bridge    off "), "{l}");

    // Two snapshots one second apart; its two workers were busy 1 s of the 2 s they had.
    let mut app = App::new("127.0.0.1:6670");
    for (s, busy_ns) in [(1, 4_000_000_000), (2, 5_000_000_000)] {
        let mut u = update(s, [1000 * s; 4], 100 * s);
        u.snapshot.as_mut().unwrap().bridge =
            Some(proto::BridgeSnapshot { workers: 2, alive_tasks: 13, global_queue_depth: 1, busy_ns });
        app.apply(u);
    }
    assert_eq!(app.model.rates.bridge_busy, Some(0.5));
    let t = render(&app, 140, 40);
    let (_, l) = find(&t, "bridge ");
    assert!(l.starts_with("│bridge    2 thr  13 tasks  q 1  50% "), "{l}");
    // It fits an 80-column terminal, busy share included.
    let (_, l) = find(&render(&app, 80, 30), "bridge ");
    assert!(l.contains("│bridge    2 thr  13 tasks  q 1  50%"), "{l}");
}

fn screen(t: &Terminal<TestBackend>) -> String {
    let h = t.backend().buffer().area.height;
    (0..h).map(|y| line(t, y)).collect::<Vec<_>>().join("\n")
}

/// A busy app: big numbers everywhere, a warning, tasks with long names.
fn busy_app() -> App {
    let mut app = App::new("127.0.0.1:6670");
    app.status = volt_console::app::Status::Live;
    app.apply(update(1, [1_000, 1_000, 1_000, 1_000], 100));
    let mut u = update(2, [12_345_678, 2_345_678, 345_678, 45_678], 9_876_543);
    u.tasks = Some(proto::TaskChanges {
        changed: (1..=30)
            .map(|i| task(123_450 + i, Some("a-task-with-a-long-name"), i * 1_000, i * 7_777_777))
            .collect(),
        removed: vec![],
        full: true,
        ..Default::default()
    });
    app.apply(u);
    app
}

/// At 80x24 the key bar keeps "? help" and "q quit" in every view.
#[test]
fn at_80x24_the_key_bar_keeps_help_and_quit() {
    let mut app = busy_app();
    for view in [View::Workers, View::Tasks, View::Events] {
        app.screen.view = view;
        let t = render(&app, 80, 24);
        let bar = line(&t, 23);
        assert!(bar.contains("? help") && bar.contains("q quit"), "{view:?}: {bar:?}");
    }
}

/// At 60x20 whole columns go, never half a number: every figure on screen is one of
/// the values the app holds, whole, and the help box is not clipped.
#[test]
fn at_60x20_numbers_are_whole_and_the_help_box_fits() {
    let mut app = busy_app();
    let t = render(&app, 60, 20);
    let s = screen(&t);
    // The worker table: the columns that fit, each heading and each value whole.
    let (y, head) = find(&t, "polls/s");
    assert!(head.contains("#") && head.contains("state"), "{head}");
    for w in 0..4u16 {
        let row = line(&t, y + 1 + w);
        let polls = volt_console::ui::format::si(app.model.rates.workers[w as usize].0);
        assert!(row.contains(&format!(" {polls}")), "row {w} lacks its whole polls/s {polls}: {row}");
    }
    for heading in ["local queue", "LIFO", "steals/s", "parks/s", "EWMA task", "gq int"] {
        if head.contains(&heading[..2]) {
            assert!(head.contains(heading), "a heading cut: {head}");
        }
    }
    // The header's figures are whole: each label is followed by a whole value or absent.
    let header = line(&t, 1);
    for (label, value) in
        [("workers ", "4"), ("spawn ", &format!("{}/s", volt_console::ui::format::si(app.model.rates.spawns)))]
    {
        if header.contains(label.trim()) {
            assert!(header.contains(&format!("{label}{value}")), "{header}");
        }
    }
    assert!(!s.contains("spawns/s "), "the third box is dropped under 90 columns:\n{s}");
    // The tasks view: ids and busy times whole.
    app.screen.view = View::Tasks;
    let t = render(&app, 60, 20);
    let (y, head) = find(&t, "│id ");
    assert!(head.contains("busy") && head.contains("polls"), "{head}");
    let rows: Vec<String> = (y + 1..y + 5).map(|y| line(&t, y)).collect();
    for r in &rows {
        let id = r.trim_start_matches('│').split_whitespace().next().unwrap();
        let id: u64 = id.parse().unwrap_or_else(|_| panic!("an id cut: {r}"));
        let row = app.model.tasks.get(&id).unwrap_or_else(|| panic!("no task {id}: {r}"));
        assert!(r.contains(&volt_console::ui::format::dur(row.task.busy_ns)), "busy time cut: {r}");
    }
    // The help box: every line of it whole, inside its borders.
    app.screen.view = View::Workers;
    app.screen.help = true;
    let t = render(&app, 60, 20);
    let s = screen(&t);
    for l in
        ["q, Ctrl-C     quit", ". or →        replay: step one update while paused", "task that can never be woken."]
    {
        assert!(s.contains(l), "help line {l:?} clipped:\n{s}");
    }
    let (_, top) = find(&t, " help ");
    assert!(top.contains('┌') && top.contains('┐'), "{top}");
}

mod recordings {
    use super::*;
    use volt_console::record::{self, RecordWriter};

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("volt-console-rec-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// 40 updates, each with a few events, recorded; returns them and each frame's start.
    fn recording(path: &std::path::Path) -> (Vec<proto::Update>, Vec<usize>) {
        let mut w = RecordWriter::create(path).unwrap();
        let mut starts = Vec::new();
        let mut at = record::MAGIC.len();
        let updates: Vec<proto::Update> = (1..=40u64)
            .map(|i| {
                let mut u = update(i, [i * 100; 4], i * 10);
                u.events = (0..20).map(|k| ev(i * 1_000 + k, 0, proto::EventKind::PollStart, i, k)).collect();
                u
            })
            .collect();
        for u in &updates {
            starts.push(at);
            at += record::frame(u).len();
            w.write(u).unwrap();
        }
        (updates, starts)
    }

    /// One corrupt byte in the middle of a recording costs the one update it hit: the
    /// rest replays, in order, and the damage is counted. The same for a damaged length
    /// and a damaged frame marker.
    #[test]
    fn a_corrupt_byte_skips_one_update_and_the_rest_replays() {
        let d = dir("corrupt");
        let path = d.join("rec");
        let (updates, starts) = recording(&path);
        let clean = std::fs::read(&path).unwrap();
        // (where in frame 20, what it damages): the protobuf, the length, the marker, the checksum.
        for (offset, what) in [(40, "payload"), (5, "length"), (1, "marker"), (9, "checksum")] {
            let mut bytes = clean.clone();
            bytes[starts[20] + offset] ^= 0x5a;
            std::fs::write(&path, &bytes).unwrap();
            let back = record::read(&path).unwrap();
            assert_eq!(back.skipped, 1, "{what}");
            assert_eq!(back.truncated_bytes, 0, "{what}");
            let mut want = updates.clone();
            want.remove(20);
            assert_eq!(back.updates, want, "{what}: the other 39 updates, whole and in order");
        }
        // A length damaged to point past the end of the file: still only that update.
        let mut bytes = clean.clone();
        bytes[starts[20] + 4..starts[20] + 8].copy_from_slice(&(1u32 << 27).to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let back = record::read(&path).unwrap();
        assert_eq!((back.updates.len(), back.skipped), (39, 1));
        // A cut-off end: every whole update, and the cut counted as such.
        std::fs::write(&path, &clean[..clean.len() - 7]).unwrap();
        let back = record::read(&path).unwrap();
        assert_eq!((back.updates.len(), back.skipped), (39, 0));
        assert!(back.truncated_bytes > 0);
        std::fs::remove_dir_all(&d).ok();
    }

    /// The header is checked before anything else is read: `/dev/zero` is refused at once.
    #[test]
    fn a_file_that_is_not_a_recording_is_refused_at_once() {
        let err = record::RecordReader::open(std::path::Path::new("/dev/zero")).err().expect("refused");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        assert!(err.to_string().contains("not a volt-console recording"), "{err}");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_volt-console"))
            .args(["--replay", "/dev/zero"])
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("not a volt-console recording"));
    }

    /// Recordings of the first format (varint-delimited, `VOLTREC1`) still play.
    #[test]
    fn a_first_format_recording_still_reads() {
        use prost::Message;
        let d = dir("v1");
        let path = d.join("rec");
        let updates: Vec<proto::Update> = (1..=5u64).map(|i| update(i, [i; 4], i)).collect();
        let mut bytes = record::MAGIC_V1.to_vec();
        for u in &updates {
            bytes.extend(u.encode_length_delimited_to_vec());
        }
        std::fs::write(&path, &bytes).unwrap();
        let back = record::read(&path).unwrap();
        assert_eq!(back.updates, updates);
        assert_eq!(record::count_updates(&path).unwrap(), 5);
        std::fs::remove_dir_all(&d).ok();
    }

    /// While replaying, the screen says how many damaged updates were skipped.
    #[test]
    fn the_replay_shows_skipped_updates_on_screen() {
        let mut app = App::new("replay x");
        app.status = volt_console::app::Status::Replay { position: 12, total: 40, paused: false, skipped: 1 };
        app.replay_problems = vec!["1 damaged update(s) in the recording skipped (checksum or length wrong)".into()];
        app.apply(update(1, [1; 4], 1));
        let t = render(&app, 140, 40);
        find(&t, "▶ replay 12/40 (1 skipped)");
        find(&t, "1 damaged update(s) in the recording skipped");
    }
}

/// What a server or a recording says is not trusted for sizes: a searcher cap far past
/// the workers draws one cell per worker, and a terminal wider and taller than a u16
/// percentage allows still centres the popups (help, task details) inside it.
#[test]
fn bogus_sizes_and_huge_terminals_draw() {
    let mut app = fixed_app();
    let mut u = update(3, [3000, 2000, 1000, 1000], 4100);
    u.runtime.as_mut().unwrap().max_searching = u32::MAX;
    app.apply(u);
    app.screen.view = View::Workers;
    let t = render(&app, 100, 30);
    let (_, bar) = find(&t, "searching ");
    assert!(bar.contains("/4"), "the cap is the worker count: {bar}");
    assert_eq!(bar.matches(['▰', '▱']).count(), 4, "{bar}");
    // Help in the middle of a 1000 x 1000 terminal.
    app.on_key(key(KeyCode::Char('?')));
    let t = render(&app, 1000, 1000);
    let (y, row) = find(&t, "help");
    assert!(y > 100 && y < 900 && row.find("help").is_some_and(|x| x > 100), "help at row {y}");
}

/// An update whose task window (a server with windows) holds `view`, with `changed` rows.
fn window_update(uptime_s: u64, changed: Vec<proto::Task>, view: Vec<u64>, full: bool) -> proto::Update {
    let n = view.len() as u64;
    proto::Update {
        uptime_ns: uptime_s * 1_000_000_000,
        tasks: Some(proto::TaskChanges {
            changed,
            full,
            counts: Some(proto::TaskCounts { total: n, idle: n, ..Default::default() }),
            view,
            matching: n,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A paused live display keeps its rows and figures, but keeps what the server sends
/// only once: a stall, the counts of what was missed. Resuming asks for the whole task
/// window again, since a row that changed in the pause is not sent again.
#[test]
fn a_pause_keeps_what_the_server_sends_once_and_resuming_asks_for_the_window() {
    use volt_console::app::Status;
    let mut app = App::new("x");
    app.status = Status::Live;
    app.screen.view = View::Tasks;
    app.apply(window_update(1, vec![task(1, Some("a"), 1, 0), task(2, Some("b"), 1, 0)], vec![1, 2], true));
    assert!(matches!(app.requery(), Action::QueryTasks(_)), "the first window is asked for");
    app.awaiting_page = false;
    assert_eq!(app.requery(), Action::None, "nothing changed");
    app.on_key(key(KeyCode::Char(' ')));
    assert!(app.screen.paused);
    // In the pause: task 3 enters the window (sent once), a stall, missed updates.
    let mut u = window_update(2, vec![task(3, Some("c"), 1, 0)], vec![1, 2, 3], false);
    u.snapshot = Some(proto::Snapshot {
        recent_stalls: vec![proto::Stall { task_id: 3, worker: 1, duration_ns: 50_000_000, ..Default::default() }],
        ..Default::default()
    });
    u.updates_missed = 4;
    app.hold(u);
    assert_eq!(app.model.tasks.len(), 2, "the list is frozen in the pause");
    assert_eq!(app.model.uptime_ns, 1_000_000_000, "the figures are frozen in the pause");
    assert_eq!(app.model.stalls.len(), 1, "a stall is sent once: kept in the pause");
    assert_eq!(app.model.missed.updates, 4);
    assert!(app.warnings().iter().any(|w| w.starts_with("stall: task 3")), "{:?}", app.warnings());
    let resumed = app.on_key(key(KeyCode::Char(' ')));
    assert!(!app.screen.paused);
    let Action::QueryTasks(q) = resumed else { panic!("resuming asks for the window again: {resumed:?}") };
    assert_eq!((q.offset, q.limit), (0, volt_console::app::TASK_WINDOW));
    assert!(app.awaiting_page);
    app.apply_page(proto::TaskPage {
        tasks: vec![task(1, Some("a"), 1, 0), task(2, Some("b"), 1, 0), task(3, Some("c"), 1, 0)],
        counts: Some(proto::TaskCounts { total: 3, idle: 3, ..Default::default() }),
        matching: 3,
        ..Default::default()
    });
    let mut ids: Vec<u64> = app.sorted_tasks().iter().map(|r| r.task.id).collect();
    ids.sort();
    assert_eq!(ids, [1, 2, 3]);
}

/// A page is awaited (and the main loop looks for it every 5 ms) only from a live
/// stream: never in a replay, and not for a query made while disconnected, which the
/// watcher keeps for the next stream. A stream lost while a page is awaited ends the wait.
#[test]
fn a_page_is_awaited_only_from_a_live_stream() {
    use volt_console::app::Status;
    let mut app = App::new("replay");
    app.status = Status::Replay { position: 0, total: 0, paused: false, skipped: 0 };
    app.apply(window_update(1, vec![task(1, Some("a"), 1, 0)], vec![1], true));
    assert_eq!(app.requery(), Action::None, "a replay has no server to ask");
    app.screen.view = View::Tasks;
    assert_eq!(app.on_key(key(KeyCode::Char('p'))), Action::None);
    assert!(!app.awaiting_page);

    let mut app = App::new("x");
    app.status = Status::Disconnected { reason: "gone".into(), retry_in_ms: 100 };
    app.apply(window_update(1, vec![task(1, Some("a"), 1, 0)], vec![1], true));
    app.screen.view = View::Tasks;
    assert!(matches!(app.on_key(key(KeyCode::Char('p'))), Action::QueryTasks(_)), "kept for the next stream");
    assert!(!app.awaiting_page, "no page comes while disconnected");
}

fn restarted(uptime_ms: u64, spawned: u64, pid: u32) -> proto::Update {
    proto::Update {
        uptime_ns: uptime_ms * 1_000_000,
        snapshot: Some(proto::Snapshot { tasks_spawned: spawned, ..Default::default() }),
        runtime: Some(proto::RuntimeInfo { workers: 1, pid, started_unix_ns: pid as u64 * 1000, ..Default::default() }),
        ..Default::default()
    }
}

/// Another process behind the address (a restarted server) starts the console's own
/// reckoning over: no rate between two processes' counters, no slow poll of the old
/// one blamed on the new one's task of the same id.
#[test]
fn a_restarted_server_is_not_mixed_with_the_old_one() {
    use proto::EventKind::*;
    let mut app = App::new("x");
    let mut u = restarted(1000, 1000, 111);
    u.events = vec![ev(1_000_000, 0, PollStart, 7, 0), ev(16_000_000, 0, PollEnd, 7, 0)];
    app.apply(u);
    app.apply(proto::Update {
        uptime_ns: 2_000_000_000,
        snapshot: Some(proto::Snapshot { tasks_spawned: 2000, ..Default::default() }),
        ..Default::default()
    });
    assert_eq!(app.model.rates.spawns, 1000.0);
    assert!(app.warnings().iter().any(|w| w.contains("task 7") && w.contains("15.0 ms")), "{:?}", app.warnings());
    // The new process, 3 s old with 30,000 spawns: a rate needs two of its snapshots.
    let mut u = restarted(3000, 30_000, 222);
    u.tasks = window_update(3, vec![task(7, Some("new-seven"), 1, 0)], vec![7], true).tasks;
    app.apply(u);
    assert_eq!(app.model.rates.spawns, 0.0, "no rate across two processes");
    let w = app.warnings();
    assert!(!w.iter().any(|w| w.contains("polled for")), "the old process's slow poll: {w:?}");
    app.apply(proto::Update {
        uptime_ns: 4_000_000_000,
        snapshot: Some(proto::Snapshot { tasks_spawned: 40_000, ..Default::default() }),
        ..Default::default()
    });
    assert_eq!(app.model.rates.spawns, 10_000.0);
}

/// The slow-poll warning goes away some time after the poll, as a stall's does.
#[test]
fn a_slow_poll_warning_expires() {
    use proto::EventKind::*;
    let mut app = App::new("x");
    let mut u = update(1, [0; 4], 0);
    u.events = vec![ev(1_000, 0, PollStart, 42, 0), ev(16_001_000, 0, PollEnd, 42, 0)];
    app.apply(u);
    assert!(app.warnings().iter().any(|w| w.contains("polled for")));
    app.apply(update(1 + volt_console::app::STALL_WARNING_NS / 1_000_000_000, [0; 4], 0));
    assert!(!app.warnings().iter().any(|w| w.contains("polled for")), "{:?}", app.warnings());
}

fn group(name: &str, kind: proto::TaskGroupKind, polls: u64, busy_ns: u64) -> proto::TaskGroup {
    proto::TaskGroup {
        name: name.into(),
        kind: kind as i32,
        spawned: 10,
        alive: 4,
        completed: 6,
        polls,
        busy_ns,
        poll_p50_ns: Some(8192),
        poll_p99_ns: Some(65_536),
        ..Default::default()
    }
}

/// The groups view: a row per group, by busy time (or polls, or name), with each group's
/// polls/s and busy share between the last two updates; narrow, it keeps the name and the
/// counts.
#[test]
fn the_groups_view_shows_each_group_with_its_rates() {
    use proto::TaskGroupKind::*;
    let mut app = fixed_app();
    let mut u = update(3, [3000, 2000, 1000, 1000], 3000);
    u.task_groups =
        vec![group("conn", Named, 1000, 100_000_000), group("src/main.rs:9:5", SpawnLocation, 50, 1_000_000)];
    app.apply(u);
    let mut u = update(4, [4000, 2500, 1000, 1000], 4000);
    // One second later: conn polled 2,000 times more and took half a second of a worker.
    u.task_groups =
        vec![group("conn", Named, 3000, 600_000_000), group("src/main.rs:9:5", SpawnLocation, 60, 3_000_000)];
    app.apply(u);
    app.on_key(key(KeyCode::Char('o')));
    assert_eq!(app.screen.view, View::Groups);
    let t = render(&app, 160, 40);
    let (y, head) = find(&t, "busy total");
    assert!(head.contains("│group"), "{head}");
    let first: Vec<String> = line(&t, y + 1).trim_matches('│').split_whitespace().map(String::from).collect();
    assert_eq!(first[..6], ["conn", "4", "6", "2000", "50%", "600.00ms"], "{first:?}");
    assert!(line(&t, y + 1).contains("<8.2µs"), "the p50 bound");
    let second: Vec<String> = line(&t, y + 2).trim_matches('│').split_whitespace().map(String::from).collect();
    assert_eq!(second[..5], ["src/main.rs:9:5", "4", "6", "10", "0%"]);
    app.on_key(key(KeyCode::Char('n')));
    let t = render(&app, 160, 40);
    let (y, _) = find(&t, "sorted by name");
    assert!(line(&t, y + 2).contains("conn"), "by name, conn first");
    // 50 columns: the name, alive, done, polls/s and busy stay, whole.
    let t = render(&app, 50, 20);
    let (y, head) = find(&t, "alive");
    assert!(head.contains("polls/s") && head.contains("busy") && !head.contains("p50"), "{head}");
    assert!(line(&t, y + 1).contains("conn"));
}
