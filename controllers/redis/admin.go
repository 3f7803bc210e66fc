package redis

import (
	"context"
	"crypto/tls"
	"time"

	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
)

// Admin is what the reconciler asks of Redis. Every topology command goes through one of
// the methods after Observe, so a test can count them.
type Admin interface {
	ClusterNodes(ctx context.Context, addr string) ([]redisadmin.Node, error)
	ClusterInfo(ctx context.Context, addr string) (map[string]string, error)
	Create(ctx context.Context, plan redisadmin.Plan) error
	Observe(ctx context.Context, obs []redisadmin.Observation)
	Run(ctx context.Context, action redisadmin.Action) error
	Fix(ctx context.Context, addrs []string, opts redisadmin.MoveOptions) ([]redisadmin.SlotFix, error)
	AddNode(ctx context.Context, newAddr, existingAddr, asReplicaOf string) error
	DelNode(ctx context.Context, clusterAddr, node string) error
	Rebalance(ctx context.Context, addrs []string, opts redisadmin.RebalanceOptions) (redisadmin.MoveStats, error)
	Reshard(ctx context.Context, addrs []string, n int, from []string, to string, opts redisadmin.MoveOptions) (redisadmin.MoveStats, error)
	Failover(ctx context.Context, replicaAddr string) error
	Close() error
}

// AdminFactory opens an Admin that authenticates with login, over TLS with tlsConfig when
// it is not nil.
type AdminFactory func(login redisadmin.Login, tlsConfig *tls.Config) Admin

// DefaultAdminFactory speaks the Redis protocol with go-redis.
func DefaultAdminFactory(login redisadmin.Login, tlsConfig *tls.Config) Admin {
	return redisadmin.NewAdmin(login.Password, 2*time.Second).WithUser(login.User).WithTLS(tlsConfig)
}

// fencedAdmin checks the fence before every command that changes the cluster and hands it
// to slot moves, which check it before every batch: a replica that lost the leader election
// (frozen past its lease, say) stops touching Redis at once, not when its elector notices.
type fencedAdmin struct {
	Admin
	fence func(context.Context) error
}

func (f fencedAdmin) Create(ctx context.Context, plan redisadmin.Plan) error {
	if err := f.fence(ctx); err != nil {
		return err
	}
	return f.Admin.Create(ctx, plan)
}

func (f fencedAdmin) Run(ctx context.Context, action redisadmin.Action) error {
	if err := f.fence(ctx); err != nil {
		return err
	}
	return f.Admin.Run(ctx, action)
}

func (f fencedAdmin) Fix(ctx context.Context, addrs []string, opts redisadmin.MoveOptions) ([]redisadmin.SlotFix, error) {
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

func (f fencedAdmin) Rebalance(ctx context.Context, addrs []string, opts redisadmin.RebalanceOptions) (redisadmin.MoveStats, error) {
	opts.Move.Fence = f.fence
	return f.Admin.Rebalance(ctx, addrs, opts)
}

func (f fencedAdmin) Reshard(ctx context.Context, addrs []string, n int, from []string, to string, opts redisadmin.MoveOptions) (redisadmin.MoveStats, error) {
	opts.Fence = f.fence
	return f.Admin.Reshard(ctx, addrs, n, from, to, opts)
}

func (f fencedAdmin) Failover(ctx context.Context, replicaAddr string) error {
	if err := f.fence(ctx); err != nil {
		return err
	}
	return f.Admin.Failover(ctx, replicaAddr)
}
