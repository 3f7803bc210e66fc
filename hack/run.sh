#!/usr/bin/env bash
# `make run`: runs the operator against the cluster KUBECONFIG (or ~/.kube/config) points
# at. When no cluster answers there, it starts the local cluster first, in the background,
# and stops it when the operator stops.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/bin"
cd "$root"

reachable() { "$bin/kubectl" version --request-timeout=3s >/dev/null 2>&1; }

cluster_pid=""
cleanup() {
  if [ -n "$cluster_pid" ]; then kill -INT "$cluster_pid" 2>/dev/null || true; wait "$cluster_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT INT TERM

if ! { [ -n "${KUBECONFIG:-}" ] || [ -f "$HOME/.kube/config" ]; } || ! reachable; then
  state="${XDG_CACHE_HOME:-$HOME/.cache}/middleware-operator/run"
  mkdir -p "$state"
  export KUBECONFIG="$state/kubeconfig"
  rm -f "$KUBECONFIG"
  echo "no reachable cluster configured: starting the local cluster (logs in $state/cluster.log)"
  go build -o "$bin/localcluster" ./hack/localcluster
  "$bin/localcluster" -nodes 3 -kubeconfig-out "$KUBECONFIG" >"$state/cluster.log" 2>&1 &
  cluster_pid=$!
  for _ in $(seq 1 600); do
    [ -s "$KUBECONFIG" ] && break
    kill -0 "$cluster_pid" 2>/dev/null || { cat "$state/cluster.log"; exit 1; }
    sleep 0.1
  done
  cat <<MSG

The local cluster is up. In another terminal:

  export KUBECONFIG=$KUBECONFIG
  kubectl apply -f config/samples/apps_v1_appservice.yaml
  kubectl get appservices,deployments,services,pods

(kubectl is in $bin.) Ctrl-C stops the operator and the cluster.

MSG
fi

echo "installing the CRDs"
"$bin/kustomize" build config/crd | "$bin/kubectl" apply --server-side -f - >/dev/null
"$bin/kubectl" wait --for condition=Established --timeout=60s -f config/crd/bases >/dev/null
echo "running the operator (metrics on :8443, probes on :8081)"
go build -o "$bin/manager" .
"$bin/manager" --metrics-bind-address="${METRICS_ADDR:-:8443}" --health-probe-bind-address="${PROBE_ADDR:-:8081}" "$@"
