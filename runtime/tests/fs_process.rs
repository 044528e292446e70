#![cfg(all(feature = "fs", feature = "process", feature = "io-util"))]
//! `volt::fs`, `volt::process` and the standard streams, as a Tokio application uses
//! them: round trips through the file system, children with piped stdio, exit codes,
//! `kill_on_drop`, many children at once, and the waits the console names. Bounds are
//! generous (10 s for "it happens"); nothing here asserts how fast anything is.

use std::collections::BTreeSet;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use volt::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt, SeekFrom};
use volt::telemetry::{TaskInfo, WaitReason};

fn runtime() -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap()
}

/// A fresh directory under the system's temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("volt-fsp-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Poll `pred` until it holds, for at most 10 s.
fn eventually(what: &str, mut pred: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pred() {
        assert!(Instant::now() < deadline, "not within 10 s: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn label_of(t: &TaskInfo) -> Option<String> {
    t.waits.iter().find_map(|w| match w {
        WaitReason::Label(l) => Some(l.to_string()),
        _ => None,
    })
}

fn pid_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

#[test]
fn write_then_read_back_and_the_path_functions() {
    let dir = TempDir::new("roundtrip");
    let d = dir.path().to_owned();
    runtime().block_on(async move {
        let a = d.join("a.txt");
        volt::fs::write(&a, b"hello volt").await.unwrap();
        assert_eq!(volt::fs::read(&a).await.unwrap(), b"hello volt");
        assert_eq!(volt::fs::read_to_string(&a).await.unwrap(), "hello volt");
        assert_eq!(volt::fs::metadata(&a).await.unwrap().len(), 10);
        assert!(volt::fs::metadata(&a).await.unwrap().is_file());
        assert!(volt::fs::try_exists(&a).await.unwrap());

        // rename: the old name is gone, the new one holds the bytes.
        let b = d.join("b.txt");
        volt::fs::rename(&a, &b).await.unwrap();
        assert!(!volt::fs::try_exists(&a).await.unwrap());
        assert_eq!(volt::fs::read(&b).await.unwrap(), b"hello volt");

        // copy, hard_link, symlink, read_link, canonicalize, symlink_metadata.
        let c = d.join("c.txt");
        assert_eq!(volt::fs::copy(&b, &c).await.unwrap(), 10);
        volt::fs::hard_link(&b, d.join("h.txt")).await.unwrap();
        volt::fs::symlink(&b, d.join("s.txt")).await.unwrap();
        assert_eq!(volt::fs::read_link(d.join("s.txt")).await.unwrap(), b);
        assert!(volt::fs::symlink_metadata(d.join("s.txt")).await.unwrap().file_type().is_symlink());
        assert_eq!(volt::fs::canonicalize(d.join("s.txt")).await.unwrap(), std::fs::canonicalize(&b).unwrap());

        // Permissions.
        let mut perm = volt::fs::metadata(&c).await.unwrap().permissions();
        perm.set_readonly(true);
        volt::fs::set_permissions(&c, perm).await.unwrap();
        assert!(volt::fs::metadata(&c).await.unwrap().permissions().readonly());

        // Directories.
        volt::fs::create_dir_all(d.join("x/y/z")).await.unwrap();
        assert!(volt::fs::metadata(d.join("x/y/z")).await.unwrap().is_dir());
        volt::fs::create_dir(d.join("e")).await.unwrap();
        assert_eq!(volt::fs::create_dir(d.join("e")).await.unwrap_err().kind(), ErrorKind::AlreadyExists);
        volt::fs::remove_dir(d.join("e")).await.unwrap();
        volt::fs::remove_dir_all(d.join("x")).await.unwrap();
        assert!(!volt::fs::try_exists(d.join("x")).await.unwrap());
        volt::fs::remove_file(&b).await.unwrap();
        assert!(!volt::fs::try_exists(&b).await.unwrap());
        // The hard link still holds the data.
        assert_eq!(volt::fs::read(d.join("h.txt")).await.unwrap(), b"hello volt");
    });
}

#[test]
fn a_missing_file_is_not_found() {
    let dir = TempDir::new("missing");
    let d = dir.path().to_owned();
    runtime().block_on(async move {
        let m = d.join("nope");
        assert_eq!(volt::fs::read(&m).await.unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(volt::fs::metadata(&m).await.unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(volt::fs::File::open(&m).await.unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(volt::fs::remove_file(&m).await.unwrap_err().kind(), ErrorKind::NotFound);
        assert_eq!(volt::fs::read_dir(&m).await.unwrap_err().kind(), ErrorKind::NotFound);
        assert!(!volt::fs::try_exists(&m).await.unwrap());
    });
}

#[test]
fn default_open_options_open_nothing_until_told_how() {
    let dir = TempDir::new("defaults");
    let p = dir.path().join("f");
    std::fs::write(&p, b"abc").unwrap();
    runtime().block_on(async move {
        // As `OpenOptions::new()`: every option off, which the system refuses.
        let e = volt::fs::OpenOptions::default().open(&p).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        let mut f = volt::fs::OpenOptions::default().read(true).clone().open(&p).await.unwrap();
        let mut s = String::new();
        f.read_to_string(&mut s).await.unwrap();
        assert_eq!(s, "abc");
    });
}

#[test]
fn read_dir_lists_exactly_the_files_created() {
    let dir = TempDir::new("readdir");
    let d = dir.path().to_owned();
    runtime().block_on(async move {
        // More than one batch of entries.
        let mut made = BTreeSet::new();
        for i in 0..75 {
            let name = format!("f{i:03}");
            volt::fs::write(d.join(&name), i.to_string()).await.unwrap();
            made.insert(name);
        }
        volt::fs::create_dir(d.join("sub")).await.unwrap();
        made.insert("sub".to_string());

        let mut rd = volt::fs::read_dir(&d).await.unwrap();
        let mut seen = BTreeSet::new();
        let mut dirs = 0;
        while let Some(e) = rd.next_entry().await.unwrap() {
            assert_eq!(e.path(), d.join(e.file_name()));
            let ft = e.file_type().await.unwrap();
            assert_eq!(ft.is_dir(), e.metadata().await.unwrap().is_dir());
            dirs += ft.is_dir() as usize;
            assert!(seen.insert(e.file_name().into_string().unwrap()), "listed twice");
        }
        assert_eq!(seen, made);
        assert_eq!(dirs, 1);
        // After the end, it stays at the end.
        assert!(rd.next_entry().await.unwrap().is_none());
    });
}

#[test]
fn file_write_flush_seek_read() {
    let dir = TempDir::new("file");
    let p = dir.path().join("f.bin");
    runtime().block_on(async move {
        let mut f = volt::fs::File::create(&p).await.unwrap();
        f.write_all(b"0123456789").await.unwrap();
        f.write_all(b"abcdef").await.unwrap();
        f.flush().await.unwrap();
        // After flush, the data is in the file for anyone to read.
        assert_eq!(std::fs::read(&p).unwrap(), b"0123456789abcdef");
        drop(f);

        let mut f = volt::fs::OpenOptions::new().read(true).write(true).open(&p).await.unwrap();
        let mut four = [0u8; 4];
        f.read_exact(&mut four).await.unwrap();
        assert_eq!(&four, b"0123");
        // The read fetched ahead; the position is still where the caller stopped.
        assert_eq!(f.stream_position().await.unwrap(), 4);
        // A write after a read goes where the read stopped.
        f.write_all(b"XY").await.unwrap();
        f.flush().await.unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"0123XY6789abcdef");

        assert_eq!(f.seek(SeekFrom::Start(10)).await.unwrap(), 10);
        let mut rest = String::new();
        f.read_to_string(&mut rest).await.unwrap();
        assert_eq!(rest, "abcdef");
        assert_eq!(f.seek(SeekFrom::End(-3)).await.unwrap(), 13);
        f.read_exact(&mut four[..3]).await.unwrap();
        assert_eq!(&four[..3], b"def");

        // set_len, sync_all and metadata after writes in flight.
        f.write_all(b"tail").await.unwrap();
        f.sync_all().await.unwrap();
        assert_eq!(f.metadata().await.unwrap().len(), 20);
        f.set_len(5).await.unwrap();
        f.sync_data().await.unwrap();
        assert_eq!(f.metadata().await.unwrap().len(), 5);
        let std = f.into_std().await;
        assert_eq!(std.metadata().unwrap().len(), 5);

        // from_std / try_into_std.
        let f = volt::fs::File::from_std(std);
        let std = f.try_into_std().expect("nothing in flight");
        assert_eq!(std.metadata().unwrap().len(), 5);

        // A large write (more than one buffer) arrives whole.
        let big: Vec<u8> = (0..5 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        let mut f = volt::fs::File::create(&p).await.unwrap();
        f.write_all(&big).await.unwrap();
        f.flush().await.unwrap();
        drop(f);
        assert!(volt::fs::read(&p).await.unwrap() == big);
    });
}

/// `set_times` and `set_modified` (Tokio's), after a write still in flight: the write
/// lands first, so the times set are the ones that stay. A clone keeps its buffer size.
#[test]
fn set_times_waits_for_writes_and_clones_keep_their_buffer_size() {
    use std::time::{Duration, SystemTime};
    let dir = TempDir::new("times");
    let p = dir.path().join("t.txt");
    runtime().block_on(async move {
        let mut f = volt::fs::File::create(&p).await.unwrap();
        let (accessed, modified) = (
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
            SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000),
        );
        // Queued on the pool, not yet written when `set_times` is called.
        f.write_all(&vec![7u8; 256 * 1024]).await.unwrap();
        f.set_times(volt::fs::FileTimes::new().set_accessed(accessed).set_modified(modified)).await.unwrap();
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!(m.len(), 256 * 1024, "the write in flight landed first");
        assert_eq!((m.accessed().unwrap(), m.modified().unwrap()), (accessed, modified));

        let later = modified + Duration::from_secs(5);
        f.set_modified(later).await.unwrap();
        let m = std::fs::metadata(&p).unwrap();
        assert_eq!((m.accessed().unwrap(), m.modified().unwrap()), (accessed, later), "only the mtime moved");

        f.set_max_buf_size(128);
        assert_eq!(f.try_clone().await.unwrap().max_buf_size(), 128);
    });
}

/// A read of a FIFO nobody writes blocks on the pool, and the task waiting for it is
/// named `fs read <path>` in the task list.
#[test]
fn a_blocked_fs_read_is_named_with_its_path() {
    // A path long enough that the label is cut (marked `…`).
    let dir = TempDir::new("fifo-with-a-name-long-enough-to-be-cut");
    let fifo = dir.path().join("p");
    let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid C string path and a mode.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);

    let rt = runtime();
    let f2 = fifo.clone();
    let h =
        volt::task::Builder::new().name("fifo-reader").spawn_on(async move { volt::fs::read(&f2).await }, rt.handle());
    // The record keeps 40 bytes of label text and marks a cut with `…`.
    let full = format!("fs read {}", fifo.display());
    let mut cut = 40;
    while !full.is_char_boundary(cut.min(full.len())) {
        cut -= 1;
    }
    assert!(full.len() > 40, "{full}");
    let want = format!("{}…", &full[..cut]);
    let mut last = None;
    eventually("the reader's wait is named", || {
        let tasks = rt.handle().telemetry().tasks();
        let t = tasks.iter().find(|t| t.name.as_deref() == Some("fifo-reader"));
        last = t.map(|t| (t.waiting_on.clone(), t.waits.clone()));
        t.and_then(label_of).as_deref() == Some(want.as_str())
    });
    let (first, _) = last.unwrap();
    assert!(matches!(first, Some(WaitReason::Label(_))), "the label comes first: {first:?}");

    // Unblock the reader: a writer opens the FIFO, writes and closes it.
    std::fs::write(&fifo, b"through the fifo").unwrap();
    let got = rt.block_on(h).unwrap().unwrap();
    assert_eq!(got, b"through the fifo");
}

#[test]
fn piped_stdin_to_stdout_round_trip() {
    runtime().block_on(async {
        let mut child =
            volt::process::Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        // Write and read at once: more than a pipe's buffer each way.
        let data: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        let expect = data.clone();
        let writer = volt::spawn(async move {
            stdin.write_all(&data).await.unwrap();
            drop(stdin);
        });
        let mut got = Vec::new();
        stdout.read_to_end(&mut got).await.unwrap();
        writer.await.unwrap();
        assert!(got == expect, "cat gave back {} of {} bytes", got.len(), expect.len());
        assert!(child.wait().await.unwrap().success());
        assert_eq!(child.id(), None, "no pid once the status is collected");

        // A vectored write reaches the child whole.
        let mut child =
            volt::process::Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut n = 0;
        while n < 9 {
            let parts = [std::io::IoSlice::new(b"abc"), std::io::IoSlice::new(b"def"), std::io::IoSlice::new(b"ghi")];
            let mut rest: Vec<std::io::IoSlice<'_>> = Vec::new();
            let mut skip = n;
            for p in &parts {
                if skip >= p.len() {
                    skip -= p.len();
                } else {
                    rest.push(std::io::IoSlice::new(&p[skip..]));
                    skip = 0;
                }
            }
            n += stdin.write_vectored(&rest).await.unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().await.unwrap();
        assert_eq!(out.stdout, b"abcdefghi");

        let out = volt::process::Command::new("echo").arg("hello").arg("volt").output().await.unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout, b"hello volt\n");
        assert!(out.stderr.is_empty());

        let out = volt::process::Command::new("sh")
            .args(["-c", "echo $VOLT_X; echo err >&2; pwd"])
            .env("VOLT_X", "from env")
            .current_dir("/")
            .output()
            .await
            .unwrap();
        assert_eq!(out.stdout, b"from env\n/\n");
        assert_eq!(out.stderr, b"err\n");
        let out = volt::process::Command::new("sh")
            .args(["-c", "echo ${VOLT_X:-unset}"])
            .env("VOLT_X", "x")
            .env_remove("VOLT_X")
            .output()
            .await
            .unwrap();
        assert_eq!(out.stdout, b"unset\n");
    });
}

#[test]
fn status_gives_the_exit_code() {
    runtime().block_on(async {
        let ok = volt::process::Command::new("true").status().await.unwrap();
        assert!(ok.success());
        assert_eq!(ok.code(), Some(0));
        let s = volt::process::Command::new("sh").args(["-c", "exit 7"]).status().await.unwrap();
        assert!(!s.success());
        assert_eq!(s.code(), Some(7));
        let missing = volt::process::Command::new("/no/such/program-volt").status().await.unwrap_err();
        assert_eq!(missing.kind(), ErrorKind::NotFound);

        // try_wait, start_kill, kill.
        let mut c = volt::process::Command::new("sleep").arg("30").spawn().unwrap();
        assert!(c.try_wait().unwrap().is_none());
        c.kill().await.unwrap();
        assert!(!c.wait().await.unwrap().success());
        // Once the exit is collected, a kill sends nothing and is no error (Tokio's).
        c.start_kill().unwrap();
        c.kill().await.unwrap();
    });
}

#[test]
fn kill_on_drop_kills_and_reaps_the_child() {
    let rt = runtime();
    let pid = rt.block_on(async {
        let child = volt::process::Command::new("sleep").arg("30").kill_on_drop(true).spawn().unwrap();
        let pid = child.id().unwrap();
        assert!(pid_alive(pid));
        drop(child);
        pid
    });
    // Killed and reaped in the background: the pid no longer names a process (not
    // even a zombie).
    eventually("the killed child is gone", || !pid_alive(pid));

    // Without kill_on_drop, a dropped child runs to its end and is reaped.
    let pid = rt.block_on(async {
        let child = volt::process::Command::new("sh").args(["-c", "sleep 0.2"]).spawn().unwrap();
        child.id().unwrap()
    });
    eventually("the dropped child is reaped after its exit", || !pid_alive(pid));
}

#[test]
fn many_concurrent_children_are_each_reaped() {
    let rt = runtime();
    let codes = rt.block_on(async {
        let handles: Vec<_> = (0..64)
            .map(|i| {
                volt::spawn(async move {
                    let out = volt::process::Command::new("sh")
                        .args(["-c", &format!("echo {i}; exit {}", i % 5)])
                        .output()
                        .await
                        .unwrap();
                    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), i.to_string());
                    out.status.code().unwrap()
                })
            })
            .collect();
        let mut codes = Vec::new();
        for h in handles {
            codes.push(h.await.unwrap());
        }
        codes
    });
    assert_eq!(codes, (0..64).map(|i| i % 5).collect::<Vec<_>>());
}

#[test]
fn output_larger_than_a_pipe_buffer_does_not_deadlock() {
    runtime().block_on(async {
        // 1 MiB on stdout and 256 KiB on stderr, far past a pipe's 64 KiB: the child
        // blocks unless both are read while it runs.
        let out = volt::time::timeout(
            Duration::from_secs(30),
            volt::process::Command::new("sh")
                .args(["-c", "head -c 1048576 /dev/zero; head -c 262144 /dev/zero >&2"])
                .output(),
        )
        .await
        .expect("no deadlock")
        .unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout.len(), 1 << 20);
        assert_eq!(out.stderr.len(), 1 << 18);
    });
}

/// A task reading a child's silent stdout is named `read pipe`; one waiting for the
/// child is named `wait process <pid>`.
#[test]
fn process_waits_are_named() {
    let rt = runtime();
    let mut child = rt
        .block_on(async {
            volt::process::Command::new("sleep").arg("30").stdout(Stdio::piped()).kill_on_drop(true).spawn()
        })
        .unwrap();
    let pid = child.id().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = volt::task::Builder::new()
        .name("pipe-reader")
        .spawn_on(async move { stdout.read(&mut [0u8; 16]).await.map(|_| ()) }, rt.handle());
    let waiter = volt::task::Builder::new().name("waiter").spawn_on(
        async move {
            let s = child.wait().await;
            (child, s)
        },
        rt.handle(),
    );
    let want = format!("wait process {pid}");
    eventually("both waits named", || {
        let tasks = rt.handle().telemetry().tasks();
        let by = |n: &str| tasks.iter().find(|t| t.name.as_deref() == Some(n)).and_then(label_of);
        by("pipe-reader").as_deref() == Some("read pipe") && by("waiter").as_deref() == Some(want.as_str())
    });
    let tasks = rt.handle().telemetry().tasks();
    for n in ["pipe-reader", "waiter"] {
        let t = tasks.iter().find(|t| t.name.as_deref() == Some(n)).unwrap();
        assert!(matches!(t.waiting_on, Some(WaitReason::Label(_))), "the label comes first: {:?}", t.waits);
    }
    // SAFETY: sending SIGKILL to our own child.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    let (_child, status) = rt.block_on(waiter).unwrap();
    assert!(!status.unwrap().success());
    // The killed child's stdout closes: the reader sees end of file.
    rt.block_on(reader).unwrap().unwrap();
}

#[test]
fn stdout_and_stderr_write_through() {
    runtime().block_on(async {
        let mut out = volt::io::stdout();
        out.write_all(b"volt stdout test line\n").await.unwrap();
        out.flush().await.unwrap();
        let mut err = volt::io::stderr();
        err.write_all(b"volt stderr test line\n").await.unwrap();
        err.flush().await.unwrap();
    });
}

#[test]
fn vectored_writes_clones_dir_builder_and_small_buffers() {
    let dir = TempDir::new("more");
    let d = dir.path().to_owned();
    runtime().block_on(async move {
        let p = d.join("v");
        let mut f = volt::fs::File::create(&p).await.unwrap();
        let n = f.write_vectored(&[std::io::IoSlice::new(b"hello "), std::io::IoSlice::new(b"world")]).await.unwrap();
        assert_eq!(n, 11, "both slices are taken at once");
        // A clone shares the open file: its write lands after the first.
        let mut clone = f.try_clone().await.unwrap();
        clone.write_all(b"!").await.unwrap();
        clone.shutdown().await.unwrap();
        f.shutdown().await.unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"hello world!");

        // set_max_buf_size bounds one operation.
        let mut f = volt::fs::File::open(&p).await.unwrap();
        f.set_max_buf_size(1);
        let mut buf = [0u8; 64];
        assert_eq!(f.read(&mut buf).await.unwrap(), 1);
        let mut w = volt::fs::OpenOptions::new().append(true).open(&p).await.unwrap();
        w.set_max_buf_size(1);
        assert_eq!(w.write(b"abc").await.unwrap(), 1);
        w.flush().await.unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"hello world!a");

        // An empty read answers at once, and is not end of file.
        let mut f = volt::fs::File::open(&p).await.unwrap();
        assert_eq!(f.read(&mut []).await.unwrap(), 0);
        assert_eq!(f.read(&mut buf).await.unwrap(), 13);

        // create_new refuses an existing file.
        assert_eq!(volt::fs::File::create_new(&p).await.unwrap_err().kind(), ErrorKind::AlreadyExists);

        volt::fs::DirBuilder::new().recursive(true).create(d.join("p/q/r")).await.unwrap();
        assert!(volt::fs::metadata(d.join("p/q/r")).await.unwrap().is_dir());
        assert_eq!(volt::fs::DirBuilder::new().create(d.join("s/t")).await.unwrap_err().kind(), ErrorKind::NotFound);
    });
}

/// Tokio's `process_change_of_runtime`: a child spawned in one runtime is waited for in
/// another, after the first has gone.
#[test]
fn a_child_is_waited_for_in_another_runtime() {
    let mut child = runtime().block_on(async {
        // Still running when its runtime goes: the wait cannot just find it exited.
        volt::process::Command::new("sh")
            .args(["-c", "sleep 0.3"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
    });
    let status = runtime().block_on(async { child.wait().await.unwrap() });
    assert!(status.success());
}

/// Outside a runtime, `spawn` says so, as an error.
#[test]
fn spawn_outside_a_runtime_is_an_error() {
    let err = volt::process::Command::new("true").spawn().unwrap_err();
    assert!(err.to_string().contains("inside a Volt runtime"), "{err}");
}

/// Tokio's `process_issue_2174`: a writer blocked on a full stdin pipe fails (rather
/// than hanging) once the child is killed.
#[test]
fn a_writer_blocked_on_a_full_pipe_fails_when_the_child_dies() {
    runtime().block_on(async {
        let mut child =
            volt::process::Command::new("sleep").arg("30").stdin(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
        let mut input = child.stdin.take().unwrap();
        let writer = volt::spawn(async move {
            let data = [0u8; 8192];
            loop {
                input.write_all(&data).await?;
            }
            #[allow(unreachable_code)]
            Ok::<(), std::io::Error>(())
        });
        volt::time::sleep(Duration::from_millis(300)).await;
        child.kill().await.unwrap();
        let r = volt::time::timeout(Duration::from_secs(10), writer).await.expect("the writer ends").unwrap();
        assert_eq!(r.unwrap_err().kind(), ErrorKind::BrokenPipe);
    });
}

/// One child's stdout piped into another's stdin (`TryInto<Stdio>`).
#[test]
fn a_child_pipe_feeds_another_child() {
    runtime().block_on(async {
        let mut first = volt::process::Command::new("echo").arg("chained").stdout(Stdio::piped()).spawn().unwrap();
        let pipe: Stdio = first.stdout.take().unwrap().try_into().unwrap();
        let out = volt::process::Command::new("cat").stdin(pipe).output().await.unwrap();
        assert_eq!(out.stdout, b"chained\n");
        assert!(first.wait().await.unwrap().success());
    });
}

/// Several tasks in `&self` methods wait for the same write in flight: each is woken
/// (a job's handle keeps one waker), none hangs.
#[test]
fn concurrent_syncs_on_a_shared_file_all_finish() {
    let dir = TempDir::new("shared");
    let p = dir.path().join("f");
    let rt = runtime();
    rt.block_on(async move {
        for round in 0..20 {
            let mut f = volt::fs::File::create(&p).await.unwrap();
            // A write in flight that the syncs below must wait for.
            f.write_all(&vec![round as u8; 256 * 1024]).await.unwrap();
            let f = std::sync::Arc::new(f);
            let tasks: Vec<_> = (0..4)
                .map(|i| {
                    let f = std::sync::Arc::clone(&f);
                    volt::spawn(async move {
                        match i % 3 {
                            0 => f.sync_all().await,
                            1 => f.sync_data().await,
                            _ => f.set_len(256 * 1024).await,
                        }
                    })
                })
                .collect();
            for t in tasks {
                volt::time::timeout(Duration::from_secs(10), t).await.expect("no hang").unwrap().unwrap();
            }
            assert_eq!(f.metadata().await.unwrap().len(), 256 * 1024);
        }
    });
}

/// Outside a runtime, fs calls fail with an error that says why (no panic).
#[test]
fn fs_outside_a_runtime_is_an_error() {
    let err = futures::executor::block_on(volt::fs::read("/etc/hostname")).unwrap_err();
    assert!(err.to_string().contains("inside a Volt runtime"), "{err}");
    let mut f = volt::fs::File::from_std(std::fs::File::open("/dev/null").unwrap());
    let err = futures::executor::block_on(f.read(&mut [0u8; 8])).unwrap_err();
    assert!(err.to_string().contains("inside a Volt runtime"), "{err}");
}

/// Tokio's `process_kill_on_drop`: only the child is killed; a grandchild holding the
/// stdout pipe still writes to it, and the pipe outlives the dropped `Child`. (The
/// shell's own `sleep 3` holds the pipe too, so the read ends when that ends; the killed
/// shell never writes its last line.)
#[test]
fn kill_on_drop_kills_only_the_child_and_its_pipe_lives_on() {
    runtime().block_on(async {
        let mut child = volt::process::Command::new("sh")
            .args(["-c", "sh -c 'sleep 1; echo child ran' & sleep 3; echo hello from beyond the grave"])
            .kill_on_drop(true)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        volt::time::sleep(Duration::from_millis(300)).await;
        let mut out = child.stdout.take().unwrap();
        drop(child);
        let mut msg = String::new();
        volt::time::timeout(Duration::from_secs(10), out.read_to_string(&mut msg)).await.expect("no hang").unwrap();
        assert_eq!(msg, "child ran\n");
    });
}

/// Tokio's `process_smoke` and `process_arg0`: `wait` is fused, `id` is gone after it,
/// and `arg0` names the program to itself.
#[test]
fn wait_is_fused_and_arg0_is_passed() {
    runtime().block_on(async {
        let mut child = volt::process::Command::new("sh").args(["-c", "exit 2"]).spawn().unwrap();
        assert!(child.id().unwrap() > 0);
        assert_eq!(child.wait().await.unwrap().code(), Some(2));
        assert_eq!(child.wait().await.unwrap().code(), Some(2));
        assert_eq!(child.try_wait().unwrap().and_then(|s| s.code()), Some(2));
        assert_eq!(child.id(), None);

        let out = volt::process::Command::new("sh").arg0("test_string").args(["-c", "echo $0"]).output().await.unwrap();
        assert_eq!(out.stdout, b"test_string\n");
    });
}
