#!/usr/bin/env bash
# Whole-process comparison of `gc-cli plan pods` with the reference flow's plan step (Python),
# on the same generated inventories, in the same run. The two tools alternate, run by run (RUNS
# runs each, default 11): median and best wall time, peak RSS, and a digest of the output.
# Python is the interpreter itself (`sys.executable`), not a version manager's shim.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p gc-cli -p benches --bin gen-inventory
python=$(python3 -c 'import sys; print(sys.executable)')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo '{}' > "$work/state.json"
compare() { # inventory: both tools alternating; median and best wall time, peak RSS, digest
  "$python" - "$1" "$python" "$work/state.json" "${RUNS:-11}" <<'PY'
import hashlib, os, statistics, subprocess, sys, tempfile, time
inventory, python, state, runs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
tools = [
    ('gc-cli', ['./target/release/gc-cli', 'plan', 'pods', '--inventory', inventory,
                '--namespace', 'batch', '--max-inventory', '10000',
                '--now', '2026-11-29T12:00:00Z', '--format', 'kestra'], None),
    ('python', [python, 'gc-cli/tests/data/reference/flow_plan.py', inventory, state],
     dict(os.environ, NAMESPACE='batch', RETENTION='86400', MAX_PODS='5', MAX_INVENTORY='10000',
          MAX_BYTES='262144', NOW='1795953600.0')),
]
times = {name: [] for name, _, _ in tools}
rss = {name: 0 for name, _, _ in tools}
out = {}
with tempfile.NamedTemporaryFile() as f:
    for _ in range(runs):
        for name, cmd, env in tools:
            t = time.perf_counter()
            p = subprocess.run(['/usr/bin/time', '-f', '%M', '-o', f.name] + cmd, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - t)
            out[name] = p.stdout if p.returncode == 0 else b'exit %d' % p.returncode
            rss[name] = max(rss[name], int(open(f.name).read().split()[-1]))
for name, _, _ in tools:
    print('%-7s %9.1f ms %9.1f ms %8d KB  %s' % (
        name, statistics.median(times[name]) * 1000, min(times[name]) * 1000, rss[name],
        hashlib.md5(out[name]).hexdigest()[:8]))
ratio = statistics.median(times['python']) / statistics.median(times['gc-cli'])
best = min(times['python']) / min(times['gc-cli'])
print('gc-cli faster: %.1fx (medians), %.1fx (best)' % (ratio, best))
PY
}
echo "$("$python" -V) at $python; $(nproc) cores"
echo "tool       median       best   peak RSS  output digest"
for n in ${SIZES:-1000 10000 100000}; do
  ./target/release/gen-inventory "$n" "$work/$n.json"
  echo "$n Pods, $(( $(stat -c %s "$work/$n.json") / 1000000 )) MB:"
  compare "$work/$n.json"
done
