package execute

import (
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	goredis "github.com/redis/go-redis/v9"
)

// TestSmallBuffersReadLongReplies: the admin's connections have small buffers
// (conn.NodeOptions' ReadBufferSize and WriteBufferSize) and no pipeline pool of their own;
// a reply or a command many times their size still goes through whole, alone and in a
// pipeline, and a pipeline uses the one pool.
func TestSmallBuffersReadLongReplies(t *testing.T) {
	requireTools(t)
	srv := startServers(t, 1, "pw")[0]
	opts := conn.NodeOptions(srv.addr, conn.Login{Password: "pw"}, nil, 2*time.Second, 2)
	readBuffer := opts.ReadBufferSize
	c := goredis.NewClient(opts)
	defer func() { _ = c.Close() }()
	if err := c.ClusterAddSlotsRange(t.Context(), 0, 16383).Err(); err != nil {
		t.Fatal(err)
	}
	for i := 0; c.ClusterInfo(t.Context()).Val() == "" || !strings.Contains(c.ClusterInfo(t.Context()).Val(), "cluster_state:ok"); i++ {
		if i > 100 {
			t.Fatal("the node never served its slots")
		}
		time.Sleep(50 * time.Millisecond)
	}
	long := strings.Repeat("0123456789abcdef", 40*readBuffer/16) // 40 read buffers
	if err := c.Set(t.Context(), "long", long, 0).Err(); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(t.Context(), "long").Result()
	if err != nil || got != long {
		t.Fatalf("GET of a %d-byte value through %d-byte buffers: %d bytes, %v", len(long), readBuffer, len(got), err)
	}
	pipe := c.Pipeline()
	gets := []*goredis.StringCmd{pipe.Get(t.Context(), "long"), pipe.Get(t.Context(), "long")}
	info := pipe.Info(t.Context(), "everything")
	if _, err := pipe.Exec(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, g := range gets {
		if g.Val() != long {
			t.Errorf("a pipelined GET read %d bytes, want %d", len(g.Val()), len(long))
		}
	}
	if len(info.Val()) < 2000 {
		t.Errorf("INFO everything read %d bytes", len(info.Val()))
	}
	// One after the other, the commands and the pipeline share one connection: a second
	// would be the pipeline pool's, with its 128 KiB buffers.
	if clients := c.Info(t.Context(), "clients").Val(); !strings.Contains(clients, "connected_clients:1\r") {
		t.Errorf("the node has other clients than one connection after commands and a pipeline (no second pool for pipelines):\n%s", clients)
	}
}
