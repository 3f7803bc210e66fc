package redisarchive_test

import (
	"errors"
	"os"
	"regexp"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// TestArchiveInTheObjectStore archives into the object store the local cluster runs, under a
// backup prefix, and replays from there: the segments are named
// <cluster>/archive/<shard>/<timeline>/<start offset>.seg.
func TestArchiveInTheObjectStore(t *testing.T) {
	store, err := localcluster.StartObjectStore(t.Context(), localcluster.ObjectStoreOptions{Dir: t.TempDir(), PlainHTTP: true})
	if errors.Is(err, os.ErrNotExist) && os.Getenv("CI") == "" {
		t.Skipf("versitygw is not built (make tools): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Stop)
	cfg := store.Config()
	cfg.Prefix = "/backups/"
	client, err := objectstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sink := redisarchive.StoreSink{Client: client}

	src := testredis.Start(t, t.TempDir(), goredis.Options{})
	testredis.Dataset{Strings: 500, Others: 10}.Write(t, src.Client)
	dir, b := base(t, src)
	f := follow(t, redisarchive.Options{Conn: rdbstream.Options{Addr: src.Addr}, From: redisarchive.Position{ReplID: b.ReplID, Offset: b.Offset}, Sink: sink})
	mixedWrites(t, src.Client)
	f.caughtUp(t, src.Client)
	f.stop(t)
	names, err := sink.List(t.Context(), "")
	if err != nil || len(names) == 0 {
		t.Fatalf("List = %v, %v", names, err)
	}
	layout := regexp.MustCompile(`^demo/archive/shard-000/00000001/[0-9]{20}\.seg$`)
	for _, n := range names {
		if !layout.MatchString(n) {
			t.Fatalf("segment named %q", n)
		}
	}
	t.Logf("%d segments in %s, the first %s", len(names), client.Location(), names[0])
	dst := testredis.Restore(t, dir)
	replay(t, sink, dst, redisarchive.ReplayOptions{From: b.Offset})
	same(t, snapshot(t, src.Client), snapshot(t, dst))
}
