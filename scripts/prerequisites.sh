#!/usr/bin/env bash
# Checks that this machine has what scripts/test.sh needs before it starts (the README's
# "Prerequisites"), and says, for each thing missing or too old, what it is for and how to get
# it; exits 1 if anything is missing, 0 otherwise. Installs nothing and needs no network.
#
# Checked: Rust (cargo and rustc at the workspace's rust-version or later), a C compiler, Go (new
# enough to build the test bed's Kubernetes, unless it is built already), Python 3 (with venv
# and pip until moto is installed), openssl, and root when a Debian package the scripts install
# (postgresql, prometheus, prometheus-pushgateway, chromium, chromium-driver) is not installed
# yet; npm (Node.js) for the console's accessibility checker.
set -euo pipefail
cd "$(dirname "$0")/.."

# The versions the scripts build with: Cargo.toml's rust-version; the Go that the go.mod of
# Kubernetes v1.37.2 (scripts/testbed-build.sh) asks for.
RUST_MIN=$(sed -n 's/^rust-version *= *"\(.*\)"/\1/p' Cargo.toml | head -n 1)
GO_MIN=1.26
CACHE="${GC_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gc-testbed}"

missing=()
miss() { missing+=("$1"); }

# Whether version $1 is at least $2 (dotted numbers).
at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -n 1)" = "$2" ]; }

# Rust.
if ! command -v cargo >/dev/null 2>&1 || ! command -v rustc >/dev/null 2>&1; then
  miss "Rust $RUST_MIN or later (cargo, rustc): install rustup from https://rustup.rs
    (curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh), then open a new shell"
else
  rust=$(rustc --version | awk '{print $2}')
  at_least "${rust%%-*}" "$RUST_MIN" \
    || miss "Rust $RUST_MIN or later (Cargo.toml's rust-version), found rustc $rust: rustup update stable"
fi

# A C compiler: the bundled SQLite (libsqlite3-sys) and ring compile C.
if [ -n "${CC:-}" ]; then
  command -v "$CC" >/dev/null 2>&1 || miss "the C compiler \$CC=$CC is not on PATH"
elif ! command -v cc >/dev/null 2>&1; then
  miss "a C compiler (cc; SQLite and ring are compiled from C): apt-get install build-essential"
fi

# Go: the Go client's tests and staticcheck always; the test bed's kube-apiserver, controller
# manager, kubectl, etcd, helm and krew the first time (scripts/testbed-build.sh).
if ! command -v go >/dev/null 2>&1; then
  miss "Go $GO_MIN or later (it builds kube-apiserver, etcd, helm and krew, and runs the Go
    client's tests): https://go.dev/dl/ (tar -C /usr/local -xzf go$GO_MIN.*.linux-amd64.tar.gz;
    PATH=\$PATH:/usr/local/go/bin)"
else
  go_version=$(go env GOVERSION | sed 's/^go//')
  built=true
  for tool in kube-apiserver kube-controller-manager kubectl etcd helm krew; do
    [ -x "$CACHE/bin/$tool" ] || built=false
  done
  if ! at_least "$go_version" "$GO_MIN" && [ "$built" = false ]; then
    # Go 1.21 and later fetch the toolchain a go.mod asks for, unless told not to.
    if ! at_least "$go_version" 1.21 || [ "$(go env GOTOOLCHAIN)" = local ]; then
      miss "Go $GO_MIN or later to build the test bed's Kubernetes (v1.37.2), found go$go_version
    (GOTOOLCHAIN=$(go env GOTOOLCHAIN)): https://go.dev/dl/, or GOTOOLCHAIN=auto with Go 1.21+"
    fi
  fi
fi

# Python 3: the Kestra flow's planner the tests compare with; venv and pip until moto (the
# S3-compatible server, from PyPI) is installed in its virtual environment (scripts/moto.sh).
if ! command -v python3 >/dev/null 2>&1; then
  miss "Python 3 with venv (the Kestra flow's planner, and moto in a virtual environment):
    apt-get install python3 python3-venv"
elif [ ! -x "$CACHE/moto-${GC_MOTO_VERSION:-5.2.5}/bin/moto_server" ] \
  && ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  miss "Python 3's venv with pip (moto is installed into a virtual environment):
    apt-get install python3-venv"
fi

# openssl: the StreamSpace page's test issues the page's certificate as cert-manager would.
command -v openssl >/dev/null 2>&1 || miss "openssl (the StreamSpace page's test): apt-get install openssl"

# npm: axe-core, the accessibility checker the console's browser tests inject (scripts/test.sh).
command -v npm >/dev/null 2>&1 || [ -f "$CACHE/axe-4.14.1/node_modules/axe-core/axe.min.js" ] \
  || miss "npm (Node.js), to install axe-core for the console's browser tests: apt-get install npm"

# Debian's packages that scripts/postgres.sh, prometheus.sh and pushgateway.sh install when
# missing, which takes root (apt-get).
packages=()
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || packages+=(postgresql)
{ command -v prometheus && command -v promtool; } >/dev/null 2>&1 || packages+=(prometheus)
command -v prometheus-pushgateway >/dev/null 2>&1 || packages+=(prometheus-pushgateway)
[ -x /usr/bin/chromium ] || packages+=(chromium)
[ -x /usr/bin/chromedriver ] || packages+=(chromium-driver)
if [ "${#packages[@]}" -gt 0 ] && [ "$(id -u)" != 0 ]; then
  miss "root, to install Debian's ${packages[*]} (the tests' PostgreSQL, Prometheus,
    Pushgateway, and the console's headless Chromium): sudo apt-get install ${packages[*]}, or run scripts/test.sh as root"
fi
command -v apt-get >/dev/null 2>&1 || [ "${#packages[@]}" -eq 0 ] \
  || miss "apt-get, to install ${packages[*]}: the scripts install Debian's packages; on another
    system install PostgreSQL, Prometheus (with promtool) and the Pushgateway yourself"

if [ "${#missing[@]}" -gt 0 ]; then
  echo "prerequisites.sh: this machine lacks what the tests need (README.md, Prerequisites):" >&2
  for m in "${missing[@]}"; do echo "  - $m" >&2; done
  exit 1
fi
echo "prerequisites.sh: Rust $(rustc --version | awk '{print $2}'), $(go env GOVERSION), $(python3 --version), a C compiler, openssl: all present" >&2
