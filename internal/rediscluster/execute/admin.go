package execute

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// defaultWaitTimeout bounds Create, AddNode and Failover when their context has no
// deadline.
const defaultWaitTimeout = 2 * time.Minute

// Admin administers Redis Cluster nodes over the Redis protocol, on the pooled connections
// of its conn.Pool (one plain, non-cluster, client per node address, kept until Close). It
// is safe for concurrent use.
type Admin struct {
	*conn.Pool
}

// NewAdmin returns an Admin that authenticates with password (none when empty) and gives
// up connecting to a node after dialTimeout.
func NewAdmin(password string, dialTimeout time.Duration) *Admin {
	return &Admin{conn.NewPool(password, dialTimeout)}
}

// WithUser makes the Admin authenticate as user (an ACL user; "" for the default user) with
// its password. Call it before the first command. MIGRATE then authenticates to the target
// as the same user (AUTH2).
func (a *Admin) WithUser(user string) *Admin {
	a.Pool.WithUser(user)
	return a
}

// WithTLS makes the Admin speak TLS with cfg (nil: plain text) to every node. Call it before
// the first command. MIGRATE between nodes then runs over TLS too, by the nodes themselves,
// when they run with tls-cluster yes.
func (a *Admin) WithTLS(cfg *tls.Config) *Admin {
	a.Pool.WithTLS(cfg)
	return a
}

// Observe reads one snapshot of the nodes at obs[i].Addr over the Admin's pooled
// connections (see observe.Observe).
func (a *Admin) Observe(ctx context.Context, obs []observe.Observation) {
	observe.Observe(ctx, a.Pool, obs)
}

// InfoHeads reads the head of every node's CLUSTER INFO for a quiet look (see
// observe.InfoHeads).
func (a *Admin) InfoHeads(ctx context.Context, addrs []string) ([]string, []error) {
	return observe.InfoHeads(ctx, a.Pool, addrs)
}
