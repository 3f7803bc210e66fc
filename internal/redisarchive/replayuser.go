package redisarchive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// ReplayUser is the Redis user a replay logs in as on a node with ACL users (a RedisCluster
// with spec.acl): the operator's own user may run none of the application's commands, and
// the application's default user none of the dangerous ones an archive holds (FLUSHALL,
// RESTORE, SWAPDB...).
const ReplayUser = "mwo-replay"

// WithReplayUser makes, on node (logged in as a user that may run ACL SETUSER), the user
// ReplayUser with every key, channel and command and a random password that is never
// stored, and returns node's options logged in as it. done switches the user off again and
// drops its password; the replay's connections stay open only as long as the replay. A
// node restarted forgets the user (its users come from its configuration).
func WithReplayUser(ctx context.Context, node rdbstream.Options) (replay rdbstream.Options, done func(context.Context) error, err error) {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return node, nil, err
	}
	password := hex.EncodeToString(secret)
	setUser := func(ctx context.Context, rules ...any) error {
		c := goredis.NewClient(&goredis.Options{Addr: node.Addr, Protocol: 2, DisableIdentity: true, PoolSize: 1, MaxRetries: -1,
			Dialer: func(ctx context.Context, _, _ string) (net.Conn, error) { return rdbstream.Dial(ctx, node) }})
		defer func() { _ = c.Close() }()
		if err := c.Do(ctx, append([]any{"ACL", "SETUSER", ReplayUser}, rules...)...).Err(); err != nil {
			return fmt.Errorf("while setting the replay user %s on %s: %w", ReplayUser, node.Addr, err)
		}
		return nil
	}
	if err := setUser(ctx, "reset", "on", ">"+password, "~*", "&*", "+@all"); err != nil {
		return node, nil, err
	}
	replay = node
	replay.Username, replay.Password = ReplayUser, password
	return replay, func(ctx context.Context) error { return setUser(ctx, "reset", "off") }, nil
}
