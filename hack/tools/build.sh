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

# name|module dir|package|version|-ldflags|build tags (comma-separated, optional)
KUBE_VERSION=v1.36.3
kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z"
osdk_ldflags="-X github.com/operator-framework/operator-sdk/internal/version.Version=v1.33.0 -X github.com/operator-framework/operator-sdk/internal/version.GitVersion=v1.33.0 -X github.com/operator-framework/operator-sdk/internal/version.GitCommit=542966812906456a8d67cf7284fc6410b104e118 -X github.com/operator-framework/operator-sdk/internal/version.KubernetesVersion=v1.27.0 -X github.com/operator-framework/operator-sdk/internal/version.ImageVersion=v1.33.0"
opm_ldflags="-X github.com/operator-framework/operator-registry/cmd/opm/version.opmVersion=v1.61.0 -X github.com/operator-framework/operator-registry/cmd/opm/version.gitCommit=b951856d801cab0e2ab128c2515f50c3b63824ba"
olm_ldflags="-X github.com/operator-framework/operator-lifecycle-manager/pkg/version.OLMVersion=v0.38.0"
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
  # versitygw, the Versity S3 Gateway on its posix backend: the S3-compatible object store the
  # local cluster runs for backups (docs/development/object-store.md).
  "versitygw|versitygw|github.com/versity/versitygw/cmd/versitygw|v1.8.0|-s -w -X main.Version=v1.8.0"
  # promtool checks and unit-tests the alerting rules (config/prometheus).
  "promtool|promtool|github.com/prometheus/prometheus/cmd/promtool|v0.316.0|-s -w"
  # OLM packaging: the Operator SDK CLI (generate bundle, bundle validate), its scorecard test
  # runner and our driver of it (operator-sdk/scorecard), the catalog tool opm, and OLM's own
  # olm and catalog operators for the OLM e2e test. operator-sdk/patches backports a fix of
  # operator-framework/api's deprecated-API validator (see the patch).
  "operator-sdk|operator-sdk|github.com/operator-framework/operator-sdk/cmd/operator-sdk|v1.33.0|-s -w ${osdk_ldflags}"
  "scorecard-test|operator-sdk|github.com/operator-framework/operator-sdk/images/scorecard-test|v1.33.0|-s -w"
  "scorecard|operator-sdk|./scorecard|v1.33.0|-s -w"
  "opm|opm|github.com/operator-framework/operator-registry/cmd/opm|v1.61.0|-s -w ${opm_ldflags}|json1,containers_image_openpgp"
  "olm|olm|github.com/operator-framework/operator-lifecycle-manager/cmd/olm|v0.38.0|-s -w ${olm_ldflags}|json1"
  "catalog|olm|github.com/operator-framework/operator-lifecycle-manager/cmd/catalog|v0.38.0|-s -w ${olm_ldflags}|json1"
  # Images without a container engine (make images): imagetar, our builder of image tarballs
  # on go-containerregistry (images/imagetar), and grpc_health_probe, which the opm base
  # image of catalog.Dockerfile ships and OLM's CatalogSource pods run as their probes.
  "imagetar|images|./imagetar|v0.22.1|-s -w"
  "grpc_health_probe|grpc-health-probe|github.com/grpc-ecosystem/grpc-health-probe|v0.4.41|-s -w"
  # cert-manager's controllers for CA and SelfSigned issuers (cert-manager/controller, our
  # own main on its pkg/ API: the upstream binary's module is not on the proxy), for the
  # spec.tls.issuerRef test.
  "cert-manager-controller|cert-manager|./controller|v1.21.2|-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion=v1.21.2"
)

# module_dir prints the directory of module (path@version, or a path the tool module in $1
# requires), downloading it first: `go list -m` alone prints nothing on a fresh machine.
module_dir() {
  (cd "$1" && go mod download -json "$2" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
}

# patched_modfile copies each dependency a tool module patches, applies the patches, and
# prints a go.mod (a copy of the tool module's, beside a copy of its go.sum) that replaces
# the dependency with the patched copy, for `go build -modfile`. A patch lives at
# <module dir>/patches/<module path>@<version>/<file path>.patch.
patched_modfile() {
  local moddir=$1 work=$2 p rel mod ver file copy
  rm -rf "$work" && mkdir -p "$work"
  cp "$moddir/go.mod" "$moddir/go.sum" "$work/"
  while IFS= read -r p; do
    rel=${p#"$moddir/patches/"}
    mod=${rel%%@*}
    ver=${rel#*@}; ver=${ver%%/*}
    file=${rel#*@"$ver"/}; file=${file%.patch}
    copy="$work/src/$mod@$ver"
    if [ ! -d "$copy" ]; then
      mkdir -p "$(dirname "$copy")"
      cp -r "$(module_dir "$moddir" "$mod@$ver")" "$copy"
      chmod -R u+w "$copy"
      (cd "$work" && go mod edit -replace "$mod@$ver=$copy")
    fi
    patch --quiet "$copy/$file" "$p" >&2
  done < <(find "$moddir/patches" -type f -name '*.patch' | LC_ALL=C sort)
  echo "$work/go.mod"
}

want=("$@")
for entry in "${TOOLS[@]}"; do
  IFS='|' read -r name dir pkg version ldflags tags <<<"$entry"
  if [ ${#want[@]} -gt 0 ] && [[ ! " ${want[*]} " == *" $name "* ]]; then continue; fi
  # The key includes the module's go.sum so a dependency bump rebuilds.
  sum=$(sha256sum "$tools_dir/$dir/go.sum" | cut -c1-12)
  if [[ "$pkg" == ./* ]]; then
    # A program kept in this repository: its sources are part of the key too.
    sum=$(cat "$tools_dir/$dir/go.sum" "$tools_dir/$dir/$pkg"/*.go | sha256sum | cut -c1-12)
  fi
  patches="$tools_dir/$dir/patches"
  if [ -d "$patches" ]; then
    # Patched dependencies: the patches are part of the key too.
    sum=$( (echo "$sum"; cd "$patches" && find . -type f -name '*.patch' | LC_ALL=C sort | xargs cat) | sha256sum | cut -c1-12)
  fi
  out="$cache/$name-$version-$sum/$name"
  if [ ! -x "$out" ]; then
    echo "building $name $version (cached in $(dirname "$out"))" >&2
    start=$(date +%s)
    mkdir -p "$(dirname "$out")"
    modfile=()
    if [ -d "$patches" ]; then
      modfile=(-modfile "$(patched_modfile "$tools_dir/$dir" "$(dirname "$out")/patched")")
    fi
    if ! (cd "$tools_dir/$dir" && CGO_ENABLED=0 go build -trimpath "${modfile[@]}" -tags "$tags" -ldflags "$ldflags" -o "$out.tmp" "$pkg"); then
      echo "hack/tools/build.sh: building $name $version failed (above)." >&2
      echo "  A module download that failed (a 'dial', 'timeout' or '403' from the proxy) needs the Go module proxy" >&2
      echo "  reachable (go env GOPROXY); run 'make tools' again, which keeps what it already built." >&2
      echo "  A version the proxy refuses must be pinned to one it serves in hack/tools/$dir/go.mod." >&2
      exit 1
    fi
    mv "$out.tmp" "$out"
    echo "built $name in $(( $(date +%s) - start ))s" >&2
  fi
  ln -sfn "$out" "$bin/$name"
  if [ "$name" = kwok ] && [ ! -d "$(dirname "$out")/stages" ]; then
    # kwok's stage definitions ship in its module; keep the ones the local cluster uses.
    moddir=$(module_dir "$tools_dir/kwok" sigs.k8s.io/kwok)
    mkdir -p "$(dirname "$out")/stages.tmp"
    for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
             pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml \
             volume/fast/pv-bind.yaml volume/fast/pv-delete.yaml volume/fast/pvc-provision.yaml volume/fast/pvc-delete.yaml; do
      cp "$moddir/kustomize/stage/$f" "$(dirname "$out")/stages.tmp/"
    done
    mv "$(dirname "$out")/stages.tmp" "$(dirname "$out")/stages"
  fi
  if [ "$name" = kwok ]; then ln -sfn "$(dirname "$out")/stages" "$bin/kwok-stages"; fi
  if [ "$name" = olm ] && [ ! -d "$(dirname "$out")/crds" ]; then
    # OLM's CRDs ship in its module (deploy/chart/crds); the OLM e2e test installs them.
    moddir=$(module_dir "$tools_dir/olm" github.com/operator-framework/operator-lifecycle-manager)
    cp -r "$moddir/deploy/chart/crds" "$(dirname "$out")/crds.tmp"
    chmod -R u+w "$(dirname "$out")/crds.tmp"
    mv "$(dirname "$out")/crds.tmp" "$(dirname "$out")/crds"
  fi
  if [ "$name" = olm ]; then ln -sfn "$(dirname "$out")/crds" "$bin/olm-crds"; fi
  if [ "$name" = cert-manager-controller ] && [ ! -d "$(dirname "$out")/crds" ]; then
    # cert-manager's CRDs ship in its module (deploy/crds).
    moddir=$(module_dir "$tools_dir/cert-manager" github.com/cert-manager/cert-manager)
    cp -r "$moddir/deploy/crds" "$(dirname "$out")/crds.tmp"
    chmod -R u+w "$(dirname "$out")/crds.tmp"
    mv "$(dirname "$out")/crds.tmp" "$(dirname "$out")/crds"
  fi
  if [ "$name" = cert-manager-controller ]; then ln -sfn "$(dirname "$out")/crds" "$bin/cert-manager-crds"; fi
done

# The Prometheus Operator's ServiceMonitor and PrometheusRule CRDs ship in its module; the
# OLM e2e test installs them to see the operator create its monitoring objects. Not a tool,
# so `make tools` (no names) fetches them and `make run` does not.
monitoring_crds_version=v0.85.0
if [ ${#want[@]} -eq 0 ] || [[ " ${want[*]} " == *" monitoring-crds "* ]]; then
  crds="$cache/monitoring-crds-$monitoring_crds_version"
  if [ ! -d "$crds" ]; then
    moddir=$(module_dir "$tools_dir/olm" "github.com/prometheus-operator/prometheus-operator@$monitoring_crds_version")
    mkdir -p "$crds.tmp"
    for kind in servicemonitors prometheusrules; do
      cp "$moddir/example/prometheus-operator-crd/monitoring.coreos.com_$kind.yaml" "$crds.tmp/"
    done
    chmod -R u+w "$crds.tmp"
    mv "$crds.tmp" "$crds"
  fi
  ln -sfn "$crds" "$bin/monitoring-crds"
fi
