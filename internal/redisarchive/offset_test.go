package redisarchive_test

import (
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// TestReplicationOffset: the offset read is the node's master_repl_offset, and it covers a
// write acknowledged just before. (A node keeps no offset until a replica or a base's
// snapshot made it keep a backlog: a new timeline's base does.)
func TestReplicationOffset(t *testing.T) {
	src := testredis.StartClusterNode(t, t.TempDir(), goredis.Options{})
	base(t, src)
	before, err := redisarchive.ReplicationOffset(t.Context(), rdbstream.Options{Addr: src.Addr})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Client.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	after, err := redisarchive.ReplicationOffset(t.Context(), rdbstream.Options{Addr: src.Addr})
	if err != nil {
		t.Fatal(err)
	}
	if want := replOffset(t, src.Client); after != want || after <= before {
		t.Errorf("offsets %d then %d around a write; INFO says %d: want the second to be INFO's and above the first", before, after, want)
	}
	if _, err := redisarchive.ReplicationOffset(t.Context(), rdbstream.Options{Addr: src.Addr, Password: "wrong"}); err == nil {
		t.Error("a refused AUTH read an offset, want an error")
	}
}
