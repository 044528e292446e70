//! The `tracing` feature: scheduler events under `volt::scheduler`, task spans and events
//! under `volt::task`, selectable with `EnvFilter`. (`cargo test --workspace` builds it,
//! because the examples package turns the feature on.)
#![cfg(feature = "tracing")]

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

#[derive(Clone, Default)]
struct Seen(Arc<Mutex<HashMap<(String, String), usize>>>);

impl<S: tracing::Subscriber> Layer<S> for Seen {
    fn on_event(&self, e: &tracing::Event<'_>, _cx: Context<'_, S>) {
        struct Message(String);
        impl tracing::field::Visit for Message {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                if f.name() == "message" {
                    self.0 = format!("{v:?}");
                }
            }
        }
        let mut msg = Message(String::new());
        e.record(&mut msg);
        *self.0.lock().unwrap().entry((e.metadata().target().to_string(), msg.0)).or_default() += 1;
    }
    fn on_new_span(&self, a: &tracing::span::Attributes<'_>, _id: &tracing::span::Id, _cx: Context<'_, S>) {
        let m = a.metadata();
        *self.0.lock().unwrap().entry((m.target().to_string(), format!("span {}", m.name()))).or_default() += 1;
    }
}

#[test]
fn scheduler_and_task_events_go_under_their_targets() {
    let seen = Seen::default();
    let filter = tracing_subscriber::EnvFilter::new("volt::scheduler=trace,volt::task=trace");
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(seen.clone().with_filter(filter)))
        .unwrap();
    let rt = common::rt(2);
    rt.block_on(async {
        volt::spawn(async {
            let hs: Vec<_> =
                (0..64).map(|_| volt::spawn(async { std::thread::sleep(Duration::from_micros(100)) })).collect();
            for h in hs {
                h.await.unwrap();
            }
        })
        .await
        .unwrap();
    });
    assert!(common::wait_until(Duration::from_secs(5), || rt.handle().telemetry().snapshot().num_parked == 2));
    // Wake a parked worker, so an unpark is traced too.
    rt.block_on(async { volt::spawn(async {}).await.unwrap() });
    let seen = seen.0.lock().unwrap().clone();
    let count = |target: &str, what: &str| {
        seen.iter().filter(|((t, n), _)| t == target && n == what).map(|(_, c)| *c).sum::<usize>()
    };
    assert!(count("volt::task", "span spawn") >= 66, "{seen:?}");
    assert!(count("volt::task", "span poll") >= 66, "{seen:?}");
    assert!(count("volt::task", "complete") >= 65, "{seen:?}");
    assert!(count("volt::scheduler", "park") > 0, "{seen:?}");
    assert!(count("volt::scheduler", "unpark") > 0, "{seen:?}");
    let steals: u64 = rt.handle().telemetry().snapshot().workers.iter().map(|w| w.steal_operations).sum();
    assert_eq!(count("volt::scheduler", "steal") as u64, steals, "{seen:?}");
    // Nothing else is emitted under other volt targets.
    assert!(seen.keys().all(|(t, _)| t == "volt::task" || t == "volt::scheduler"), "{seen:?}");
}
