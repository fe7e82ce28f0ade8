#!/usr/bin/env bash
# The whole test suite: builds (once, cached) the real kube-apiserver, etcd, helm and the
# S3-compatible servers s3s-fs and moto, makes sure PostgreSQL and a Pushgateway run on loopback
# and Prometheus is installed, then runs every test of the workspace against them.
set -euo pipefail
cd "$(dirname "$0")/.."

# What this machine needs before anything starts (the README's Prerequisites): each missing
# thing is named with how to get it, and the run stops.
scripts/prerequisites.sh

GC_TESTBED_BIN=$(scripts/testbed-build.sh all | tail -n 1)
export GC_TESTBED_BIN
if [ -x scripts/postgres.sh ]; then
  GC_TEST_DATABASE_URL=$(scripts/postgres.sh | tail -n 1)
  export GC_TEST_DATABASE_URL
fi
GC_TEST_PUSHGATEWAY=$(scripts/pushgateway.sh | tail -n 1)
export GC_TEST_PUSHGATEWAY
# The folder holding prometheus and promtool: the alert rules' unit tests, and the end-to-end
# alert tests (each starts its own Prometheus on a free loopback port).
GC_TEST_PROMETHEUS=$(scripts/prometheus.sh | tail -n 1)
export GC_TEST_PROMETHEUS
# The S3-compatible server the object-store archive sink is tested against (each test starts its
# own on a free loopback port).
GC_TEST_S3S_FS=$(scripts/s3.sh | tail -n 1)
export GC_TEST_S3S_FS
# The second one, moto, which answers as AWS does: the fault tests run against both.
GC_TEST_MOTO=$(scripts/moto.sh | tail -n 1)
export GC_TEST_MOTO
# The console's browser tests: Debian's headless Chromium and its WebDriver (installed once, as
# root, when missing), and axe-core, the accessibility checker the tests inject into each page
# (installed once from npm into a cache folder named after its version).
if [ ! -x /usr/bin/chromedriver ] || [ ! -x /usr/bin/chromium ]; then
  echo "test.sh: installing chromium and chromium-driver" >&2
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >&2
fi
export GC_TEST_CHROMEDRIVER=/usr/bin/chromedriver GC_TEST_CHROMIUM=/usr/bin/chromium
AXE_VERSION=4.14.1
AXE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/gc-testbed/axe-$AXE_VERSION"
if [ ! -f "$AXE_DIR/node_modules/axe-core/axe.min.js" ]; then
  echo "test.sh: installing axe-core $AXE_VERSION into $AXE_DIR" >&2
  mkdir -p "$AXE_DIR"
  (cd "$AXE_DIR" && npm install --no-audit --no-fund --silent "axe-core@$AXE_VERSION" >&2)
fi
export GC_TEST_AXE="$AXE_DIR/node_modules/axe-core/axe.min.js"
# staticcheck, the Go linter both Go modules below pass: installed once, into a cache folder
# outside the repository named after its version.
STATICCHECK_VERSION=v0.8.2
STATICCHECK_BIN="${XDG_CACHE_HOME:-$HOME/.cache}/gc-testbed/staticcheck-$STATICCHECK_VERSION"
if [ ! -x "$STATICCHECK_BIN/staticcheck" ]; then
  echo "test.sh: installing staticcheck $STATICCHECK_VERSION into $STATICCHECK_BIN" >&2
  GOBIN="$STATICCHECK_BIN" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi
STATICCHECK="$STATICCHECK_BIN/staticcheck"
# The Go client of the request API: its unit tests and examples, staticcheck, and builds without
# cgo for amd64 and arm64 (as a control plane built with CGO_ENABLED=0 imports it). Its live test
# runs from gc-cli/tests/sessions.rs against a real `gc-cli serve`.
(
  cd clients/go
  CGO_ENABLED=0 go test -count=1 ./...
  CGO_ENABLED=0 "$STATICCHECK" ./...
  for arch in amd64 arm64; do CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build ./...; done
)
# StreamSpace's reconciler as it would call gc (examples/streamspace): staticcheck, and built as
# StreamSpace builds (no cgo, amd64 and arm64); gc-cli/tests/restore.rs runs it end to end.
(
  cd examples/streamspace
  CGO_ENABLED=0 "$STATICCHECK" ./...
  for arch in amd64 arm64; do CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -o /dev/null .; done
)
# The embedding examples, which tests run beside the CLI (`cargo test` builds examples but does
# not put them at target/debug/examples/NAME).
cargo build -p examples --examples
# Arguments go to cargo test: `scripts/test.sh -p gc-core` runs one package, no argument all.
case " $* " in
  *" -p "* | *" --package "*) cargo test --all-targets "$@" ;;
  *) cargo test --workspace --all-targets "$@" ;;
esac
