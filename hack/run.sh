#!/usr/bin/env bash
# `make run`: runs the operator against the cluster KUBECONFIG (or ~/.kube/config) points
# at. When no cluster answers there, it starts the local cluster first, in the background,
# and stops it when the operator stops.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/bin"
cd "$root"

reachable() { "$bin/kubectl" version --request-timeout=3s >/dev/null 2>&1; }

# The operator and the cluster run in the background and the script waits for them, so a
# SIGINT or SIGTERM to the script (or its process group) runs cleanup at once: the operator
# stops, then the cluster, which stops every redis-server it runs.
cluster_pid=""
manager_pid=""
cleanup() {
  trap - EXIT INT TERM
  if [ -n "$manager_pid" ]; then kill -TERM "$manager_pid" 2>/dev/null || true; wait "$manager_pid" 2>/dev/null || true; fi
  if [ -n "$cluster_pid" ]; then kill -TERM "$cluster_pid" 2>/dev/null || true; wait "$cluster_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

if ! { [ -n "${KUBECONFIG:-}" ] || [ -f "$HOME/.kube/config" ]; } || ! reachable; then
  state="${XDG_CACHE_HOME:-$HOME/.cache}/middleware-operator/run"
  mkdir -p "$state"
  export KUBECONFIG="$state/kubeconfig"
  objectstore_env="$state/objectstore.env"
  rm -f "$KUBECONFIG" "$objectstore_env"
  echo "no reachable cluster configured: starting the local cluster (logs in $state/cluster.log)"
  go build -o "$bin/localcluster" ./hack/localcluster
  "$bin/localcluster" -nodes 3 -kubeconfig-out "$KUBECONFIG" -object-store-env-out "$objectstore_env" >"$state/cluster.log" 2>&1 &
  cluster_pid=$!
  for _ in $(seq 1 600); do
    [ -s "$KUBECONFIG" ] && break
    kill -0 "$cluster_pid" 2>/dev/null || { cat "$state/cluster.log"; exit 1; }
    sleep 0.1
  done
  cat <<MSG

The local cluster is up. In another terminal:

  export KUBECONFIG=$KUBECONFIG PATH=$bin:\$PATH
  kubectl apply -f config/samples/apps_v1_appservice.yaml
  kubectl get appservices,deployments,services,pods
  kubectl apply -f config/samples/apps_v1_cloudmanager.yaml
  kubectl get cloudmanagers
  kubectl apply -f config/samples/redis_v1alpha1_rediscluster.yaml
  kubectl get redisclusters -w          # Running with 16384 slots OK in about 15 s

An S3-compatible object store (versitygw) serves a bucket for backups (also in $objectstore_env):

$(sed 's/^/  /' "$objectstore_env")

Redis pods run real redis-server processes at their pod IPs (127.1.x.x); to use one:

  REDISCLI_AUTH=\$(kubectl get secret redis-cluster-password -o jsonpath='{.data.password}' | base64 -d) \\
    redis-cli -c -h \$(kubectl get pod redis-cluster-0 -o jsonpath='{.status.podIP}') set hello world

Ctrl-C stops the operator, the cluster and every redis-server.

MSG
fi

echo "installing the CRDs"
"$bin/kustomize" build config/crd | "$bin/kubectl" apply --server-side -f - >/dev/null
"$bin/kubectl" wait --for condition=Established --timeout=60s -f config/crd/bases >/dev/null
go build -o "$bin/manager" .
echo "running the operator (metrics on ${METRICS_ADDR:-:8443}, probes on ${PROBE_ADDR:-:8081})"
"$bin/manager" --metrics-bind-address="${METRICS_ADDR:-:8443}" --health-probe-bind-address="${PROBE_ADDR:-:8081}" "$@" &
manager_pid=$!
wait "$manager_pid"
