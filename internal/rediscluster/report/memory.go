package report

import (
	"maps"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// nodeMemories is the memory of every answering node, by pod, and the master serving slots
// whose used memory is the largest share of its maxmemory ("" when none has maxmemory),
// with that share (0 to 1).
func nodeMemories(s *Input) (byPod map[string]observe.NodeMemory, fullest string, share float64) {
	byPod = map[string]observe.NodeMemory{}
	for i := range s.Snap.Nodes {
		o := &s.Snap.Nodes[i]
		if !o.Answered() {
			continue
		}
		nm := observe.MemoryOf(o)
		byPod[o.Pod] = nm
		if self, _ := o.Self(); self.IsMaster() && len(self.Slots) > 0 && nm.MaxMemory > 0 {
			if r := float64(nm.Used) / float64(nm.MaxMemory); fullest == "" || r > share {
				fullest, share = o.Pod, r
			}
		}
	}
	return byPod, fullest, share
}

// memoryStatus sets the cluster's memory status, and each node's, from the snapshot.
func memoryStatus(s *Input) {
	if s.Snap.Now.IsZero() {
		return
	}
	if s.Memory.Policy == "" {
		s.Next.Status.Memory = nil // the configuration could not be read this look
		return
	}
	byPod, fullest, _ := nodeMemories(s)
	m := &redisv1alpha1.MemoryStatus{MaxMemory: s.Memory.MaxMemory, Policy: s.Memory.Policy, Source: s.Memory.Source}
	if percent, ok := byPod[fullest].Percent(); ok {
		m.FullestMaster, m.FullestMasterPercent = fullest, ptr.To(percent)
	}
	for i := range s.Next.Status.Nodes {
		n := &s.Next.Status.Nodes[i]
		nm := byPod[n.Name]
		n.MaxMemory, n.MemoryPercent = nm.MaxMemory, nil
		if percent, ok := nm.Percent(); ok {
			n.MemoryPercent = ptr.To(percent)
		}
	}
	s.Next.Status.Memory = m
}

// NodeCounts keeps, per cluster, the last value of each node's counts (evicted keys, refused
// writes, container restarts), which fall back to 0 when a node or pod restarts, so that
// only their increases are added to the cluster's counters. The zero value is ready.
type NodeCounts struct {
	mu   sync.Mutex
	last map[types.NamespacedName]map[string]int64
}

// Forget drops what c keeps of a cluster that is gone.
func (c *NodeCounts) Forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, key)
}

func (c *NodeCounts) increases(key types.NamespacedName, counts map[string]int64, pods map[string]bool) map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[types.NamespacedName]map[string]int64{}
	}
	last := c.last[key]
	out := map[string]int64{}
	for id, cur := range counts {
		before, seen := last[id]
		switch {
		case !seen:
		case cur >= before:
			out[id] = cur - before
		default:
			out[id] = cur
		}
	}
	keep := maps.Clone(counts)
	for id, n := range last {
		if _, pod, _ := strings.Cut(id, "/"); pods[pod] && !hasKey(counts, id) {
			keep[id] = n
		}
	}
	c.last[key] = keep
	return out
}

// hasKey reports whether m has k.
func hasKey(m map[string]int64, k string) bool { _, ok := m[k]; return ok }

// recordMemoryMetrics sets the cluster's memory gauges from the snapshot (the masters'
// used memory and maxmemory, the fullest master's share, the highest fragmentation), and
// adds to its counters the nodes' new evictions and refused writes and the redis
// containers' new restarts, those after an OOM kill apart.
func recordMemoryMetrics(s *Input, counters *NodeCounts) {
	ns, name := s.Cluster.Namespace, s.Cluster.Name
	byPod, _, fullest := nodeMemories(s)
	var used, maxMemory int64
	fragmentation := 0.0
	counts := map[string]int64{}
	for i := range s.Snap.Nodes {
		o := &s.Snap.Nodes[i]
		nm, ok := byPod[o.Pod]
		if !ok {
			continue
		}
		counts["evicted/"+o.Pod], counts["rejected/"+o.Pod], fragmentation = nm.Evicted, nm.Rejected, max(fragmentation, nm.Fragmentation)
		if self, _ := o.Self(); self.IsMaster() && len(self.Slots) > 0 {
			used, maxMemory = used+nm.Used, maxMemory+nm.MaxMemory
		}
	}
	oomKilled, pods := map[string]bool{}, map[string]bool{}
	for i := range s.Pods {
		pods[s.Pods[i].Name] = true
		for _, c := range s.Pods[i].Status.ContainerStatuses {
			if c.Name == resources.RedisContainer {
				counts["restarts/"+s.Pods[i].Name] = int64(c.RestartCount)
				t := c.LastTerminationState.Terminated
				oomKilled[s.Pods[i].Name] = t != nil && t.Reason == "OOMKilled"
			}
		}
	}
	var evicted, rejected, restarts, oomKills int64
	for id, n := range counters.increases(types.NamespacedName{Namespace: ns, Name: name}, counts, pods) {
		kind, pod, _ := strings.Cut(id, "/")
		switch kind {
		case "evicted":
			evicted += n
		case "rejected":
			rejected += n
		case "restarts":
			restarts += n
			if n > 0 && oomKilled[pod] {
				oomKills++ // the last restart; earlier ones in between are not known
			}
		}
	}
	metrics.RedisFullestMasterMemory.WithLabelValues(ns, name).Set(fullest)
	metrics.RedisMemoryUsed.WithLabelValues(ns, name).Set(float64(used))
	metrics.RedisMaxMemory.WithLabelValues(ns, name).Set(float64(maxMemory))
	metrics.RedisFragmentation.WithLabelValues(ns, name).Set(fragmentation)
	metrics.RedisEvictedKeys.WithLabelValues(ns, name).Add(float64(evicted))
	metrics.RedisRejectedWrites.WithLabelValues(ns, name).Add(float64(rejected))
	metrics.RedisContainerRestarts.WithLabelValues(ns, name).Add(float64(restarts))
	metrics.RedisOOMKills.WithLabelValues(ns, name).Add(float64(oomKills))
}
