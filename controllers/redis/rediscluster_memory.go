package redis

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// ReasonMemoryConfigured is the event of nodes given a new maxmemory or maxmemory-policy
// while running.
const ReasonMemoryConfigured = "MemoryConfigured"

// readConf sets s.memory, s.coverage and s.writeSafety from the generated redis.conf as the cache has it
// (the user's redis.conf is in it, and its maxmemory wins), or from the spec alone while
// there is none.
func (r *RedisClusterReconciler) readConf(ctx context.Context, s *state) {
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RedisConfigMapName(s.rc)}, cm)
	switch {
	case err == nil:
		s.memory = resources.RedisMemoryOf(s.rc, cm.Data[resources.RedisConfigFile])
		s.coverage = resources.RedisFullCoverageOf(cm.Data[resources.RedisConfigFile])
		s.writeSafety = resources.RedisWriteSafetyOf(s.rc, cm.Data[resources.RedisConfigFile])
	case apierrors.IsNotFound(err):
		s.memory = resources.RedisMemoryFromSpec(s.rc)
		s.writeSafety = resources.RedisWriteSafetyOf(s.rc, "")
	default: // not known: nothing is set this look
		s.memory, s.writeSafety = resources.RedisMemory{}, resources.RedisWriteSafety{}
	}
}

// memoryTarget is s.memory in the planner's terms (zero, so nothing is set, when unknown).
func memoryTarget(s *state) plan.Memory {
	if s.memory.Policy == "" {
		return plan.Memory{}
	}
	return plan.Memory{MaxMemory: s.memory.MaxMemory, Policy: s.memory.Policy, KeepMaxMemory: !s.memory.Known}
}

// setMemory carries out StepSetMemory: CONFIG SET on each node of the step.
func (r *RedisClusterReconciler) setMemory(ctx context.Context, s *state) error {
	return r.configureReported(ctx, s, ReasonMemoryConfigured, s.step.Memory.String(), func(addr string) error {
		return execute.SetMemory(ctx, addr, s.certs.config, s.login(), s.step.Memory)
	})
}

// configureReported is configureNodes with a Normal event of reason saying that what was
// set without a restart on the nodes that took it.
func (r *RedisClusterReconciler) configureReported(ctx context.Context, s *state, reason, what string, set func(addr string) error) error {
	done, err := r.configureNodes(ctx, s, set)
	if len(done) > 0 {
		r.event(s, corev1.EventTypeNormal, reason, "Configure", "set %s without a restart on %d nodes (%s)", what, len(done), strings.Join(done, ", "))
	}
	return err
}

// configureNodes runs set on the address of each node of the step, fenced, and returns the
// addresses it succeeded on. A node that did not answer is set at a later look, when it
// answers again; the first node that refused is the error.
func (r *RedisClusterReconciler) configureNodes(ctx context.Context, s *state, set func(addr string) error) ([]string, error) {
	var done []string
	var refused error
	for _, addr := range s.step.Addrs {
		if err := r.fence(ctx); err != nil {
			return done, err
		}
		err := set(addr)
		var netErr net.Error
		switch {
		case err == nil:
			done = append(done, addr)
		case errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, context.DeadlineExceeded):
		case refused == nil:
			refused = err
		}
	}
	return done, refused
}

// nodeMemories is the memory of every answering node, by pod, and the master serving slots
// whose used memory is the largest share of its maxmemory ("" when none has maxmemory),
// with that share (0 to 1).
func nodeMemories(s *state) (byPod map[string]observe.NodeMemory, fullest string, share float64) {
	byPod = map[string]observe.NodeMemory{}
	for i := range s.snap.Nodes {
		o := &s.snap.Nodes[i]
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
func memoryStatus(s *state) {
	if s.snap.Now.IsZero() {
		return
	}
	if s.memory.Policy == "" {
		s.next.Status.Memory = nil // the configuration could not be read this look
		return
	}
	byPod, fullest, _ := nodeMemories(s)
	m := &redisv1alpha1.MemoryStatus{MaxMemory: s.memory.MaxMemory, Policy: s.memory.Policy, Source: s.memory.Source}
	if percent, ok := byPod[fullest].Percent(); ok {
		m.FullestMaster, m.FullestMasterPercent = fullest, ptr.To(percent)
	}
	for i := range s.next.Status.Nodes {
		n := &s.next.Status.Nodes[i]
		nm := byPod[n.Name]
		n.MaxMemory, n.MemoryPercent = nm.MaxMemory, nil
		if percent, ok := nm.Percent(); ok {
			n.MemoryPercent = ptr.To(percent)
		}
	}
	s.next.Status.Memory = m
}

// nodeCounts keeps, per cluster, the last value of each node's counts (evicted keys, refused
// writes, container restarts), which fall back to 0 when a node or pod restarts, so that
// only their increases are added to the cluster's counters.
var nodeCounts = struct {
	sync.Mutex
	last map[types.NamespacedName]map[string]int64
}{last: map[types.NamespacedName]map[string]int64{}}

// increases returns how much each count of counts (by an id "<count>/<pod>") rose since
// the last look, and remembers them: a count below its last value started again (its node
// restarted), so all of it is new; a count seen the first time is only remembered (the
// operator may have started after it rose). The counts of a pod of pods that did not
// answer this look are kept for the next; those of pods that are gone are forgotten.
func increases(key types.NamespacedName, counts map[string]int64, pods map[string]bool) map[string]int64 {
	nodeCounts.Lock()
	defer nodeCounts.Unlock()
	last := nodeCounts.last[key]
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
	nodeCounts.last[key] = keep
	return out
}

// hasKey reports whether m has k.
func hasKey(m map[string]int64, k string) bool { _, ok := m[k]; return ok }

// recordMemoryMetrics sets the cluster's memory gauges from the snapshot (the masters'
// used memory and maxmemory, the fullest master's share, the highest fragmentation), and
// adds to its counters the nodes' new evictions and refused writes and the redis
// containers' new restarts, those after an OOM kill apart.
func recordMemoryMetrics(s *state) {
	ns, name := s.rc.Namespace, s.rc.Name
	byPod, _, fullest := nodeMemories(s)
	var used, maxMemory int64
	fragmentation := 0.0
	counts := map[string]int64{}
	for i := range s.snap.Nodes {
		o := &s.snap.Nodes[i]
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
	for i := range s.pods {
		pods[s.pods[i].Name] = true
		for _, c := range s.pods[i].Status.ContainerStatuses {
			if c.Name == resources.RedisContainer {
				counts["restarts/"+s.pods[i].Name] = int64(c.RestartCount)
				t := c.LastTerminationState.Terminated
				oomKilled[s.pods[i].Name] = t != nil && t.Reason == "OOMKilled"
			}
		}
	}
	var evicted, rejected, restarts, oomKills int64
	for id, n := range increases(types.NamespacedName{Namespace: ns, Name: name}, counts, pods) {
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
