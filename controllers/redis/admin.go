package redis

import (
	"context"
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

// AdminFactory opens an Admin that authenticates with password.
type AdminFactory func(password string) Admin

// DefaultAdminFactory speaks the Redis protocol with go-redis.
func DefaultAdminFactory(password string) Admin { return redisadmin.NewAdmin(password, 2*time.Second) }
