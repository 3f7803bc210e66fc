package report

import (
	"errors"
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// memoryNode is an answering node of pod: a master serving slots or a replica, with used
// and maxmemory bytes.
func memoryNode(pod string, master bool, used, maxMemory string) observe.Observation {
	self := nodes.Node{ID: pod + "-id", Myself: true, Role: nodes.RoleSlave}
	if master {
		self.Role, self.Slots = nodes.RoleMaster, []nodes.SlotRange{{Start: 0, End: 10}}
	}
	return observe.Observation{Pod: pod, Addr: "127.1.0.1:6379", View: []nodes.Node{self, {ID: "other"}},
		Replication: map[string]string{"used_memory": used, "maxmemory": maxMemory, "maxmemory_policy": "noeviction"}}
}

// TestMemoryStatus: the status names where maxmemory comes from, the fullest master (never
// a replica, however full), and each node's share; without maxmemory no share.
func TestMemoryStatus(t *testing.T) {
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns"}}
	s := &Input{Cluster: rc, Next: rc.DeepCopy()}
	s.Snap = observe.Snapshot{Now: time.Now(), Nodes: []observe.Observation{
		memoryNode("cache-0", true, "500", "1000"), memoryNode("cache-1", true, "870", "1000"),
		memoryNode("cache-2", false, "990", "1000"), {Pod: "cache-3", Err: errors.New("connection refused")},
	}}
	s.Next.Status.Nodes = []redisv1alpha1.RedisNode{{Name: "cache-0"}, {Name: "cache-1"}, {Name: "cache-2"}, {Name: "cache-3"}}
	s.Memory = resources.RedisMemory{MaxMemory: 1000, Policy: "noeviction", Source: redisv1alpha1.MaxMemoryFromUserConfig, Known: true}
	memoryStatus(s)
	m := s.Next.Status.Memory
	if m == nil || m.Source != redisv1alpha1.MaxMemoryFromUserConfig || m.MaxMemory != 1000 || m.FullestMaster != "cache-1" ||
		m.FullestMasterPercent == nil || *m.FullestMasterPercent != 87 {
		t.Fatalf("status.memory %+v", m)
	}
	for i, want := range []int32{50, 87, 99, -1} {
		n := s.Next.Status.Nodes[i]
		if (want < 0) != (n.MemoryPercent == nil) || (want >= 0 && *n.MemoryPercent != want) {
			t.Errorf("%s: memoryPercent %v, want %d", n.Name, n.MemoryPercent, want)
		}
	}

	s.Memory = resources.RedisMemory{Policy: "noeviction", Source: redisv1alpha1.MaxMemoryNone, Known: true}
	for i := range s.Snap.Nodes {
		if r := s.Snap.Nodes[i].Replication; r != nil {
			r["maxmemory"] = "0"
		}
	}
	memoryStatus(s)
	if m := s.Next.Status.Memory; m == nil || m.Source != redisv1alpha1.MaxMemoryNone || m.FullestMaster != "" || m.FullestMasterPercent != nil {
		t.Errorf("without maxmemory: status.memory %+v", m)
	}
	if p := s.Next.Status.Nodes[0].MemoryPercent; p != nil {
		t.Errorf("without maxmemory a node has memoryPercent %d", *p)
	}
}

// TestIncreases: a node's count that rose adds the rise; one that fell (the node restarted)
// adds all of it; one seen the first time adds nothing; a node that did not answer keeps
// its last count while its pod exists.
func TestIncreases(t *testing.T) {
	var counts NodeCounts
	key := types.NamespacedName{Namespace: "ns", Name: "increases"}
	pods := map[string]bool{"a": true, "b": true}
	steps := []struct {
		counts, want map[string]int64
	}{
		{counts: map[string]int64{"evicted/a": 5, "evicted/b": 7}, want: map[string]int64{}},
		{counts: map[string]int64{"evicted/a": 9, "evicted/b": 7}, want: map[string]int64{"evicted/a": 4, "evicted/b": 0}},
		{counts: map[string]int64{"evicted/a": 2, "evicted/b": 8}, want: map[string]int64{"evicted/a": 2, "evicted/b": 1}},
		{counts: map[string]int64{"evicted/a": 3}, want: map[string]int64{"evicted/a": 1}}, // b silent
		{counts: map[string]int64{"evicted/a": 3, "evicted/b": 10}, want: map[string]int64{"evicted/a": 0, "evicted/b": 2}},
	}
	for i, step := range steps {
		if got := counts.increases(key, step.counts, pods); !maps.Equal(got, step.want) {
			t.Errorf("look %d: increases %v, want %v", i, got, step.want)
		}
	}
	delete(pods, "b") // b is gone: forgotten
	counts.increases(key, map[string]int64{"evicted/a": 3}, pods)
	if got := counts.increases(key, map[string]int64{"evicted/a": 3, "evicted/b": 4}, map[string]bool{"a": true, "b": true}); hasKey(got, "evicted/b") {
		t.Errorf("a new pod b's first count was added: %v", got)
	}
}

// TestNodeCountsForget: a cluster forgotten (deleted) leaves nothing behind, and a cluster
// of the same name made again starts from its first look: its first counts add nothing.
func TestNodeCountsForget(t *testing.T) {
	var counts NodeCounts
	key := types.NamespacedName{Namespace: "ns", Name: "forgotten"}
	pods := map[string]bool{"a": true}
	counts.increases(key, map[string]int64{"evicted/a": 5}, pods)
	counts.Forget(key)
	if n := len(counts.last); n != 0 {
		t.Fatalf("%d clusters kept after Forget, want 0", n)
	}
	if got := counts.increases(key, map[string]int64{"evicted/a": 9}, pods); len(got) != 0 {
		t.Errorf("the first look after Forget added %v, want nothing", got)
	}
}
