package redis

import (
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
			begin, mayHaveRun := reloadLoadGate(tc.st, tc.shard, tc.run)
			if begin != tc.begin || mayHaveRun != tc.wantMayHaveRun {
				t.Fatalf("begin %v, mayHaveRun %v; want %v, %v", begin, mayHaveRun, tc.begin, tc.wantMayHaveRun)
			}
		})
	}
}
