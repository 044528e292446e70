//! `volt-console`: watch a Volt runtime's scheduler live.
//!
//! ```text
//! volt-console [ADDR]                 connect (default 127.0.0.1:6670), reconnecting
//! volt-console --demo                 run a demo runtime in this process and watch it
//! volt-console --once --json [ADDR]   print one snapshot as JSON and exit
//!              [--tasks N|all] [--sort id|busy|polls|name]
//! volt-console --record FILE [ADDR]   watch and record the stream
//! volt-console --replay FILE          play a recording back (space pauses, . steps)
//! volt-console --export-perfetto SOURCE OUT [--seconds N]
//!                                     a Perfetto trace (ui.perfetto.dev) of a recording,
//!                                     or of N seconds (default 5) of the console at SOURCE
//! ```

use clap::Parser;
use crossterm::event::{self, Event as TermEvent, KeyEventKind};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;
use volt_console::app::{Action, App, Status};
use volt_console::client;
use volt_console::record::{self, RecordWriter};
use volt_console::{conn, demo, perfetto, ui};
use volt_console_proto as proto;

#[derive(Parser, Debug)]
#[command(name = "volt-console", version, about = "A live dashboard of a Volt runtime's scheduler")]
struct Args {
    /// The console server: host:port or http://host:port.
    #[arg(default_value = client::DEFAULT_ADDR, conflicts_with = "export_perfetto")]
    addr: String,
    /// Start a demo runtime (with the console on a free loopback port) in this process and
    /// watch it.
    #[arg(long, conflicts_with_all = ["replay", "once"])]
    demo: bool,
    /// Print one snapshot and exit.
    #[arg(long)]
    once: bool,
    /// With --once: print JSON.
    #[arg(long, requires = "once")]
    json: bool,
    /// With --once: how many tasks to list, or `all` (paged from the server, so any
    /// number works).
    #[arg(long, requires = "once", value_name = "N|all", default_value = "1000", value_parser = parse_tasks)]
    tasks: u64,
    /// With --once: the order of the tasks listed.
    #[arg(long, requires = "once", value_name = "id|busy|polls|name", default_value = "id", value_parser = parse_sort)]
    sort: proto::TaskSort,
    /// Record the stream to FILE while watching.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["replay", "once"])]
    record: Option<PathBuf>,
    /// Play back a recording made with --record.
    #[arg(long, value_name = "FILE", conflicts_with = "once")]
    replay: Option<PathBuf>,
    /// Write a Perfetto trace of SOURCE into OUT (open it at ui.perfetto.dev): SOURCE is a
    /// recording made with --record, or a console's address to record from for --seconds.
    #[arg(long, num_args = 2, value_names = ["SOURCE", "OUT"],
          conflicts_with_all = ["demo", "once", "record", "replay"])]
    export_perfetto: Option<Vec<String>>,
    /// With --export-perfetto from a live console: how long to record, in seconds
    /// (default 5).
    #[arg(long, value_name = "N", requires = "export_perfetto", value_parser = parse_seconds)]
    seconds: Option<Duration>,
    /// Testing only: panic right after the first frame, to check the terminal is restored.
    #[arg(long, hide = true)]
    panic_after_first_frame: bool,
    /// Events per update to ask the server for (at most 1048576, the default: every event
    /// the server read; 0: the server's default, 16384). A lower cap saves bandwidth;
    /// the events over it are counted as missed "over the per-update cap".
    #[arg(long, value_name = "N", default_value_t = client::DEFAULT_MAX_EVENTS,
          value_parser = clap::value_parser!(u32).range(0..=1_048_576))]
    max_events: u32,
    /// The console token (default: $VOLT_CONSOLE_TOKEN).
    #[arg(long, env = "VOLT_CONSOLE_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

fn parse_tasks(s: &str) -> Result<u64, String> {
    match s {
        "all" => Ok(u64::MAX),
        n => n.parse().map_err(|_| format!("{n:?} is neither a number of tasks nor `all`")),
    }
}

fn parse_seconds(s: &str) -> Result<Duration, String> {
    let max = perfetto::MAX_CAPTURE;
    match s.parse::<f64>() {
        Ok(n) if n > 0.0 && n <= max.as_secs_f64() => Ok(Duration::from_secs_f64(n)),
        _ => Err(format!("{s:?} is not a number of seconds above 0 and at most {}", max.as_secs())),
    }
}

fn parse_sort(s: &str) -> Result<proto::TaskSort, String> {
    Ok(match s {
        "id" => proto::TaskSort::Id,
        "busy" => proto::TaskSort::Busy,
        "polls" => proto::TaskSort::Polls,
        "name" => proto::TaskSort::Name,
        other => return Err(format!("{other:?} is not an order: use id, busy, polls or name")),
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("volt-console: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args) -> Result<(), String> {
    let token = client::token_from(args.token.clone());
    if let Some([source, out]) = args.export_perfetto.as_deref() {
        return export_perfetto(source, Path::new(out), &args, token);
    }
    if let Some(path) = &args.replay {
        // The header is checked first (a file that is not a recording fails here, having
        // read 8 bytes), then updates are read one at a time as they are due.
        let player = record::Player::open(path).map_err(|e| e.to_string())?;
        if player.ended() {
            return Err(format!("{} holds no updates", path.display()));
        }
        let mut app = App::new(format!("replay {}", path.display()));
        return tui(app_with(&mut app), Source::Replay(Box::new(player)), false).map_err(|e| e.to_string());
    }
    let recorder = || match &args.record {
        Some(p) => RecordWriter::create(p).map(Some).map_err(|e| e.to_string()),
        None => Ok(None),
    };
    if args.demo {
        // The demo's console on a free loopback port: nothing to configure, nothing shared.
        let recorder = recorder()?;
        let rt = demo::runtime(Some("127.0.0.1:0")).map_err(|e| format!("cannot start the demo runtime: {e}"))?;
        let addr = rt.console_addr().ok_or("the demo runtime has no console")?.to_string();
        let workload = demo::Demo::start(rt.handle());
        let (tx, rx) = mpsc::sync_channel(client::WATCH_BACKLOG);
        let mut app = App::new(format!("demo {addr}"));
        let options = client::WatchOptions { max_events_per_update: args.max_events };
        let watcher = client::spawn_watcher_with(addr.clone(), None, options, Some(app.task_query()), tx);
        app.recording = args.record.as_ref().map(|p| p.display().to_string());
        let r = tui(&mut app, Source::Live(conn::Conn::new(rx, recorder, watcher)), args.panic_after_first_frame);
        drop(workload);
        rt.shutdown_timeout(Duration::from_secs(1));
        return r.map_err(|e| e.to_string());
    }
    client::endpoint_uri(&args.addr)?;
    if args.once {
        return once(&args, token.as_deref());
    }
    let recorder = recorder()?;
    let (tx, rx) = mpsc::sync_channel(client::WATCH_BACKLOG);
    let mut app = App::new(args.addr.clone());
    let options = client::WatchOptions { max_events_per_update: args.max_events };
    let watcher = client::spawn_watcher_with(args.addr.clone(), token, options, Some(app.task_query()), tx);
    app.recording = args.record.as_ref().map(|p| p.display().to_string());
    tui(&mut app, Source::Live(conn::Conn::new(rx, recorder, watcher)), args.panic_after_first_frame)
        .map_err(|e| e.to_string())
}

/// `--export-perfetto SOURCE OUT`: the library does the work; this says what happened.
fn export_perfetto(source: &str, out: &Path, args: &Args, token: Option<String>) -> Result<(), String> {
    let source = perfetto::Source::parse(source).map_err(|e| e.to_string())?;
    let mut live = perfetto::LiveOptions { token, max_events: args.max_events, ..Default::default() };
    match (&source, args.seconds) {
        (perfetto::Source::Recording(p), Some(_)) => {
            return Err(format!("--seconds is for a live console; the recording {} is exported whole", p.display()))
        }
        (perfetto::Source::Live(addr), seconds) => {
            live.duration = seconds.unwrap_or(live.duration);
            eprintln!("volt-console: recording {:.1} s of {addr}", live.duration.as_secs_f64());
        }
        (perfetto::Source::Recording(_), None) => {}
    }
    let summary = perfetto::export(&source, out, &live).map_err(|e| e.to_string())?;
    println!("wrote {}: {summary}", out.display());
    println!("open it at https://ui.perfetto.dev");
    Ok(())
}

fn app_with(app: &mut App) -> &mut App {
    app.status = Status::Replay { position: 0, total: 0, paused: false, skipped: 0 };
    app
}

enum Source {
    Live(conn::Conn),
    Replay(Box<record::Player>),
}

/// Restores the terminal when dropped: on return, on error and on unwinding. (ratatui's
/// `init` also installs a panic hook that restores it before the panic message prints.)
struct TerminalGuard;
impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// SIGTERM and SIGHUP (a `kill`, a closed terminal window or SSH session) end the event
/// loop like `q` does, so the terminal guard restores the screen: without a handler
/// they kill the process in the alternate screen with the cursor hidden and raw mode on.
/// A thread of its own receives them and sets a flag that the loop looks at at least every
/// 100 ms. If the loop has not ended half a second later, it is stuck: crossterm's input
/// read spins forever on a terminal that has gone away (a read that returns 0 bytes is
/// retried at once), which is exactly when SIGHUP comes. The thread then restores what it
/// can and ends the process itself, so a closed terminal never leaves a process spinning.
fn exit_signals() -> std::io::Result<std::sync::Arc<std::sync::atomic::AtomicUsize>> {
    use signal_hook::consts::{SIGHUP, SIGTERM};
    let got = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGHUP])?;
    let flag = std::sync::Arc::clone(&got);
    std::thread::Builder::new().name("volt-console-signals".into()).spawn(move || {
        let Some(sig) = signals.forever().next() else { return };
        flag.store(sig as usize, std::sync::atomic::Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(500));
        ratatui::restore();
        let name = if sig == SIGHUP { "SIGHUP" } else { "SIGTERM" };
        eprintln!("volt-console: stopped by {name}");
        std::process::exit(1);
    })?;
    Ok(got)
}

fn tui(app: &mut App, mut source: Source, panic_after_first_frame: bool) -> std::io::Result<()> {
    let signal = exit_signals()?;
    // Before `try_init`: it turns raw mode on first, and may fail after that (entering
    // the alternate screen on an output that cannot be written); `restore` undoes
    // whatever was done.
    let _guard = TerminalGuard;
    let mut terminal = ratatui::try_init()?;
    // For the benchmarks: with VOLT_CONSOLE_KEY_TIMES=path, each key's time from being read
    // to the first frame drawn with its effect (after the server's page, when the key
    // asked for one), appended to `path` in microseconds, one line per key.
    let mut key_times = std::env::var_os("VOLT_CONSOLE_KEY_TIMES")
        .and_then(|p| std::fs::OpenOptions::new().create(true).append(true).open(p).ok());
    let mut key_read_at: Option<std::time::Instant> = None;
    loop {
        let sig = signal.load(std::sync::atomic::Ordering::Relaxed);
        if sig != 0 {
            let name = if sig == signal_hook::consts::SIGHUP as usize { "SIGHUP" } else { "SIGTERM" };
            return Err(std::io::Error::other(format!("stopped by {name}")));
        }
        let mut step = false;
        match &mut source {
            Source::Live(c) => {
                c.drain(app);
            }
            Source::Replay(p) => p.advance(app),
        }
        if let Source::Live(c) = &source {
            if let Action::QueryTasks(q) = app.requery() {
                c.query_tasks(q);
            }
        }
        terminal.draw(|f| ui::draw(f, app))?;
        if let (Some(out), Some(at)) = (key_times.as_mut(), key_read_at.filter(|_| !app.awaiting_page)) {
            use std::io::Write;
            let _ = writeln!(out, "{}", at.elapsed().as_micros());
            key_read_at = None;
        }
        if panic_after_first_frame {
            panic!("volt-console: the panic --panic-after-first-frame asked for");
        }
        // Waiting for a page of tasks: look again soon, so a key's effect shows at once.
        let wait = if app.awaiting_page { Duration::from_millis(5) } else { Duration::from_millis(100) };
        if event::poll(wait)? {
            if let TermEvent::Key(k) = event::read()? {
                if k.kind == KeyEventKind::Press {
                    if key_times.is_some() {
                        key_read_at = Some(std::time::Instant::now());
                    }
                    match app.on_key(k) {
                        Action::Quit => return Ok(()),
                        Action::Step => step = true,
                        Action::FetchTask(id) => match &source {
                            Source::Live(c) => {
                                c.fetch_task(id);
                                app.history_requested(id, Ok(()));
                            }
                            Source::Replay(_) => app.history_requested(
                                id,
                                Err("a replay has no server to ask: these are the recorded events".into()),
                            ),
                        },
                        Action::QueryTasks(q) => {
                            if let Source::Live(c) = &source {
                                c.query_tasks(q);
                            }
                        }
                        Action::None => {}
                    }
                }
            }
        }
        if step {
            if let Source::Replay(p) = &mut source {
                p.step(app);
            }
        }
    }
}

/// `--once`: one snapshot and `--tasks` tasks, as text or JSON. The tasks are written
/// page by page as they arrive, so `--tasks all` on a million tasks holds one page.
fn once(args: &Args, token: Option<&str>) -> Result<(), String> {
    use std::io::Write;
    let err = |e: std::io::Error| e.to_string();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    // JSON: the document up to the task array goes out with the first page, each page
    // after it, and the rest (counts, `tasks_more`) last. The array sits where a
    // placeholder string was.
    const HOLE: &str = "\u{1}tasks\u{1}";
    let document = |u: &proto::Update| -> Result<(String, String), String> {
        let mut v = json(u);
        if let Some(t) = v.pointer_mut("/tasks/changed") {
            *t = serde_json::Value::String(HOLE.into());
        }
        let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
        let hole = serde_json::to_string(HOLE).map_err(|e| e.to_string())?;
        Ok(match text.split_once(&hole) {
            Some((head, tail)) => (head.to_string(), tail.to_string()),
            None => (text, String::new()),
        })
    };
    let mut listed = 0u64;
    let mut head_written = false;
    let u = client::fetch_once(&args.addr, token, args.tasks, args.sort, |u, page| {
        if !head_written {
            head_written = true;
            if args.json {
                let (head, _) = document(u)?;
                write!(out, "{head}[").map_err(err)?;
            } else {
                print_text(u);
            }
        }
        for t in &page {
            if args.json {
                let mut tv = serde_json::to_value(t).map_err(|e| e.to_string())?;
                if let Ok(n) = proto::TaskState::try_from(t.state) {
                    tv["state"] =
                        serde_json::Value::String(n.as_str_name().trim_start_matches("TASK_STATE_").to_lowercase());
                }
                let sep = if listed == 0 { "\n" } else { ",\n" };
                write!(out, "{sep}      {}", serde_json::to_string(&tv).map_err(|e| e.to_string())?).map_err(err)?;
            } else {
                writeln!(out, "{}", task_line(t)).map_err(err)?;
            }
            listed += 1;
        }
        Ok(())
    })?;
    if args.json {
        if head_written {
            let (_, tail) = document(&u)?;
            writeln!(out, "{}]{tail}", if listed > 0 { "\n    " } else { "" }).map_err(err)?;
        } else {
            writeln!(out, "{}", serde_json::to_string_pretty(&json(&u)).map_err(|e| e.to_string())?).map_err(err)?;
        }
        return out.flush().map_err(err);
    }
    if !head_written {
        print_text(&u);
    }
    for g in &u.task_groups {
        writeln!(out, "{}", group_line(g)).map_err(err)?;
    }
    if let Some(t) = &u.tasks {
        let c = t.counts.clone().unwrap_or_default();
        writeln!(
            out,
            "tasks   {} live ({} idle, {} scheduled, {} running), {listed} listed{}",
            c.total,
            c.idle,
            c.scheduled,
            c.running,
            if u.tasks_more { " (more: --tasks all)" } else { "" }
        )
        .map_err(err)?;
    }
    out.flush().map_err(err)
}

fn task_line(t: &proto::Task) -> String {
    format!(
        "task {:>8}  {:<9}  polls {:>8}  busy {:>12} ns  scheduled {:>12} ns  {}  (spawned at {})",
        t.id,
        proto::TaskState::try_from(t.state)
            .map(|s| s.as_str_name().trim_start_matches("TASK_STATE_").to_lowercase())
            .unwrap_or_default(),
        t.polls,
        t.busy_ns,
        t.scheduled_ns,
        t.name.as_deref().unwrap_or(""),
        t.spawned_at.as_deref().unwrap_or("?")
    )
}

fn group_line(g: &proto::TaskGroup) -> String {
    format!(
        "group {:<40}  alive {:>7}  completed {:>9}  polls {:>10}  busy {:>14} ns  slow {:>7}  p50 < {} ns  p99 < {} ns",
        g.name,
        g.alive,
        g.completed,
        g.polls,
        g.busy_ns,
        g.slow_polls,
        g.poll_p50_ns.map_or("-".into(), |n| n.to_string()),
        g.poll_p99_ns.map_or("-".into(), |n| n.to_string()),
    )
}

/// The update as JSON, with enum fields as names.
fn json(u: &proto::Update) -> serde_json::Value {
    let mut v = serde_json::to_value(u).unwrap_or_default();
    name_enum(&mut v, "/snapshot/workers", |i| {
        proto::WorkerState::try_from(i).ok().map(|s| s.as_str_name().trim_start_matches("WORKER_STATE_").to_lowercase())
    });
    name_enum(&mut v, "/tasks/changed", |i| {
        proto::TaskState::try_from(i).ok().map(|s| s.as_str_name().trim_start_matches("TASK_STATE_").to_lowercase())
    });
    name_enum_field(&mut v, "/task_groups", "kind", |i| {
        proto::TaskGroupKind::try_from(i)
            .ok()
            .map(|k| k.as_str_name().trim_start_matches("TASK_GROUP_KIND_").to_lowercase())
    });
    v
}

/// Replace the numeric `state` of every object in the array at `pointer` with its name.
fn name_enum(v: &mut serde_json::Value, pointer: &str, name: impl Fn(i32) -> Option<String>) {
    name_enum_field(v, pointer, "state", name)
}

/// Replace the numeric `field` of every object in the array at `pointer` with its name.
fn name_enum_field(v: &mut serde_json::Value, pointer: &str, field: &str, name: impl Fn(i32) -> Option<String>) {
    let Some(items) = v.pointer_mut(pointer).and_then(|w| w.as_array_mut()) else { return };
    for item in items {
        if let Some(n) = item.get(field).and_then(|s| s.as_i64()).and_then(|s| name(s as i32)) {
            item[field] = serde_json::Value::String(n);
        }
    }
}

fn print_text(u: &proto::Update) {
    let Some(s) = &u.snapshot else { return };
    println!(
        "uptime {:.1}s  workers {}  spawned {}  alive {}  global queue {}  searching {}  parked {} (bitmap {:#b})",
        u.uptime_ns as f64 / 1e9,
        s.workers.len(),
        s.tasks_spawned,
        s.tasks_alive,
        s.global_queue_depth,
        s.num_searching,
        s.num_parked,
        s.parked_bitmap
    );
    match &s.bridge {
        Some(b) => println!(
            "bridge  workers {}  alive tasks {}  global queue {}  busy {:.3}s",
            b.workers,
            b.alive_tasks,
            b.global_queue_depth,
            b.busy_ns as f64 / 1e9
        ),
        None => println!("bridge  off"),
    }
    for w in &s.workers {
        println!(
            "worker {:>2}  {:<9}  queue {:>4}  polls {:>10}  steals {:>8}  parks {:>8}  ewma {:>8} ns  interval {}",
            w.index,
            proto::WorkerState::try_from(w.state)
                .map(|s| s.as_str_name())
                .unwrap_or("?")
                .trim_start_matches("WORKER_STATE_"),
            w.local_queue_depth,
            w.tasks_polled,
            w.tasks_stolen,
            w.times_parked,
            w.ewma_task_ns,
            w.global_queue_interval
        );
    }
}
