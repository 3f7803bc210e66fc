package redis

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// statusConflicts counts status writes refused because the status was computed from a
// stale RedisCluster (the reconcile then looks again instead of failing).
var statusConflicts = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "middleware_operator_rediscluster_status_conflicts_total",
	Help: "RedisCluster status writes refused on a conflict (computed from a stale object).",
})

func init() { metrics.Registry.MustRegister(statusConflicts) }
