//! `volt-console --demo` in a real pseudo-terminal (tmux): the worker rows appear and
//! change, `q` quits cleanly, and the terminal is given back.

use std::process::Command;
use std::time::{Duration, Instant};

struct Tmux {
    socket: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux is needed for this test (apt-get install tmux; .ci/run installs it)")
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "console"]).stdout).into_owned()
    }

    /// Wait until `pred` holds for the screen; returns the screen.
    fn wait_for(&self, what: &str, timeout: Duration, pred: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            assert!(start.elapsed() < timeout, "timed out waiting for {what}; screen:\n{s}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// The worker table's rows: lines like `│0   running ...`.
fn worker_rows(screen: &str) -> Vec<String> {
    screen
        .lines()
        .filter(|l| {
            let t = l.trim_start_matches('│');
            t.len() > 4
                && t.starts_with(|c: char| c.is_ascii_digit())
                && (t.contains("running") || t.contains("parked") || t.contains("searching"))
        })
        .map(String::from)
        .collect()
}

#[test]
fn demo_in_a_real_terminal_shows_changing_workers_and_quits_cleanly() {
    let bin = env!("CARGO_BIN_EXE_volt-console");
    let dir = std::env::temp_dir().join(format!("volt-console-pty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let exit_file = dir.join("exit");
    let tmux = Tmux { socket: format!("volt-console-test-{}", std::process::id()) };
    // The shell prints a marker after the program exits, so we see both the exit status
    // and that the terminal is back to the shell.
    let script = format!("{bin} --demo; echo \"EXIT=$?\" > {}; echo SHELL-IS-BACK; sleep 30", exit_file.display());
    let out = tmux.cmd(&["new-session", "-d", "-s", "console", "-x", "150", "-y", "45", &script]);
    assert!(out.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&out.stderr));

    let first = tmux.wait_for("two worker rows", Duration::from_secs(30), |s| worker_rows(s).len() >= 2);
    assert!(first.contains("volt-console"), "{first}");
    assert!(first.contains("● live"), "{first}");
    let rows_before = worker_rows(&first);
    // Live: the rows change as the demo runs (rates, queue depths, EWMA).
    let changed = tmux.wait_for("the worker rows to change", Duration::from_secs(30), |s| {
        let rows = worker_rows(s);
        rows.len() == rows_before.len() && rows != rows_before
    });
    assert!(changed.contains("parked    "), "the parked bitmap is shown:\n{changed}");

    let out = tmux.cmd(&["send-keys", "-t", "console", "q"]);
    assert!(out.status.success());
    let start = Instant::now();
    while !exit_file.exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "no exit after q; screen:\n{}", tmux.screen());
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(std::fs::read_to_string(&exit_file).unwrap().trim(), "EXIT=0");
    let after = tmux.wait_for("the shell", Duration::from_secs(30), |s| s.contains("SHELL-IS-BACK"));
    // The alternate screen is gone: the dashboard's frame is no longer on screen.
    assert!(!after.contains("┌ workers"), "the dashboard is still on screen:\n{after}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_panic_still_restores_the_terminal() {
    let bin = env!("CARGO_BIN_EXE_volt-console");
    let dir = std::env::temp_dir().join(format!("volt-console-pty-panic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (exit_file, stty_file) = (dir.join("exit"), dir.join("stty"));
    let tmux = Tmux { socket: format!("volt-console-test-panic-{}", std::process::id()) };
    let script = format!(
        "{bin} --demo --panic-after-first-frame 2>{err}; echo \"EXIT=$?\" > {exit}; stty -a > {stty}; echo SHELL-IS-BACK; sleep 30",
        err = dir.join("stderr").display(),
        exit = exit_file.display(),
        stty = stty_file.display()
    );
    let out = tmux.cmd(&["new-session", "-d", "-s", "console", "-x", "150", "-y", "45", &script]);
    assert!(out.status.success());
    let after = tmux.wait_for("the shell", Duration::from_secs(30), |s| s.contains("SHELL-IS-BACK"));
    assert_ne!(std::fs::read_to_string(&exit_file).unwrap().trim(), "EXIT=0", "a panic is a failure exit");
    let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap();
    assert!(stderr.contains("panic-after-first-frame"), "the panic message is printed: {stderr}");
    // Raw mode is off again (canonical input and echo are back), and the alternate screen
    // is gone.
    let stty = std::fs::read_to_string(&stty_file).unwrap();
    assert!(stty.contains(" icanon") && !stty.contains("-icanon"), "{stty}");
    assert!(stty.contains(" echo ") && !stty.contains("-echo "), "{stty}");
    assert!(!after.contains("┌ workers"), "{after}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A recording of `n` updates from a real runtime with a 4-worker table.
fn make_recording(path: &std::path::Path, n: usize) {
    use volt_console::record::RecordWriter;
    let rt = volt::runtime::Builder::new()
        .worker_threads(4)
        .event_ring(1024)
        .console_bind("127.0.0.1:0")
        .console_publish_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let t = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    t.block_on(async {
        let mut c = volt_console::client::connect(&rt.console_addr().unwrap().to_string()).await.unwrap();
        let mut s = c.watch_updates(volt_console_proto::WatchRequest::default()).await.unwrap().into_inner();
        let mut w = RecordWriter::create(path).unwrap();
        for _ in 0..n {
            for _ in 0..100 {
                rt.spawn(async { volt::task::yield_now().await });
            }
            w.write(&s.message().await.unwrap().unwrap()).unwrap();
        }
    });
}

#[test]
fn replay_plays_pauses_steps_and_quits() {
    let bin = env!("CARGO_BIN_EXE_volt-console");
    let dir = std::env::temp_dir().join(format!("volt-console-pty-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("run.voltrec");
    make_recording(&rec, 40);
    let exit_file = dir.join("exit");
    let tmux = Tmux { socket: format!("volt-console-test-replay-{}", std::process::id()) };
    let script = format!("{bin} --replay {}; echo \"EXIT=$?\" > {}; sleep 30", rec.display(), exit_file.display());
    assert!(tmux.cmd(&["new-session", "-d", "-s", "console", "-x", "150", "-y", "45", &script]).status.success());
    // It plays: the position advances, and the recorded runtime's four workers show.
    let position = |s: &str| -> Option<usize> {
        let rest = s.split("▶ replay ").nth(1)?;
        rest.split('/').next()?.trim().parse().ok()
    };
    let s = tmux.wait_for("playback", Duration::from_secs(30), |s| position(s).is_some_and(|p| p >= 2));
    assert_eq!(worker_rows(&s).len(), 4, "{s}");
    // Space pauses: the position holds.
    tmux.cmd(&["send-keys", "-t", "console", "Space"]);
    let paused = tmux.wait_for("pause", Duration::from_secs(30), |s| s.contains("❚❚ replay"));
    let at = paused
        .split("❚❚ replay ")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .and_then(|p| p.trim().parse::<usize>().ok())
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let still = tmux.screen();
    assert!(still.contains(&format!("❚❚ replay {at}/40")), "moved while paused:\n{still}");
    // `.` steps one update.
    tmux.cmd(&["send-keys", "-t", "console", "."]);
    tmux.wait_for("one step", Duration::from_secs(30), |s| s.contains(&format!("❚❚ replay {}/40", at + 1)));
    tmux.cmd(&["send-keys", "-t", "console", "q"]);
    let start = Instant::now();
    while !exit_file.exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "no exit after q");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(std::fs::read_to_string(&exit_file).unwrap().trim(), "EXIT=0");
    std::fs::remove_dir_all(&dir).ok();
}

/// SIGTERM and SIGHUP restore the terminal as `q` does: out of the alternate screen, the
/// cursor shown, raw mode off, the shell's prompt back.
#[test]
fn sigterm_and_sighup_restore_the_terminal() {
    for (sig, name) in [(libc::SIGTERM, "term"), (libc::SIGHUP, "hup")] {
        let bin = env!("CARGO_BIN_EXE_volt-console");
        let dir = std::env::temp_dir().join(format!("volt-console-pty-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (pid_file, exit_file, stty_file) = (dir.join("pid"), dir.join("exit"), dir.join("stty"));
        let tmux = Tmux { socket: format!("volt-console-test-{name}-{}", std::process::id()) };
        let script = format!(
            "sh -c 'echo $$ > {pid}; exec {bin} --demo' 2>{err}; echo \"EXIT=$?\" > {exit}; stty -a > {stty}; \
             echo SHELL-IS-BACK; sleep 30",
            pid = pid_file.display(),
            err = dir.join("stderr").display(),
            exit = exit_file.display(),
            stty = stty_file.display()
        );
        let out = tmux.cmd(&["new-session", "-d", "-s", "console", "-x", "150", "-y", "45", &script]);
        assert!(out.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&out.stderr));
        tmux.wait_for("two worker rows", Duration::from_secs(20), |s| worker_rows(s).len() >= 2);
        let alt = tmux.cmd(&["display-message", "-p", "-t", "console", "#{alternate_on}"]);
        assert_eq!(String::from_utf8_lossy(&alt.stdout).trim(), "1", "the dashboard uses the alternate screen");
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        // SAFETY: `kill` with a pid this test started and a valid signal number.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0);
        let after = tmux.wait_for("the shell", Duration::from_secs(20), |s| s.contains("SHELL-IS-BACK"));
        let flags = tmux.cmd(&["display-message", "-p", "-t", "console", "#{alternate_on} #{cursor_flag}"]);
        assert_eq!(String::from_utf8_lossy(&flags.stdout).trim(), "0 1", "alternate screen off, cursor shown");
        assert!(!after.contains("┌ workers"), "the dashboard is still on screen:\n{after}");
        let stty = std::fs::read_to_string(&stty_file).unwrap();
        assert!(stty.contains(" icanon") && !stty.contains("-icanon"), "raw mode is still on: {stty}");
        assert_ne!(std::fs::read_to_string(&exit_file).unwrap().trim(), "EXIT=0", "a signal is a failure exit");
        let stderr = std::fs::read_to_string(dir.join("stderr")).unwrap();
        assert!(stderr.contains("stopped by SIG"), "{stderr}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

/// A terminal that goes away (its tmux server killed, as when a window or SSH session
/// closes) must end `volt-console`: crossterm's input read would otherwise spin forever
/// on the hung-up terminal, at a full core. The process exits; it is not left running.
#[test]
fn a_terminal_that_goes_away_ends_the_process() {
    let bin = env!("CARGO_BIN_EXE_volt-console");
    let tmux = Tmux { socket: format!("volt-console-test-hangup-{}", std::process::id()) };
    let pid_file = std::env::temp_dir().join(format!("volt-console-pty-hangup-{}", std::process::id()));
    // Port 1 on loopback refuses: the console keeps retrying, its screen up.
    let script = format!("echo $$ > {}; exec {bin} 127.0.0.1:1", pid_file.display());
    assert!(tmux.cmd(&["new-session", "-d", "-s", "console", "-x", "120", "-y", "40", &script]).status.success());
    tmux.wait_for("the console's screen", Duration::from_secs(30), |s| s.contains("127.0.0.1:1"));
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    std::fs::remove_file(&pid_file).ok();
    tmux.cmd(&["kill-server"]);
    let start = Instant::now();
    // SAFETY: `kill` with signal 0 only asks whether the process exists.
    while unsafe { libc::kill(pid, 0) } == 0 && !zombie(pid) {
        assert!(start.elapsed() < Duration::from_secs(30), "volt-console still runs after its terminal went away");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether `pid` has exited and waits only to be reaped.
fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')))
        .unwrap_or(true)
}

/// `volt-console --demo` in a 150x45 tmux session of its own, showing its workers.
fn demo_in_tmux(tag: &str) -> Tmux {
    let bin = env!("CARGO_BIN_EXE_volt-console");
    let tmux = Tmux { socket: format!("volt-console-test-{tag}-{}", std::process::id()) };
    let script = format!("{bin} --demo; sleep 30");
    let out = tmux.cmd(&["new-session", "-d", "-s", "console", "-x", "150", "-y", "45", &script]);
    assert!(out.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&out.stderr));
    tmux.wait_for("two worker rows", Duration::from_secs(30), |s| worker_rows(s).len() >= 2);
    tmux
}

/// The task list in a real terminal says what each idle task waits on: the demo's tasks
/// wait on sleeps, an accept and socket reads, and sorting by the longest wait (`l`)
/// keeps showing them.
#[test]
fn the_task_list_shows_what_each_task_waits_on() {
    let tmux = demo_in_tmux("wait");
    assert!(tmux.cmd(&["send-keys", "-t", "console", "t"]).status.success());
    let waits =
        |s: &str| s.contains("sleep until +") || s.contains("accept 127.0.0.1:") || s.contains("read 127.0.0.1:");
    let s = tmux.wait_for("the waiting-on column with a wait in it", Duration::from_secs(30), |s| {
        s.contains("waiting on") && waits(s)
    });
    assert!(s.contains("│id "), "the task table is shown:\n{s}");
    assert!(tmux.cmd(&["send-keys", "-t", "console", "l"]).status.success());
    let s = tmux.wait_for("the sort by longest wait", Duration::from_secs(30), |s| {
        s.contains("sorted by longest wait") && waits(s)
    });
    assert!(s.contains("waiting on"), "{s}");
    tmux.cmd(&["send-keys", "-t", "console", "q"]);
}

/// The demo's slow task stalls its worker: the header warns, and the stalls view (`s`)
/// shows the stack the monitor took while the poll was stuck, with the function that
/// held the worker (`slow_checksum`) in it.
#[test]
fn the_stalls_view_shows_the_demo_slow_task_and_its_stack() {
    let tmux = demo_in_tmux("stall");
    assert!(tmux.cmd(&["send-keys", "-t", "console", "s"]).status.success());
    tmux.wait_for("the stalls view", Duration::from_secs(30), |s| s.contains("stalls:"));
    // The demo starts a slow task every 5 s; each is one stall.
    let s = tmux.wait_for("a stall of the slow task with its stack", Duration::from_secs(90), |s| {
        s.contains("(slow-task)") && s.contains("slow_checksum")
    });
    assert!(s.contains("stack, innermost first"), "{s}");
    assert!(s.contains("stall: task"), "the header warns about the stall:\n{s}");
    tmux.cmd(&["send-keys", "-t", "console", "q"]);
}
