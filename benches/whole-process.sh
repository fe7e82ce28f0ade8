#!/usr/bin/env bash
# Whole-process comparison of `gc-cli plan pods` with the reference flow's plan step (Python),
# on the same generated inventories, in the same run: best wall time of 7 runs and peak RSS.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q --release -p gc-cli -p benches --bin gen-inventory
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo '{}' > "$work/state.json"
measure() { # label, command...: best wall time of 7 runs, peak RSS, output digest
  python3 - "$@" <<'PY'
import hashlib, subprocess, sys, tempfile, time
best, out, rss = None, b'', 0
with tempfile.NamedTemporaryFile() as f:
    for _ in range(7):
        t = time.perf_counter()
        p = subprocess.run(['/usr/bin/time', '-f', '%M', '-o', f.name] + sys.argv[2:],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        best = min(best or 1e9, time.perf_counter() - t)
        out = p.stdout if p.returncode == 0 else b'exit %d' % p.returncode
        rss = max(rss, int(open(f.name).read().split()[-1]))
print('%-7s %8.1f ms %8d KB  %s' % (sys.argv[1], best * 1000, rss, hashlib.md5(out).hexdigest()[:8]))
PY
}
echo "pods    tool      best time   peak RSS  output digest" 
for n in 1000 10000 100000; do
  ./target/release/gen-inventory "$n" "$work/$n.json"
  echo "$n Pods, $(( $(stat -c %s "$work/$n.json") / 1000000 )) MB:"
  measure gc-cli ./target/release/gc-cli plan pods --inventory "$work/$n.json" --namespace batch \
    --max-inventory 10000 --now 2026-11-29T12:00:00Z --format kestra
  NAMESPACE=batch RETENTION=86400 MAX_PODS=5 MAX_INVENTORY=10000 MAX_BYTES=262144 NOW=1795953600.0 \
    measure python python3 gc-cli/tests/data/reference/flow_plan.py "$work/$n.json" "$work/state.json"
done
