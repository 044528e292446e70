//! `volt-kv` as a person runs it: a process started with `--port`, watched through its
//! console (on because the package enables Volt's `console` feature, with no change to
//! the source), and stopped with Ctrl-C (SIGINT), after which it closes its connections
//! and exits 0.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn the_server_is_watched_by_the_console_and_stops_on_ctrl_c() {
    let (port, console_port) = (free_port(), free_port());
    let mut child = Command::new(env!("CARGO_BIN_EXE_volt-kv"))
        .args(["--port", &port.to_string()])
        .env("VOLT_CONSOLE_BIND", format!("127.0.0.1:{console_port}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with("listening on 127.0.0.1:"), "{line:?}");

    // A subscriber: its connection task then waits on its socket and its deliveries.
    let mut sub = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sub.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    sub.write_all(b"*2\r\n$9\r\nSUBSCRIBE\r\n$4\r\nnews\r\n").unwrap();
    let mut reply = [0u8; 33];
    sub.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n");

    // The console lists the connection's task, idle and named: a `select!` over its
    // socket, its subscription's deliveries and the shutdown signal.
    let console = format!("127.0.0.1:{console_port}");
    let deadline = Instant::now() + Duration::from_secs(20);
    let waits = loop {
        let mut waits = Vec::new();
        let got = volt_console_client::watch::fetch_once(
            &console,
            None,
            10_000,
            volt_console_proto::TaskSort::Id,
            |_, tasks| {
                waits.extend(tasks.into_iter().flat_map(|t| t.waits).map(|w| w.description));
                Ok(())
            },
        );
        if got.is_ok() && waits.iter().any(|w| w.starts_with("read 127.0.0.1:")) {
            break waits;
        }
        assert!(Instant::now() < deadline, "the console never showed the connection's read: {got:?} {waits:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    for wait in ["recv mpsc", "changed watch", "recv broadcast", "notified"] {
        assert!(waits.iter().any(|w| w.starts_with(wait)), "no {wait:?} among {waits:?}");
    }

    // Ctrl-C: the connection is closed and the process exits cleanly.
    // SAFETY: `kill` with a valid pid and signal number has no memory effects here.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let mut rest = Vec::new();
    assert_eq!(sub.read_to_end(&mut rest).unwrap(), 0, "closed at shutdown: {rest:?}");
    let mut printed = String::new();
    out.read_to_string(&mut printed).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{status:?}: {err}");
    assert!(printed.contains("Ctrl-C: closing connections") && printed.contains("stopped"), "{printed:?}");
}
