//! Task groups and spawn locations on the console's path: from a real runtime through
//! its console server to the dashboard's state and screen, and to `--once --json`.

mod common;

use common::*;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::time::{Duration, Instant};
use volt_console::app::{App, View};
use volt_console::client;
use volt_console_proto as proto;

/// Spawn `n` tasks named `name` that finish at once, and wait for them.
fn finished(rt: &volt::Runtime, name: &str, n: usize) {
    let hs: Vec<_> = (0..n).map(|_| volt::task::Builder::new().name(name).spawn_on(async {}, rt.handle())).collect();
    for h in hs {
        h.join().unwrap();
    }
}

fn screen(app: &App) -> String {
    let mut t = Terminal::new(TestBackend::new(160, 40)).unwrap();
    t.draw(|f| volt_console::ui::draw(f, app)).unwrap();
    let b = t.backend().buffer();
    (0..b.area.height).map(|y| (0..b.area.width).map(|x| b[(x, y)].symbol()).collect::<String>() + "\n").collect()
}

/// The groups the runtime counts arrive in every update, the dashboard keeps them and
/// draws one row each in its groups view (`o`), and the workers' busy time comes too.
#[test]
fn groups_reach_the_dashboard() {
    let rt = runtime(2, true);
    finished(&rt, "job", 25);
    let waiters: Vec<_> = (0..3).map(|_| spawn_waiter(&rt, "listener")).collect();
    let (tx, rx) = std::sync::mpsc::sync_channel(client::WATCH_BACKLOG);
    let _watcher = client::spawn_watcher(rt.console_addr().unwrap().to_string(), None, tx);
    let mut app = App::new("test");
    let deadline = Instant::now() + Duration::from_secs(30);
    let group = |app: &App, name: &str| app.model.task_groups.iter().find(|g| g.name == name).cloned();
    loop {
        assert!(Instant::now() < deadline, "the groups never arrived: {:#?}", app.model.task_groups);
        if let Ok(client::Msg::Update(u)) = rx.recv_timeout(Duration::from_secs(1)) {
            app.apply(*u);
        }
        let job = group(&app, "job");
        let listener = group(&app, "listener");
        if job.is_some_and(|g| g.completed == 25) && listener.is_some_and(|g| g.alive == 3) {
            break;
        }
    }
    let job = group(&app, "job").unwrap();
    assert_eq!((job.spawned, job.alive, job.kind), (25, 0, proto::TaskGroupKind::Named as i32));
    assert!(job.polls >= 25 && job.poll_p50_ns.is_some());
    let busy: u64 = app.model.snapshot.as_ref().unwrap().workers.iter().map(|w| w.busy_ns).sum();
    assert!(busy > 0, "the workers' busy time did not come");
    app.on_key(crossterm::event::KeyEvent::new(
        crossterm::event::KeyCode::Char('o'),
        crossterm::event::KeyModifiers::NONE,
    ));
    assert_eq!(app.screen.view, View::Groups);
    let s = screen(&app);
    assert!(s.contains("task groups: "), "{s}");
    let row = |name: &str| s.lines().find(|l| l.starts_with(&format!("│{name} "))).map(String::from);
    let listener = row("listener").unwrap_or_else(|| panic!("no listener row:\n{s}"));
    let cells: Vec<&str> = listener.trim_matches('│').split_whitespace().collect();
    assert_eq!(cells[..3], ["listener", "3", "0"], "name, alive, done: {listener}");
    let job = row("job").unwrap_or_else(|| panic!("no job row:\n{s}"));
    let cells: Vec<&str> = job.trim_matches('│').split_whitespace().collect();
    assert_eq!(cells[..3], ["job", "0", "25"], "{job}");
    for (_, tx) in &waiters {
        let _ = tx.send(());
    }
}

/// `--once --json` carries the groups (kinds as names, figures that add up) and each
/// task's spawn location.
#[test]
fn once_json_has_the_groups_and_spawn_locations() {
    let rt = runtime(2, true);
    finished(&rt, "job", 10);
    let (_h, tx) = spawn_waiter(&rt, "listener");
    let line = line!() + 1;
    let unnamed = rt.spawn(std::future::pending::<()>());
    let bin = env!("CARGO_BIN_EXE_volt-console");
    let out = std::process::Command::new(bin)
        .args(["--once", "--json", &rt.console_addr().unwrap().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let groups = v["task_groups"].as_array().expect("task_groups");
    let find = |name: &str| groups.iter().find(|g| g["name"] == name).unwrap_or_else(|| panic!("{name}: {groups:#?}"));
    let job = find("job");
    assert_eq!(
        (job["kind"].as_str(), job["spawned"].as_u64(), job["completed"].as_u64()),
        (Some("named"), Some(10), Some(10))
    );
    let listener = find("listener");
    assert_eq!((listener["alive"].as_u64(), listener["kind"].as_str()), (Some(1), Some("named")));
    let site = format!("{}:{line}:", file!());
    let place = groups
        .iter()
        .find(|g| g["name"].as_str().is_some_and(|n| n.starts_with(&site)))
        .expect("the unnamed task's group");
    assert_eq!((place["kind"].as_str(), place["alive"].as_u64()), (Some("spawn_location"), Some(1)));
    let tasks = v["tasks"]["changed"].as_array().expect("tasks");
    let t = tasks.iter().find(|t| t["id"] == unnamed.id().as_u64()).expect("the unnamed task listed");
    assert!(t["spawned_at"].as_str().is_some_and(|at| at.starts_with(&site)), "{t}");
    let _ = tx.send(());
}
