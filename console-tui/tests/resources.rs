//! The deadlock warning, the resources view (`r`) and what a task holds in its details,
//! rendered on ratatui's `TestBackend` from fixed updates.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use volt_console::app::{Action, App, View};
use volt_console::ui;
use volt_console_proto as proto;

fn render(app: &App, w: u16, h: u16) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| ui::draw(f, app)).unwrap();
    t
}

fn screen(t: &Terminal<TestBackend>) -> Vec<String> {
    let b = t.backend().buffer();
    (0..b.area.height).map(|y| (0..b.area.width).map(|x| b[(x, y)].symbol()).collect()).collect()
}

fn find(t: &Terminal<TestBackend>, needle: &str) -> String {
    let lines = screen(t);
    lines
        .iter()
        .find(|l| l.contains(needle))
        .cloned()
        .unwrap_or_else(|| panic!("{needle:?} not on screen:\n{}", lines.join("\n")))
}

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn mutex(id: u64, holder: u64, waiters: u64) -> proto::Resource {
    proto::Resource {
        id,
        kind: Some("Mutex".into()),
        holder_task: Some(holder),
        waiters,
        created_at: Some(format!("src/db.rs:{}:17", 40 + id)),
        ..Default::default()
    }
}

fn deadlocked(id: u64, name: &str, held: u64, wants: u64, holder: u64) -> proto::DeadlockedTask {
    proto::DeadlockedTask {
        id,
        name: Some(name.into()),
        holds: vec![proto::HeldResource { primitive: "Mutex".into(), resource: held }],
        wants: format!("lock Mutex #{wants} (held by task {holder})"),
        wants_resource: Some(wants),
        wants_task: holder,
    }
}

/// An app that took in one update with a deadlock of tasks 3 and 4 over mutexes 1 and 2,
/// and a semaphore nobody holds.
fn app_with_deadlock() -> App {
    let mut app = App::new("127.0.0.1:6670");
    app.status = volt_console::app::Status::Live;
    let deadlock = proto::Deadlock { tasks: vec![deadlocked(3, "left", 1, 2, 4), deadlocked(4, "right", 2, 1, 3)] };
    let snapshot = proto::Snapshot { deadlocks_total: 1, deadlocks: vec![deadlock], ..Default::default() };
    let sem =
        proto::Resource { id: 9, kind: Some("Semaphore".into()), free: 0, total: 10, waiters: 4, ..Default::default() };
    app.apply(proto::Update {
        uptime_ns: 1_000_000_000,
        snapshot: Some(snapshot),
        runtime: Some(proto::RuntimeInfo { workers: 2, event_ring_capacity: 1024, ..Default::default() }),
        resources: vec![mutex(1, 3, 1), mutex(2, 4, 1), sem],
        resources_total: 3,
        ..Default::default()
    });
    app
}

#[test]
fn the_header_names_each_deadlocked_task_with_what_it_holds_and_wants() {
    let app = app_with_deadlock();
    let w = app.warnings();
    assert_eq!(
        w[0],
        "deadlock: task 3 \"left\" holds Mutex #1, wants lock Mutex #2; \
         task 4 \"right\" holds Mutex #2, wants lock Mutex #1"
    );
    let t = render(&app, 140, 30);
    let l = find(&t, "⚠ deadlock: task 3");
    assert!(l.contains("task 4 \"right\" holds Mutex #2, wants lock Mutex #1"), "{l}");
}

#[test]
fn r_opens_the_resources_view_which_lists_holders_waiters_and_permits() {
    let mut app = app_with_deadlock();
    assert_eq!(app.on_key(key(KeyCode::Char('r'))), Action::None);
    assert_eq!(app.screen.view, View::Resources);
    let t = render(&app, 140, 30);
    find(&t, "resources: 3");
    // Mutex #1's row (the header's deadlock warning also names task 3).
    let m1 =
        screen(&t).into_iter().find(|l| l.trim_start_matches('│').starts_with("1 ")).expect("a row for resource 1");
    assert!(m1.contains("Mutex") && m1.contains("task 3") && m1.contains("deadlock"), "{m1}");
    assert!(m1.contains("src/db.rs:41:17"), "where it was created: {m1}");
    let sem = find(&t, "Semaphore");
    assert!(sem.contains("0/10 free") && sem.contains(" 4 "), "{sem}");
    // Moving through it stays within its rows.
    for _ in 0..10 {
        app.on_key(key(KeyCode::Down));
    }
    assert_eq!(app.screen.selected, 2);
    // Tab goes round through it: stalls, resources, workers.
    app.on_key(key(KeyCode::Tab));
    assert_eq!(app.screen.view, View::Workers);
    app.on_key(key(KeyCode::BackTab));
    assert_eq!(app.screen.view, View::Resources);
    app.on_key(key(KeyCode::BackTab));
    assert_eq!(app.screen.view, View::Stalls);
    // The help lists the key, and the key bar the view.
    app.on_key(key(KeyCode::Char('?')));
    let t = render(&app, 140, 40);
    find(&t, "w t o e s r");
    find(&t, "resources (locks: holders, waiters)");
    app.on_key(key(KeyCode::Char('x')));
    find(&render(&app, 80, 24), " r resources ");
}

#[test]
fn a_tasks_details_show_what_it_holds() {
    let mut app = app_with_deadlock();
    app.apply(proto::Update {
        uptime_ns: 1_100_000_000,
        tasks: Some(proto::TaskChanges {
            changed: vec![proto::Task { id: 3, name: Some("left".into()), ..Default::default() }],
            full: true,
            ..Default::default()
        }),
        ..Default::default()
    });
    app.on_key(key(KeyCode::Char('t')));
    assert_eq!(app.on_key(key(KeyCode::Enter)), Action::FetchTask(3));
    app.apply_task(
        3,
        Ok(proto::TaskDetails {
            task: Some(proto::Task { id: 3, name: Some("left".into()), ..Default::default() }),
            holds: vec![mutex(1, 3, 1)],
            ..Default::default()
        }),
    );
    let l = find(&render(&app, 140, 40), "holds       ");
    assert!(l.contains("Mutex #1 (1 waiting)"), "{l}");
    // Closing the details forgets it.
    app.on_key(key(KeyCode::Esc));
    assert_eq!(app.model.detail, None);
}

#[test]
fn an_update_without_resources_empties_the_view() {
    let mut app = app_with_deadlock();
    app.apply(proto::Update { uptime_ns: 2_000_000_000, ..Default::default() });
    assert!(app.model.resources.is_empty());
    app.on_key(key(KeyCode::Char('r')));
    find(&render(&app, 140, 30), "resources: 0");
}
