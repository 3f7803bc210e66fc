package redisarchive_test

import (
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// TestWithReplayUser: on a node whose operator user may run none of the application's
// commands (as with spec.acl), the replay user WithReplayUser makes writes and flushes;
// once done, it can no longer log in.
func TestWithReplayUser(t *testing.T) {
	src := testredis.Start(t, t.TempDir(), goredis.Options{}, "--user", "mwo-operator", "on", ">operator-pw", "~*", "resetchannels", "-@all", "+ping", "+acl|setuser")
	ctx := t.Context()
	as := func(o rdbstream.Options) *goredis.Client {
		c := goredis.NewClient(&goredis.Options{Addr: o.Addr, Username: o.Username, Password: o.Password, Protocol: 2, DisableIdentity: true, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	operator := rdbstream.Options{Addr: src.Addr, Username: "mwo-operator", Password: "operator-pw"}
	if err := as(operator).Set(ctx, "k", "v", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOPERM") {
		t.Fatalf("the operator's user wrote a key (%v): the test's premise does not hold", err)
	}
	replay, done, err := redisarchive.WithReplayUser(ctx, operator)
	if err != nil {
		t.Fatal(err)
	}
	if replay.Username != redisarchive.ReplayUser || replay.Password == "" || replay.Password == operator.Password {
		t.Fatalf("replay options %+v: want the replay user with a password of its own", replay)
	}
	c := as(replay)
	for _, cmd := range [][]any{{"SET", "k", "v"}, {"FLUSHALL"}, {"RESTORE", "r", "0", mustDump(t, src.Client)}} {
		if err := c.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v as the replay user: %v", cmd[0], err)
		}
	}
	_ = c.Close()
	if err := done(ctx); err != nil {
		t.Fatal(err)
	}
	if err := as(replay).Ping(ctx).Err(); err == nil {
		t.Fatal("the replay user still logs in once done")
	}
}

// mustDump is a DUMP payload of a string, as an archive's RESTOREs carry.
func mustDump(t *testing.T, c *goredis.Client) string {
	t.Helper()
	if err := c.Set(t.Context(), "dumped", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	payload, err := c.Dump(t.Context(), "dumped").Result()
	if err != nil {
		t.Fatal(err)
	}
	return payload
}
