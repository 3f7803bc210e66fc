package redis

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// nodeValues remembers, per cluster, which node processes are known to run with a value
// (the certificate they serve, the cluster-require-full-coverage set on them): by address,
// with the process's start, so a restarted process is not taken for the one seen before.
// A converged cluster then costs no check and no command for it.
type nodeValues struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]seenValue
}

type seenValue struct {
	value string
	nodes map[string]time.Time // address -> process start
}

// has reports whether o's process is known to run with value (a start within 1.5 s of the
// one recorded: the start is read as now minus the uptime).
func (c *nodeValues) has(cluster types.NamespacedName, value string, o *observe.Observation) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen, ok := c.seen[cluster]
	if !ok || seen.value != value {
		return false
	}
	started, ok := seen.nodes[o.Addr]
	return ok && !o.Started.IsZero() && (o.Started.Sub(started)).Abs() <= 1500*time.Millisecond
}

// mark records that o's process runs with value; marking another value forgets the others.
func (c *nodeValues) mark(cluster types.NamespacedName, value string, o *observe.Observation) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[types.NamespacedName]seenValue{}
	}
	seen := c.seen[cluster]
	if seen.value != value || seen.nodes == nil {
		seen = seenValue{value: value, nodes: map[string]time.Time{}}
	}
	seen.nodes[o.Addr] = o.Started
	c.seen[cluster] = seen
}

// forget drops what was seen of a cluster.
func (c *nodeValues) forget(cluster types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, cluster)
}
