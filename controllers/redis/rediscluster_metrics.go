package redis

import (
	"strconv"

	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// recordMetrics sets the cluster's gauges from the reconcile's snapshot and health: what
// clients would see, from every answering node, never from one node's opinion.
func recordMetrics(s *state) {
	if s.snap.Now.IsZero() {
		return
	}
	ns, name := s.rc.Namespace, s.rc.Name
	h := s.health
	stateOK, pfail, fail, known := 1.0, 0, 0, 0
	replicasOf := map[string]int{}
	replicas := 0
	for i := range s.snap.Nodes {
		o := &s.snap.Nodes[i]
		if !o.Joined() {
			continue
		}
		if o.Info["cluster_state"] != "ok" {
			stateOK = 0
		}
		pfail, fail, known = max(pfail, infoInt(o, "cluster_slots_pfail")), max(fail, infoInt(o, "cluster_slots_fail")), max(known, infoInt(o, "cluster_known_nodes"))
		if self, _ := o.Self(); self.Role == nodes.RoleSlave {
			replicas++
			replicasOf[self.MasterID]++
		}
	}
	alone := 0
	for i := range s.snap.Nodes {
		if self, _ := s.snap.Nodes[i].Self(); s.snap.Nodes[i].Joined() && self.IsMaster() && len(self.Slots) > 0 && replicasOf[self.ID] == 0 {
			alone++
		}
	}
	if len(s.snap.Nodes) > 0 && len(h.Silent) == len(s.snap.Nodes) {
		stateOK = 0
	}
	metrics.RedisStateOK.WithLabelValues(ns, name).Set(stateOK)
	metrics.RedisSlotsAssigned.WithLabelValues(ns, name).Set(float64(h.SlotsAssigned))
	metrics.RedisSlotsOK.WithLabelValues(ns, name).Set(float64(h.SlotsServed))
	metrics.RedisSlotsPFail.WithLabelValues(ns, name).Set(float64(pfail))
	metrics.RedisSlotsFail.WithLabelValues(ns, name).Set(float64(fail))
	metrics.RedisKnownNodes.WithLabelValues(ns, name).Set(float64(known))
	metrics.RedisMasters.WithLabelValues(ns, name).Set(float64(h.Masters))
	metrics.RedisReplicas.WithLabelValues(ns, name).Set(float64(replicas))
	metrics.RedisMastersWithoutReplica.WithLabelValues(ns, name).Set(float64(alone))
	metrics.RedisNodesSilent.WithLabelValues(ns, name).Set(float64(len(h.Silent)))
	metrics.RedisLastCheck.WithLabelValues(ns, name).Set(float64(s.snap.Now.Unix()))
	recordMemoryMetrics(s)
	if s.step.Shown().Operation == "" {
		metrics.RedisMigrationSlotsLeft.WithLabelValues(ns, name).Set(0)
	}
}

// infoInt is a CLUSTER INFO field of o as a number, 0 when absent.
func infoInt(o *observe.Observation, field string) int {
	n, _ := strconv.Atoi(o.Info[field])
	return n
}

// countMoves adds a batch of slot moves to the cluster's counters and records what is left.
func countMoves(s *state, stats execute.MoveStats, left int) {
	ns, name := s.rc.Namespace, s.rc.Name
	metrics.RedisSlotsMoved.WithLabelValues(ns, name).Add(float64(stats.Slots))
	metrics.RedisKeysMoved.WithLabelValues(ns, name).Add(float64(stats.Keys))
	metrics.RedisMigrationSlotsLeft.WithLabelValues(ns, name).Set(float64(max(left, 0)))
}
