package restore

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backup"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// TestParseTarget: latest is the zero time, an RFC 3339 time is itself, anything else is
// refused naming the field and how to write it.
func TestParseTarget(t *testing.T) {
	if at, err := ParseTarget(TargetLatest); err != nil || !at.IsZero() {
		t.Fatalf("latest: %v, %v; want the zero time", at, err)
	}
	want := time.Date(2026, 11, 28, 23, 15, 0, 500, time.UTC)
	if at, err := ParseTarget("2026-11-28T23:15:00.0000005Z"); err != nil || !at.Equal(want) {
		t.Fatalf("a time: %v, %v; want %v", at, err, want)
	}
	_, err := ParseTarget("yesterday")
	if err == nil || !strings.Contains(err.Error(), "spec.restore.archive.targetTime") || !strings.Contains(err.Error(), "or latest") {
		t.Fatalf("a bad time: %v; want an error naming the field and the fix", err)
	}
}

// TestArchiveFolder: the destination's path without its slashes, the namespace without one.
func TestArchiveFolder(t *testing.T) {
	for path, want := range map[string]string{"": "team-a", "/": "team-a", "/archives/": "archives", "a/b": "a/b"} {
		if got := ArchiveFolder("team-a", redisv1alpha1.ObjectStore{Path: path}); got != want {
			t.Errorf("ArchiveFolder(path %q) = %q, want %q", path, got, want)
		}
	}
}

// TestSourcesKeepFailedReadsForTheirBackOff: a source read whole is kept until it is dropped
// or its cluster forgotten; one whose store failed only until its back-off ends, so the next
// look reads the store again.
func TestSourcesKeepFailedReadsForTheirBackOff(t *testing.T) {
	var c Sources
	cluster := types.NamespacedName{Namespace: "ns", Name: "rc"}
	read := backupstore.FailureKey{Object: cluster, What: "restore"}
	failed := backupstore.FailureKey{Object: cluster, What: "reload from b1"}
	whole := &Source{Manifest: &backup.Manifest{}}
	c.Keep(read, whole, time.Time{})
	c.Keep(failed, &Source{Problem: "access denied", StoreFailed: true}, time.Now().Add(time.Hour))
	if c.Get(read) != whole || c.Get(failed) == nil {
		t.Fatal("the sources were not kept")
	}
	c.Keep(failed, &Source{Problem: "access denied", StoreFailed: true}, time.Now().Add(-time.Second))
	if c.Get(failed) != nil {
		t.Fatal("a failed read was kept past its back-off")
	}
	c.Drop(read)
	if c.Get(read) != nil {
		t.Fatal("a dropped source is still kept")
	}
	c.Keep(read, whole, time.Time{})
	c.Forget(cluster)
	if c.Get(read) != nil {
		t.Fatal("a forgotten cluster's source is still kept")
	}
}

// TestShardSlots: each shard's ranges, in the manifest's order; none before the manifest is
// read.
func TestShardSlots(t *testing.T) {
	if got := (&Source{}).ShardSlots(); got != nil {
		t.Fatalf("no manifest: %v", got)
	}
	src := &Source{Manifest: &backup.Manifest{Shards: []backup.Shard{
		{Slots: []backup.SlotRange{{Start: 0, End: 99}, {Start: 200, End: 299}}},
		{Slots: []backup.SlotRange{{Start: 100, End: 199}}},
	}}}
	got := src.ShardSlots()
	if len(got) != 2 || nodes.FormatSlotRanges(got[0]) != "0-99,200-299" || nodes.FormatSlotRanges(got[1]) != "100-199" {
		t.Fatalf("ShardSlots = %v", got)
	}
}
