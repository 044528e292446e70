#!/usr/bin/env bash
# redis-benchmark against `examples/kv`: the same source built on Volt (`volt-kv`, where
# Cargo.toml names Volt as `tokio`) and on Tokio (`tokio-kv`), each with its default
# runtime (`#[tokio::main]`: multi-thread, one worker per core). Run by hand; needs
# `redis-benchmark` (Debian's `redis-tools`).
#
#   bash runtime/benches/kv.sh                 # 5 runs per runtime, alternating
#   RUNS=3 REQUESTS=100000 bash runtime/benches/kv.sh
#
# Three variants, run in turn so a slow spell of the machine hits all alike; each run is a
# fresh server:
#   volt     Volt with its console off (`VOLT_CONSOLE=0`): the same work as Tokio's
#   tokio    the same source on Tokio
#   watched  Volt as the package builds it, console and event ring on (no client connected) redis-benchmark shares the cores with the server
# (a 2-core machine has none to give either alone). The table gives each test's median
# requests/s per variant and the ratios of the medians to Tokio's (above 1: more than
# Tokio).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-5}
REQUESTS=${REQUESTS:-200000}
CLIENTS=${CLIENTS:-50}
PORT=${PORT:-16379}

command -v redis-benchmark >/dev/null || { echo "redis-benchmark is needed (apt-get install redis-tools)"; exit 1; }
cargo build --release -p volt-kv -p tokio-kv >&2
dir=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
out=$(mktemp -d)

for r in $(seq "$RUNS"); do
  for v in volt tokio watched; do
    case $v in
      volt) VOLT_CONSOLE=0 "$dir/release/volt-kv" --port "$PORT" >/dev/null & ;;
      watched) VOLT_CONSOLE_BIND=127.0.0.1:0 "$dir/release/volt-kv" --port "$PORT" >/dev/null & ;;
      tokio) "$dir/release/tokio-kv" --port "$PORT" >/dev/null & ;;
    esac
    pid=$!
    for _ in $(seq 100); do
      redis-cli -p "$PORT" ping >/dev/null 2>&1 && break
      sleep 0.05
    done
    redis-benchmark -p "$PORT" -t set,get -c "$CLIENTS" -n "$REQUESTS" -q --csv 2>/dev/null \
      | tr -d '"' | awk -F, -v v="$v" -v r="$r" '$1=="SET"||$1=="GET" {print v, r, $1, $2}' >> "$out/results"
    kill -INT "$pid"
    wait "$pid" || true
  done
done

python3 - "$out/results" <<'PY'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1])]
print("| test | Volt req/s | Tokio req/s | watched req/s | Volt/Tokio | watched/Tokio |")
print("|---|---:|---:|---:|---:|---:|")
for test in ("SET", "GET"):
    med = {v: statistics.median(float(r[3]) for r in rows if r[0] == v and r[2] == test) for v in ("volt", "tokio", "watched")}
    print(f"| {test} | {med['volt']:,.0f} | {med['tokio']:,.0f} | {med['watched']:,.0f} | {med['volt']/med['tokio']:.2f} | {med['watched']/med['tokio']:.2f} |")
runs = {}
for v, r, test, rps in rows:
    runs.setdefault((test, r), {})[v] = float(rps)
print("\nper run (Volt/Tokio):", ", ".join(f"{t} {d['volt']/d['tokio']:.2f}" for (t, _), d in sorted(runs.items()) if 'volt' in d and 'tokio' in d))
PY
