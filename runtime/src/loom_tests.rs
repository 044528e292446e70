//! The loom harness, and where the models are. Run them with
//! `RUSTFLAGS="--cfg loom" cargo test -p volt --lib --release loom`.
//!
//! Each model runs the crate's real code with loom's atomics and explores every
//! interleaving of the threads it spawns. The models sit beside the code they check:
//! `scheduler/{queue,lifo,park,idle,exits,join}_loom.rs`, `task/state_loom.rs`,
//! `task/cellcache.rs`, `telemetry/events/ring.rs`, `telemetry/tasks.rs` and
//! `telemetry/stall/{slot,record}.rs`. Under loom
//! the local queue has 4 slots (overflow moves 2).

use std::sync::atomic::Ordering::SeqCst;

/// `loom::model`, plus a check that loom explored more than one execution: a model whose
/// threads never interleave on shared state checks nothing, and would still pass.
pub(crate) fn model(f: impl Fn() + Sync + Send + 'static) {
    check_model(None, f)
}

/// `model` with at most `bound` preemptions per execution, for a model too large to
/// explore whole in CI's time.
pub(crate) fn model_bounded(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    check_model(Some(bound), f)
}

fn check_model(preemption_bound: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = executions.clone();
    let mut b = loom::model::Builder::new();
    if preemption_bound.is_some() {
        b.preemption_bound = preemption_bound;
    }
    b.check(move || {
        counter.fetch_add(1, SeqCst);
        f();
    });
    let n = executions.load(SeqCst);
    assert!(n > 1, "loom explored only {n} execution(s)");
}

/// Fail unless `got` holds each of `want` exactly once: nothing lost, nothing run twice.
pub(crate) fn assert_each_once(mut got: Vec<u64>, mut want: Vec<u64>) {
    got.sort();
    want.sort();
    assert_eq!(got, want, "a task was lost or duplicated");
}
