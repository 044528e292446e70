#!/usr/bin/env bash
# What a change costs: the `overhead` benchmark of an earlier commit (BASE) against the
# working tree's, run as separate processes in turn (base, new, base, new, ...), and the
# new/base ratio of each workload's median for each of its three runtimes (untimed,
# default, event ring on), with their geometric means. Below 1 means the working tree is
# faster.
#
#   BASE=f47e8c1 bash runtime/benches/against_build.sh            # 3 rounds each
#   BASE=f47e8c1 ROUNDS=5 VOLT_BENCH_SAMPLES=32 bash runtime/benches/against_build.sh
#
# The base is built in a git worktree under a temporary directory with its own target
# directory (a first run builds it whole: several minutes); the worktree is removed at
# the end, the base's target directory is kept for the next run (BASE_TARGET). KEEP=dir
# keeps each run's own table (with its in-process ring on/off ratios) in dir.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${BASE:?set BASE to the commit to compare against}"
ROUNDS=${ROUNDS:-3}
BASE_TARGET=${BASE_TARGET:-${TMPDIR:-/tmp}/volt-base-target}
work=$(mktemp -d "${TMPDIR:-/tmp}/volt-base.XXXXXX")
trap 'git worktree remove --force "$work/tree" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

bench_exe() {  # the overhead bench's executable, as cargo reports it
  cargo bench -p volt --bench overhead --no-run --message-format=json-render-diagnostics 2>/dev/null \
    | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("target", {}).get("name") == "overhead" and m.get("executable"):
        print(m["executable"])'
}

git worktree add --detach -q "$work/tree" "$BASE"
echo "== building the overhead bench at $BASE and in the working tree"
base_exe=$(cd "$work/tree" && CARGO_TARGET_DIR="$BASE_TARGET" bench_exe)
new_exe=$(bench_exe)
[ -n "$base_exe" ] && [ -n "$new_exe" ] || { echo "no bench executable"; exit 1; }

for r in $(seq 1 "$ROUNDS"); do
  echo "== round $r of $ROUNDS"
  "$base_exe" --bench > "$work/base.$r"
  "$new_exe" --bench > "$work/new.$r"
done

if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$work"/base.* "$work"/new.* "$KEEP"/; fi

python3 - "$work" "$ROUNDS" "$BASE" <<'PY'
import math, re, statistics, sys
work, rounds, base = sys.argv[1], int(sys.argv[2]), sys.argv[3]
unit = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}

def parse(path):
    rows = {}
    for line in open(path, encoding="utf-8"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 4 or cells[0].startswith(("workload", "---", "**")):
            continue
        try:
            vals = []
            for c in cells[1:4]:
                num, u = re.match(r"([\d.]+)\s*(\S+)", c).groups()
                vals.append(float(num) * unit[u])
        except (AttributeError, KeyError):
            continue
        rows[cells[0]] = vals
    return rows

runs = {k: [parse(f"{work}/{k}.{r}") for r in range(1, rounds + 1)] for k in ("base", "new")}
names = list(runs["new"][0])
print(f"\nnew / {base}: ratio of the medians over {rounds} runs each (below 1: the working tree is faster)\n")
print("| workload | untimed | default | ring on |")
print("|---|---:|---:|---:|")
logs = [0.0, 0.0, 0.0]
for n in names:
    ratios = []
    for i in range(3):
        b = statistics.median(run[n][i] for run in runs["base"] if n in run)
        x = statistics.median(run[n][i] for run in runs["new"] if n in run)
        ratios.append(x / b)
        logs[i] += math.log(x / b)
    print(f"| {n} | " + " | ".join(f"{v:.2f}" for v in ratios) + " |")
print("| **geomean** | " + " | ".join(f"**{math.exp(l / len(names)):.2f}**" for l in logs) + " |")
PY
