//! What the example tests share: finding and starting an example's binary.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A generous bound on any wait: far past what a loaded 2-core machine needs.
pub const BOUND: Duration = Duration::from_secs(60);

/// The path of example `name`, built with the profile of this test (`cargo test` builds
/// the examples before it runs tests; a lone `cargo test --test X` may not, so build it
/// then).
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    // target/<profile>/deps/<test> -> target/<profile>/examples/<name>
    let profile_dir = exe.parent().and_then(|d| d.parent()).expect("target/<profile>");
    let path = profile_dir.join("examples").join(name);
    if !path.exists() {
        let release = profile_dir.file_name().is_some_and(|p| p == "release");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-p", "volt-examples", "--example", name]);
        if release {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("cargo builds the example");
        assert!(status.success(), "building example {name} failed");
    }
    path
}

/// A running example; killed when dropped.
pub struct Running {
    pub child: Child,
    pub lines: std::sync::mpsc::Receiver<String>,
}

impl Running {
    /// Start example `name` with `args`; its console and metrics bind free ports.
    pub fn start(name: &str, args: &[&str]) -> Running {
        let mut child = Command::new(example(name))
            .args(args)
            .env("VOLT_CONSOLE_BIND", "127.0.0.1:0")
            .env("VOLT_METRICS_BIND", "127.0.0.1:0")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the example starts");
        let out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Running { child, lines }
    }

    /// The first line printed that contains `needle` (bounded wait).
    pub fn line_with(&self, needle: &str) -> String {
        let deadline = Instant::now() + BOUND;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return l,
                Ok(_) => {}
                Err(e) => panic!("no line with {needle:?} from the example: {e}"),
            }
        }
    }

    /// Send SIGINT (what Ctrl-C sends).
    pub fn interrupt(&self) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid");
        // SAFETY: `kill` only sends a signal; `pid` is our own child, not yet reaped (the
        // `Child` still owns it), so the number cannot have been reused by another process.
        let rc = unsafe { libc::kill(pid, libc::SIGINT) };
        assert_eq!(rc, 0, "SIGINT sent: {}", std::io::Error::last_os_error());
    }

    /// Wait (bounded) for the process to exit; its exit status.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + BOUND;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "the example did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `curl -s -m 30 ARGS`: (success, stdout).
pub fn curl(args: &[&str]) -> (bool, String) {
    let out = Command::new("curl")
        .args(["-s", "-m", "30"])
        .args(args)
        .output()
        .expect("curl runs (install it: apt-get install curl; .ci/run does when it is missing)");
    (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned())
}
