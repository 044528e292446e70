//! A fixed amount of scheduler work on a runtime of one worker, for an instruction counter
//! rather than a clock: callgrind counts the same instructions for the same binary every
//! run, whatever else the machine is doing, so a change of a few instructions per poll
//! shows. It prints nothing; the count is the result.
//!
//! ```text
//! cargo bench -p volt --bench per_op --no-run        # prints the executable's path
//! valgrind --tool=callgrind --toggle-collect='*run_worker*' EXE yield default
//! ```
//!
//! Workloads (first argument):
//! * `yield`: 100 tasks that yield 2,000 times each, 200,000 polls;
//! * `spawn`: one task that spawns 500 empty children and awaits each in turn, 200 times:
//!   100,200 tasks, each spawned, polled once and joined;
//! * `oneshot`: a task sends 100,000 requests, each with a `oneshot` sender for the
//!   answer, over an unbounded `mpsc` channel to a server task, and awaits each answer:
//!   the `sync` bench's `oneshot_round_trip` on one worker (200,000 polls, as many wakes);
//! * `remote`: the main thread, which is none of the workers, spawns 10,000 empty tasks
//!   and awaits each in turn, 20 times: 200,000 tasks. Half of a remote spawn's cost is
//!   on the spawning thread, so count it with `--toggle-collect=per_op::main` as well
//!   (callgrind adds up every function it names);
//!
//! Runtimes (second argument): `untimed` (`poll_time_histogram(false)`), `default`, or
//! `ring` (`event_ring(4096)`). The stall monitor is off in all three: its thread would
//! otherwise add a varying count. `--toggle-collect='*run_worker*'` counts only the
//! worker's loop (not the runtime's start or the main thread); divide by the polls or
//! tasks above for a per-operation figure. To count an older build, copy this file into
//! its tree (drop the `stall_threshold` line if that build predates it).

use std::sync::mpsc;

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let what = args.next().unwrap_or_else(|| "yield".into());
    let mode = args.next().unwrap_or_else(|| "default".into());
    let mut b = volt::runtime::Builder::new();
    b.worker_threads(1);
    b.stall_threshold(None);
    match mode.as_str() {
        "untimed" => {
            b.poll_time_histogram(false);
        }
        "ring" => {
            b.event_ring(4096);
        }
        // The ring with task statistics kept only while watched, and nothing watching.
        "unwatched" => {
            b.event_ring(4096).task_statistics(volt::runtime::TaskStatistics::WhileWatched);
        }
        "default" => {}
        other => panic!("unknown runtime {other:?}: untimed, default, ring or unwatched"),
    }
    let rt = b.build().expect("a runtime");
    let (tx, rx) = mpsc::sync_channel(100);
    match what.as_str() {
        "yield" => {
            for _ in 0..100 {
                let tx = tx.clone();
                rt.spawn(async move {
                    for _ in 0..2000 {
                        volt::task::yield_now().await;
                    }
                    tx.send(()).unwrap();
                });
            }
            for _ in 0..100 {
                rx.recv().unwrap();
            }
        }
        "spawn" => {
            rt.spawn(async move {
                for _ in 0..200 {
                    let handles: Vec<_> = (0..500u64).map(|i| volt::spawn(async move { i })).collect();
                    for (i, h) in handles.into_iter().enumerate() {
                        assert_eq!(h.await.unwrap(), i as u64);
                    }
                }
                tx.send(()).unwrap();
            });
            rx.recv().unwrap();
        }
        "remote" => {
            // From this thread, none of the runtime's: each spawn goes through the global
            // queue, and with the ring on, records from outside the workers.
            for _ in 0..20 {
                let handles: Vec<_> = (0..10_000u64).map(|i| rt.spawn(async move { i })).collect();
                for (i, h) in handles.into_iter().enumerate() {
                    assert_eq!(rt.block_on(h).unwrap(), i as u64);
                }
            }
        }
        "oneshot" => {
            rt.spawn(async move {
                let (req_tx, mut req_rx) = volt::sync::mpsc::unbounded_channel::<volt::sync::oneshot::Sender<u64>>();
                let server = volt::spawn(async move {
                    let mut n = 0u64;
                    while let Some(reply) = req_rx.recv().await {
                        n += 1;
                        let _ = reply.send(n);
                    }
                });
                for i in 1..=100_000u64 {
                    let (reply_tx, reply_rx) = volt::sync::oneshot::channel();
                    req_tx.send(reply_tx).unwrap();
                    assert_eq!(reply_rx.await.unwrap(), i);
                }
                drop(req_tx);
                server.await.unwrap();
                tx.send(()).unwrap();
            });
            rx.recv().unwrap();
        }
        other => panic!("unknown workload {other:?}: yield, spawn, remote or oneshot"),
    }
}
