// Package clusterconn holds what the operator keeps open to each RedisCluster: one Admin per
// cluster across reconciles (Pool), which the RedisCluster controller opens and fences
// (Fenced) and the RedisBackup controller reads (Pool.Lookup); and the mapping of a
// cluster's pods to the observations a snapshot of its nodes starts from (PodObservations).
package clusterconn

import (
	"context"
	"crypto/tls"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/recovery"
)

// Admin is what the reconciler asks of Redis. Every topology command goes through one of
// the methods after Observe, so a test can count them.
type Admin interface {
	ClusterNodes(ctx context.Context, addr string) ([]nodes.Node, error)
	ClusterInfo(ctx context.Context, addr string) (map[string]string, error)
	Create(ctx context.Context, plan layout.Plan) error
	Observe(ctx context.Context, obs []observe.Observation)
	// InfoHeads is a quiet look's read: each node's CLUSTER INFO head (as
	// observe.Observation.InfoHead keeps it), in the order of addrs, or why it did not answer.
	InfoHeads(ctx context.Context, addrs []string) ([]string, []error)
	Run(ctx context.Context, action recovery.Action) error
	Fix(ctx context.Context, addrs []string, opts execute.MoveOptions) ([]execute.SlotFix, error)
	AddNode(ctx context.Context, newAddr, existingAddr, asReplicaOf string) error
	DelNode(ctx context.Context, clusterAddr, node string) error
	Rebalance(ctx context.Context, addrs []string, opts execute.RebalanceOptions) (execute.MoveStats, error)
	Reshard(ctx context.Context, addrs []string, n int, from []string, to string, opts execute.MoveOptions) (execute.MoveStats, error)
	MoveSlots(ctx context.Context, addrs []string, moves []layout.Move, opts execute.MoveOptions) (execute.MoveStats, error)
	Failover(ctx context.Context, replicaAddr string) error
	CheckACLRules(ctx context.Context, addr string, sets []string) ([]error, error)
	Close() error
}

// AdminFactory opens an Admin that authenticates with login, over TLS with tlsConfig when
// it is not nil.
type AdminFactory func(login conn.Login, tlsConfig *tls.Config) Admin

// DefaultAdminFactory speaks the Redis protocol with go-redis.
func DefaultAdminFactory(login conn.Login, tlsConfig *tls.Config) Admin {
	return execute.NewAdmin(login.Password, 2*time.Second).WithUser(login.User).WithTLS(tlsConfig)
}

// Fenced returns a with fence checked before every command that changes the cluster and
// before every batch of slot moves (fencedAdmin).
func Fenced(a Admin, fence func(context.Context) error) Admin {
	return fencedAdmin{Admin: a, fence: fence}
}

// fencedAdmin checks the fence before every command that changes the cluster and hands it
// to slot moves, which check it before every batch: a replica that lost the leader election
// (frozen past its lease, say) stops touching Redis at once, not when its elector notices.
type fencedAdmin struct {
	Admin
	fence func(context.Context) error
}

func (f fencedAdmin) Create(ctx context.Context, plan layout.Plan) error {
	if err := f.fence(ctx); err != nil {
		return err
	}
	return f.Admin.Create(ctx, plan)
}

func (f fencedAdmin) Run(ctx context.Context, action recovery.Action) error {
	if err := f.fence(ctx); err != nil {
		return err
	}
	return f.Admin.Run(ctx, action)
}

func (f fencedAdmin) Fix(ctx context.Context, addrs []string, opts execute.MoveOptions) ([]execute.SlotFix, error) {
	opts.Fence = f.fence
	return f.Admin.Fix(ctx, addrs, opts)
}

func (f fencedAdmin) AddNode(ctx context.Context, newAddr, existingAddr, asReplicaOf string) error {
	if err := f.fence(ctx); err != nil {
		return err
	}
	return f.Admin.AddNode(ctx, newAddr, existingAddr, asReplicaOf)
}

func (f fencedAdmin) DelNode(ctx context.Context, clusterAddr, node string) error {
	if err := f.fence(ctx); err != nil {
		return err
	}
	return f.Admin.DelNode(ctx, clusterAddr, node)
}

func (f fencedAdmin) Rebalance(ctx context.Context, addrs []string, opts execute.RebalanceOptions) (execute.MoveStats, error) {
	opts.Move.Fence = f.fence
	return f.Admin.Rebalance(ctx, addrs, opts)
}

func (f fencedAdmin) Reshard(ctx context.Context, addrs []string, n int, from []string, to string, opts execute.MoveOptions) (execute.MoveStats, error) {
	opts.Fence = f.fence
	return f.Admin.Reshard(ctx, addrs, n, from, to, opts)
}

func (f fencedAdmin) MoveSlots(ctx context.Context, addrs []string, moves []layout.Move, opts execute.MoveOptions) (execute.MoveStats, error) {
	opts.Fence = f.fence
	return f.Admin.MoveSlots(ctx, addrs, moves, opts)
}

func (f fencedAdmin) Failover(ctx context.Context, replicaAddr string) error {
	if err := f.fence(ctx); err != nil {
		return err
	}
	return f.Admin.Failover(ctx, replicaAddr)
}

func (f fencedAdmin) CheckACLRules(ctx context.Context, addr string, sets []string) ([]error, error) {
	if err := f.fence(ctx); err != nil {
		return nil, err
	}
	return f.Admin.CheckACLRules(ctx, addr, sets)
}

// Pool keeps one Admin per cluster across reconciles, so a converged reconcile reads
// every node over a connection it already has instead of dialing and authenticating again.
// An Admin is replaced when the login or the TLS configuration changes, and closed when its
// cluster is gone. The zero Pool is empty and ready to use.
type Pool struct {
	mu        sync.Mutex
	byCluster map[types.NamespacedName]Conn
}

// Conn is a cluster's pooled Admin with the login and the TLS configuration it was opened
// with.
type Conn struct {
	Admin Admin
	Login conn.Login
	TLS   *tls.Config
}

// Get returns the cluster's Admin for login and tlsConfig, opening it with open when there
// is none or the one there authenticates or verifies differently.
func (p *Pool) Get(cluster types.NamespacedName, login conn.Login, tlsConfig *tls.Config, open func() Admin) Admin {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev, ok := p.byCluster[cluster]; ok {
		if prev.Login == login && sameTLS(prev.TLS, tlsConfig) {
			return prev.Admin
		}
		_ = prev.Admin.Close()
	}
	if p.byCluster == nil {
		p.byCluster = map[types.NamespacedName]Conn{}
	}
	a := open()
	p.byCluster[cluster] = Conn{Admin: a, Login: login, TLS: tlsConfig}
	return a
}

// Lookup returns the cluster's Admin with the login and TLS configuration it was opened
// with, if a reconcile of the cluster opened one.
func (p *Pool) Lookup(cluster types.NamespacedName) (Conn, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, ok := p.byCluster[cluster]
	return prev, ok
}

// Forget closes the cluster's Admin, if any.
func (p *Pool) Forget(cluster types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if prev, ok := p.byCluster[cluster]; ok {
		_ = prev.Admin.Close()
		delete(p.byCluster, cluster)
	}
}

// sameTLS reports whether a and b verify the nodes alike: both plain text, or the same CAs
// and server name.
func sameTLS(a, b *tls.Config) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.ServerName == b.ServerName && a.RootCAs.Equal(b.RootCAs)
}
