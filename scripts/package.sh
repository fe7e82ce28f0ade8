#!/usr/bin/env bash
# Packs a built gc-cli into the release archive that krew installs (deploy/krew/gc.yaml):
#   scripts/package.sh BINARY VERSION OUT_DIR [OS ARCH]
# writes OUT_DIR/gc-VERSION-OS-ARCH.tar.gz (OS, ARCH as krew names them: linux|darwin,
# amd64|arm64; default this machine's) holding kubectl-gc (the binary), kubectl_complete-gc
# (kubectl's completion hook for `kubectl gc`) and README.md, and prints its sha256 and path.
set -euo pipefail

usage="usage: scripts/package.sh BINARY vVERSION OUT_DIR [linux|darwin amd64|arm64]"
binary=${1:?$usage} version=${2:?$usage} out=${3:?$usage}
os=${4:-$(uname -s | tr '[:upper:]' '[:lower:]')}
case "$os" in
  linux|darwin) ;;
  *) echo "package.sh: unknown OS $os; $usage" >&2; exit 2 ;;
esac
case "${5:-$(uname -m)}" in
  x86_64|amd64) arch=amd64 ;;
  aarch64|arm64) arch=arm64 ;;
  *) echo "package.sh: unknown architecture ${5:-$(uname -m)}" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -m 0755 "$binary" "$stage/kubectl-gc"
cat > "$stage/kubectl_complete-gc" <<'SH'
#!/bin/sh
# kubectl (1.26+) runs this to complete `kubectl gc ...`: put it on PATH beside kubectl-gc.
exec kubectl-gc __complete "$@"
SH
chmod 0755 "$stage/kubectl_complete-gc"
cp "$root/README.md" "$stage/README.md"
mkdir -p "$out"
archive="$(cd "$out" && pwd)/gc-$version-$os-$arch.tar.gz"
# GNU tar (the release builds run on Linux): files owned by root in the archive.
tar -C "$stage" --owner=0 --group=0 -czf "$archive" kubectl-gc kubectl_complete-gc README.md
if command -v sha256sum >/dev/null; then
  sum=$(sha256sum "$archive" | cut -d' ' -f1)
else
  sum=$(shasum -a 256 "$archive" | cut -d' ' -f1)
fi
echo "$sum $archive"
