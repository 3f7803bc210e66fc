package redis

import (
	"context"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/redisadmin"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// ReasonMemoryConfigured is the event of nodes given a new maxmemory or maxmemory-policy
// while running.
const ReasonMemoryConfigured = "MemoryConfigured"

// readMemory sets s.memory from the generated redis.conf as the cache has it (the user's
// redis.conf is in it, and its maxmemory wins), or from the spec alone while there is none.
func (r *RedisClusterReconciler) readMemory(ctx context.Context, s *state) {
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RedisConfigMapName(s.rc)}, cm)
	switch {
	case err == nil:
		s.memory = resources.RedisMemoryOf(s.rc, cm.Data[resources.RedisConfigFile])
	case apierrors.IsNotFound(err):
		s.memory = resources.RedisMemoryFromSpec(s.rc)
	default: // not known: nothing is set this look
		s.memory = resources.RedisMemory{}
	}
}

// memoryTarget is s.memory in the planner's terms (zero, so nothing is set, when unknown).
func memoryTarget(s *state) redisadmin.Memory {
	if s.memory.Policy == "" {
		return redisadmin.Memory{}
	}
	return redisadmin.Memory{MaxMemory: s.memory.MaxMemory, Policy: s.memory.Policy, KeepMaxMemory: !s.memory.Known}
}

// setMemory carries out StepSetMemory: CONFIG SET on each node of the step. A node that went
// away is set at the next look, when it answers again.
func (r *RedisClusterReconciler) setMemory(ctx context.Context, s *state) error {
	var set []string
	var firstErr error
	for _, addr := range s.step.Addrs {
		if err := r.fence(ctx); err != nil {
			return err
		}
		if err := redisadmin.SetMemory(ctx, addr, s.tls, s.login(), s.step.Memory); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		set = append(set, addr)
	}
	if len(set) > 0 {
		r.event(s, corev1.EventTypeNormal, ReasonMemoryConfigured, "Configure", "%s, without a restart, on %d nodes (%s)",
			strings.TrimPrefix(s.step.Reason, "setting "), len(set), strings.Join(set, ", "))
	}
	return firstErr
}

// nodeMemories is the memory of every answering node, by pod, and the master serving slots
// whose used memory is the largest share of its maxmemory ("" when none has maxmemory),
// with that share (0 to 1).
func nodeMemories(s *state) (byPod map[string]redisadmin.NodeMemory, fullest string, share float64) {
	byPod = map[string]redisadmin.NodeMemory{}
	for i := range s.snap.Nodes {
		o := &s.snap.Nodes[i]
		if !o.Answered() {
			continue
		}
		nm := redisadmin.MemoryOf(o)
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

// nodeSeries remembers, per cluster, the pods that have per-node series, so the series of
// a pod that is gone are deleted.
var nodeSeries sync.Map // types.NamespacedName -> map[string]bool

// recordMemoryMetrics sets the per-node memory gauges and the fullest master's share from
// the snapshot, and the redis container's restarts and last OOM kill from the pods.
func recordMemoryMetrics(s *state) {
	ns, name := s.rc.Namespace, s.rc.Name
	pods := map[string]bool{}
	byPod, _, fullest := nodeMemories(s)
	for pod, nm := range byPod {
		pods[pod] = true
		metrics.RedisNodeUsedMemory.WithLabelValues(ns, name, pod).Set(float64(nm.Used))
		metrics.RedisNodeMaxMemory.WithLabelValues(ns, name, pod).Set(float64(nm.MaxMemory))
		metrics.RedisNodeFragmentation.WithLabelValues(ns, name, pod).Set(nm.Fragmentation)
		metrics.RedisNodeEvictedKeys.WithLabelValues(ns, name, pod).Set(float64(nm.Evicted))
		metrics.RedisNodeRejectedWrites.WithLabelValues(ns, name, pod).Set(float64(nm.Rejected))
	}
	for i := range s.pods {
		p := &s.pods[i]
		for _, c := range p.Status.ContainerStatuses {
			if c.Name != resources.RedisContainer {
				continue
			}
			pods[p.Name] = true
			oom := 0.0
			if t := c.LastTerminationState.Terminated; t != nil && t.Reason == "OOMKilled" {
				oom = 1
			}
			metrics.RedisNodeRestarts.WithLabelValues(ns, name, p.Name).Set(float64(c.RestartCount))
			metrics.RedisNodeOOMKilled.WithLabelValues(ns, name, p.Name).Set(oom)
		}
	}
	metrics.RedisFullestMasterMemory.WithLabelValues(ns, name).Set(fullest)
	key := types.NamespacedName{Namespace: ns, Name: name}
	if before, ok := nodeSeries.Swap(key, pods); ok {
		for pod := range before.(map[string]bool) { //nolint:forcetypeassert // only this type is stored
			if !pods[pod] {
				metrics.ForgetRedisNode(ns, name, pod)
			}
		}
	}
}
