//! A small app written against Tokio's API, built on Volt through the rename in its
//! Cargo.toml (`tokio = { package = "volt", .. }`).

use std::time::Duration;

tokio::task_local! {
    /// The request being served, for the code deep inside it.
    pub static REQUEST: u32;
}

/// Spawn `n` tasks that each sleep, read their task-local, and answer; sum the answers.
pub async fn run(n: u32) -> u32 {
    let mut handles = Vec::new();
    for i in 0..n {
        handles.push(tokio::spawn(REQUEST.scope(i, async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            REQUEST.get()
        })));
    }
    let mut sum = 0;
    for h in handles {
        tokio::select! {
            r = h => sum += r.expect("the task finished"),
            _ = tokio::time::sleep(Duration::from_secs(10)) => panic!("a task took 10 s"),
        }
    }
    sum
}
