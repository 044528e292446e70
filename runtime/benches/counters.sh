#!/usr/bin/env bash
# What the always-on counters cost: the Volt half of the `vs_tokio` benchmark, built
# normally and with `--cfg volt_no_counters` (the counters compile to nothing), run
# alternately ROUNDS times each; prints the per-workload medians and their ratio. Both
# builds time polls (the default); what that costs is the overhead bench's "untimed" column.
#
#   bash runtime/benches/counters.sh            # ROUNDS=3 VOLT_BENCH_SAMPLES=15 by default
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-3}
export VOLT_BENCH_SAMPLES=${VOLT_BENCH_SAMPLES:-15}
with=$(cargo bench -p volt --bench vs_tokio --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import sys,json;[print(m["executable"]) for m in map(json.loads,sys.stdin) if m.get("executable") and "vs_tokio" in m["executable"]]' | tail -1)
without=$(RUSTFLAGS="--cfg volt_no_counters" CARGO_TARGET_DIR=target/nocounters cargo bench -p volt --bench vs_tokio --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import sys,json;[print(m["executable"]) for m in map(json.loads,sys.stdin) if m.get("executable") and "vs_tokio" in m["executable"]]' | tail -1)
out=$(mktemp -d)
for r in $(seq 1 "$ROUNDS"); do
  "$with" --bench > "$out/with.$r"
  "$without" --bench > "$out/without.$r"
done
python3 - "$out" "$ROUNDS" <<'PY'
import math, re, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def parse(path):
    rows = {}
    for line in open(path):
        m = re.match(r"\| (\w+) \| ([\d.]+) (ms|µs) \|", line)
        if m:
            v = float(m.group(2)) * (1000 if m.group(3) == "ms" else 1)
            rows[m.group(1)] = v
    return rows
w = [parse(f"{d}/with.{r}") for r in range(1, rounds + 1)]
wo = [parse(f"{d}/without.{r}") for r in range(1, rounds + 1)]
print(f"Volt with the always-on counters vs built without them ({rounds} alternating runs each, median of the runs' medians)\n")
print("| workload | without counters | with counters | with/without |")
print("|---|---:|---:|---:|")
logs = []
for k in w[0]:
    a = statistics.median(x[k] for x in wo)
    b = statistics.median(x[k] for x in w)
    logs.append(math.log(b / a))
    print(f"| {k} | {a:.1f} µs | {b:.1f} µs | {b/a:.2f} |")
print(f"| **geomean** | | | **{math.exp(sum(logs)/len(logs)):.2f}** |")
PY
