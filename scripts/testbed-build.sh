#!/usr/bin/env bash
# Builds the real Kubernetes API server, controller manager and kubectl, etcd, helm and krew from the Go module proxy, once, into a cache
# outside the repository keyed by version. Rebuilds only what is missing. Prints the cache folder's
# bin path on its last line of stdout.
set -euo pipefail

KUBE_VERSION="${GC_KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${GC_ETCD_VERSION:-v3.6.16}"
HELM_VERSION="${GC_HELM_VERSION:-v3.22.0}"
KREW_VERSION="${GC_KREW_VERSION:-v0.4.3}"
CACHE="${GC_TESTBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gc-testbed}"
BIN="$CACHE/bin"
mkdir -p "$BIN"

log() { echo "testbed-build: $*" >&2; }

# A wrapper module that requires $1@$2 and pins every `=> ./staging/...` replace of its go.mod to
# the matching published version, so `go build` accepts a module that requires v0.0.0 staging deps.
wrapper() {
  local module=$1 version=$2 dir=$3 staging_version=$4
  mkdir -p "$dir"
  local modfile
  modfile=$(cd "$dir" && GOFLAGS=-mod=mod GO111MODULE=on go mod download -json "$module@$version" \
    | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    echo "module gc-testbed-wrapper"
    echo
    sed -n 's/^go \(.*\)$/go \1/p' "$modfile" | head -1
    echo
    echo "require $module $version"
    echo
    echo "replace ("
    # Staging replaces (kubernetes) become published versions.
    sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\t\1 => \1 '"$staging_version"'#p' "$modfile"
    # Other replaces with a version (etcd's own) are copied as they are; local paths are dropped.
    awk '/^replace \(/{r=1;next} r&&/^\)/{r=0} r' "$modfile" | grep -v '=> \./' | grep -v '=> \.\./' || true
    grep -E '^replace [^(]' "$modfile" | grep -v '=> \.' | sed 's/^replace /\t/' || true
    echo ")"
  } > "$dir/go.mod"
}

# Builds $BIN/$1-$2 once, if it is missing: `$5 OUT DIR` writes the binary to OUT from the source
# folder DIR ($3), then it is moved in place. $4 is added to the first-time note.
build_once() {
  local name=$1 version=$2 dir=$3 note=$4 step=$5
  local out="$BIN/$name-$version"
  [ -x "$out" ] && return 0
  log "building $name $version (first time only$note)"
  mkdir -p "$dir"
  "$step" "$out.tmp" "$dir"
  mv "$out.tmp" "$out"
  log "built $out"
}

kube_step() {
  wrapper k8s.io/kubernetes "$KUBE_VERSION" "$2" "v0.${KUBE_VERSION#v1.}"
  (cd "$2" && go get "k8s.io/kubernetes/cmd/kube-apiserver@$KUBE_VERSION" \
   && CGO_ENABLED=0 go build -o "$1" k8s.io/kubernetes/cmd/kube-apiserver)
}

build_kube() {
  build_once kube-apiserver "$KUBE_VERSION" "$CACHE/src/kubernetes-$KUBE_VERSION" \
    "; this takes many minutes" kube_step
}

# The controller manager of the same version, from the same wrapper module: the volume binder,
# the garbage collector and the protection controllers, so claims bind and owners cascade.
kcm_step() {
  wrapper k8s.io/kubernetes "$KUBE_VERSION" "$2" "v0.${KUBE_VERSION#v1.}"
  (cd "$2" && go get "k8s.io/kubernetes/cmd/kube-controller-manager@$KUBE_VERSION" \
   && CGO_ENABLED=0 go build -o "$1" k8s.io/kubernetes/cmd/kube-controller-manager)
}

build_kcm() {
  build_once kube-controller-manager "$KUBE_VERSION" "$CACHE/src/kubernetes-$KUBE_VERSION" \
    "; this takes minutes" kcm_step
}

# kubectl of the same version, from the same wrapper module: `kubectl gc` runs the plugin.
kubectl_step() {
  wrapper k8s.io/kubernetes "$KUBE_VERSION" "$2" "v0.${KUBE_VERSION#v1.}"
  (cd "$2" && go get "k8s.io/kubernetes/cmd/kubectl@$KUBE_VERSION" \
   && CGO_ENABLED=0 go build -o "$1" k8s.io/kubernetes/cmd/kubectl)
}

build_kubectl() {
  build_once kubectl "$KUBE_VERSION" "$CACHE/src/kubernetes-$KUBE_VERSION" \
    "; this takes minutes" kubectl_step
}

etcd_step() {
  local dir=$2
  # go.etcd.io/etcd/server/v3 is a library; the etcd binary is its `etcdmain` package's main in
  # go.etcd.io/etcd/v3 (module root). Build the server's main from a two-line wrapper.
  cat > "$dir/go.mod" <<MOD
module gc-testbed-etcd

go 1.24

require go.etcd.io/etcd/server/v3 $ETCD_VERSION
MOD
  cat > "$dir/main.go" <<GO
// Command etcd starts an etcd server; the same entry point as the upstream binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$dir" && GOFLAGS=-mod=mod go mod tidy >/dev/null && CGO_ENABLED=0 go build -o "$1" .)
}

build_etcd() {
  build_once etcd "$ETCD_VERSION" "$CACHE/src/etcd-$ETCD_VERSION" "" etcd_step
}

helm_step() {
  GOBIN="$2" CGO_ENABLED=0 go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  mv "$2/helm" "$1"
}

build_helm() {
  build_once helm "$HELM_VERSION" "$CACHE/src/helm-$HELM_VERSION" "" helm_step
}

# krew, which installs `kubectl gc` from deploy/krew/gc.yaml and a release archive in the tests.
krew_step() {
  GOBIN="$2" CGO_ENABLED=0 go install "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION"
  mv "$2/krew" "$1"
}

build_krew() {
  build_once krew "$KREW_VERSION" "$CACHE/src/krew-$KREW_VERSION" "" krew_step
}

what=${1:-all}
case "$what" in
  kube) build_kube ;;
  kcm) build_kcm ;;
  etcd) build_etcd ;;
  helm) build_helm ;;
  kubectl) build_kubectl ;;
  krew) build_krew ;;
  all) build_etcd; build_helm; build_kube; build_kcm; build_kubectl; build_krew ;;
  *) echo "usage: $0 [all|kube|kcm|kubectl|krew|etcd|helm]" >&2; exit 2 ;;
esac
ln -sf "kube-apiserver-$KUBE_VERSION" "$BIN/kube-apiserver" 2>/dev/null || true
ln -sf "kube-controller-manager-$KUBE_VERSION" "$BIN/kube-controller-manager" 2>/dev/null || true
ln -sf "kubectl-$KUBE_VERSION" "$BIN/kubectl" 2>/dev/null || true
ln -sf "etcd-$ETCD_VERSION" "$BIN/etcd" 2>/dev/null || true
ln -sf "helm-$HELM_VERSION" "$BIN/helm" 2>/dev/null || true
ln -sf "krew-$KREW_VERSION" "$BIN/krew" 2>/dev/null || true
echo "$BIN"
