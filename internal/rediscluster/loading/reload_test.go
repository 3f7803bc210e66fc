package loading

import (
	"strings"
	"testing"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/restore"
)

// TestReloadLoadGate: a reload's load from the archive begins only once the status shows it
// recorded; it is a retry (its slots emptied first) exactly when the record names another
// operator run, which is what a restarted operator finds after dying during the replay.
func TestReloadLoadGate(t *testing.T) {
	first, restarted := restore.NewLoads().Run(), restore.NewLoads().Run()
	if first == "" || first == restarted {
		t.Fatalf("runs %q and %q: each operator process needs a name of its own", first, restarted)
	}
	begun := &redisv1alpha1.ShardReloadStatus{StartedLoads: []redisv1alpha1.ShardLoadStart{{Shard: 1, Run: first}}}
	for name, tc := range map[string]struct {
		st                    *redisv1alpha1.ShardReloadStatus
		shard                 int32
		run                   string
		begin, wantMayHaveRun bool
	}{
		"no reload":                                  {st: nil, shard: 1, run: first},
		"not recorded yet: record first":             {st: &redisv1alpha1.ShardReloadStatus{}, shard: 1, run: first},
		"another shard's record does not count":      {st: begun, shard: 0, run: first},
		"recorded by this run: its first load":       {st: begun, shard: 1, run: first, begin: true},
		"recorded by another run: empty, then again": {st: begun, shard: 1, run: restarted, begin: true, wantMayHaveRun: true},
	} {
		t.Run(name, func(t *testing.T) {
			begin, mayHaveRun := loadGate(tc.st, tc.shard, tc.run)
			if begin != tc.begin || mayHaveRun != tc.wantMayHaveRun {
				t.Fatalf("begin %v, mayHaveRun %v; want %v, %v", begin, mayHaveRun, tc.begin, tc.wantMayHaveRun)
			}
		})
	}
}

// TestReloadInThePlannersTerms: no reload without a record or a source; the record's
// loaded shards and the source's problem reach the planner, and a record whose slots do not
// parse is a problem naming status.reload.slots, never a reload of no slots.
func TestReloadInThePlannersTerms(t *testing.T) {
	rc := &redisv1alpha1.RedisCluster{}
	src := &restore.Source{Problem: "the store answers 403"}
	if Reload(rc, src) != nil || Reload(&redisv1alpha1.RedisCluster{Status: redisv1alpha1.RedisClusterStatus{Reload: &redisv1alpha1.ShardReloadStatus{}}}, nil) != nil {
		t.Fatal("a reload without a record, or without its source read, reached the planner")
	}
	rc.Status.Reload = &redisv1alpha1.ShardReloadStatus{Backup: "nightly", Slots: "0-99,200", LoadedShards: []int32{2}}
	got := Reload(rc, src)
	if got == nil || len(got.Slots) != 2 || got.Problem != src.Problem || len(got.Loaded) != 1 || got.Loaded[0] != 2 || got.Source != "nightly" {
		t.Fatalf("reload %+v: want slots 0-99 and 200, shard 2 loaded, the source's problem", got)
	}
	rc.Status.Reload.Slots = "0-banana"
	if got := Reload(rc, &restore.Source{}); got == nil || !strings.Contains(got.Problem, `status.reload.slots "0-banana"`) {
		t.Fatalf("reload of unparsable slots %+v: want a problem naming status.reload.slots", got)
	}
	if Restore(rc, nil) != nil {
		t.Error("a restore with no source reached the planner")
	}
}
