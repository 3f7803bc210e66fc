#!/usr/bin/env bash
# Builds the project's tools from the pinned modules under hack/tools/ into a cache outside
# the repository, keyed by tool and version, and links them into bin/.
# A tool already in the cache is only linked, so a second run takes seconds.
#
# usage: hack/tools/build.sh [tool...]   (default: every tool)
set -euo pipefail

root="$(cd "$(dirname "$0")/../.." && pwd)"
tools_dir="$root/hack/tools"
cache="${MWO_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/middleware-operator}/tools"
bin="$root/bin"
mkdir -p "$cache" "$bin"

# name|module dir|package|version|extra go build flags
KUBE_VERSION=v1.36.3
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z"
TOOLS=(
  "kube-apiserver|kube|k8s.io/kubernetes/cmd/kube-apiserver|${KUBE_VERSION}|${kube_ldflags}"
  "kube-controller-manager|kube|k8s.io/kubernetes/cmd/kube-controller-manager|${KUBE_VERSION}|${kube_ldflags}"
  "kube-scheduler|kube|k8s.io/kubernetes/cmd/kube-scheduler|${KUBE_VERSION}|${kube_ldflags}"
  "kubectl|kube|k8s.io/kubernetes/cmd/kubectl|${KUBE_VERSION}|${kube_ldflags}"
  "etcd|etcd|.|v3.6.16|-s -w"
  "kwok|kwok|sigs.k8s.io/kwok/cmd/kwok|v0.8.0|-s -w"
  "controller-gen|controller-gen|sigs.k8s.io/controller-tools/cmd/controller-gen|v0.23.0|-s -w"
  "kustomize|kustomize|sigs.k8s.io/kustomize/kustomize/v5|v5.8.2|-s -w"
  "golangci-lint|lint|github.com/golangci/golangci-lint/v2/cmd/golangci-lint|v2.15.0|-s -w"
)

want=("$@")
for entry in "${TOOLS[@]}"; do
  IFS='|' read -r name dir pkg version ldflags <<<"$entry"
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then continue; fi
  # The key includes the module's go.sum so a dependency bump rebuilds.
  sum=$(sha256sum "$tools_dir/$dir/go.sum" | cut -c1-12)
  out="$cache/$name-$version-$sum/$name"
  if [ ! -x "$out" ]; then
    echo "building $name $version (cached in $(dirname "$out"))" >&2
    start=$(date +%s)
    mkdir -p "$(dirname "$out")"
    (cd "$tools_dir/$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg")
    mv "$out.tmp" "$out"
    echo "built $name in $(( $(date +%s) - start ))s" >&2
  fi
  ln -sfn "$out" "$bin/$name"
  if [ "$name" = kwok ] && [ ! -d "$(dirname "$out")/stages" ]; then
    # kwok's stage definitions ship in its module; keep the ones the local cluster uses.
    moddir=$(cd "$tools_dir/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
    mkdir -p "$(dirname "$out")/stages.tmp"
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
             pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml \
             volume/fast/pv-bind.yaml volume/fast/pv-delete.yaml volume/fast/pvc-provision.yaml volume/fast/pvc-delete.yaml; do
      cp "$moddir/kustomize/stage/$f" "$(dirname "$out")/stages.tmp/"
    done
    mv "$(dirname "$out")/stages.tmp" "$(dirname "$out")/stages"
  fi
  if [ "$name" = kwok ]; then ln -sfn "$(dirname "$out")/stages" "$bin/kwok-stages"; fi
done
