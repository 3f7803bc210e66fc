package redis

import (
	"context"
	"time"

	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
)

// Admin is what the reconciler asks of Redis. Topology commands (slot assignment, MEET,
// REPLICATE) are only issued through Create and Heal, so a test can count them.
type Admin interface {
	ClusterNodes(ctx context.Context, addr string) ([]redisadmin.Node, error)
	ClusterInfo(ctx context.Context, addr string) (map[string]string, error)
	Create(ctx context.Context, plan redisadmin.Plan) error
	Heal(ctx context.Context, addrs []string) (int, error)
	Close() error
}

// AdminFactory opens an Admin that authenticates with password.
type AdminFactory func(password string) Admin

// DefaultAdminFactory speaks the Redis protocol with go-redis.
func DefaultAdminFactory(password string) Admin { return redisadmin.NewAdmin(password, 2*time.Second) }
