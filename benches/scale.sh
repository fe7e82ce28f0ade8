#!/usr/bin/env bash
# The scale benchmark: 20 namespaces, 50,000 Pods and 20,000 Session objects on the real API
# server, PostgreSQL for the sessions; every namespace planned in one run and in one run per
# namespace, for both collectors. Arguments go to the benchmark (NAMESPACES PODS SESSIONS ROUNDS).
set -euo pipefail
cd "$(dirname "$0")/.."
GC_TESTBED_BIN=$(scripts/testbed-build.sh all | tail -n 1)
GC_TEST_DATABASE_URL=$(scripts/postgres.sh | tail -n 1)
export GC_TESTBED_BIN GC_TEST_DATABASE_URL
cargo build -q --release -p gc-cli -p benches --bin scale --bin gc-cli
GC_CLI=target/release/gc-cli exec target/release/scale "$@"
