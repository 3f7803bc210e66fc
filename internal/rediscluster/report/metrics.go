package report

import (
	"strconv"

	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// RecordMetrics sets the cluster's gauges from the reconcile's snapshot and health: what
// clients would see, from every answering node, never from one node's opinion; counters
// keep the nodes' counts from one look to the next.
func RecordMetrics(s *Input, counters *NodeCounts) {
	if s.Snap.Now.IsZero() {
		return
	}
	ns, name := s.Cluster.Namespace, s.Cluster.Name
	h := s.Health
	stateOK, pfail, fail, known := 1.0, 0, 0, 0
	replicasOf := map[string]int{}
	replicas := 0
	for i := range s.Snap.Nodes {
		o := &s.Snap.Nodes[i]
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
	for i := range s.Snap.Nodes {
		if self, _ := s.Snap.Nodes[i].Self(); s.Snap.Nodes[i].Joined() && self.IsMaster() && len(self.Slots) > 0 && replicasOf[self.ID] == 0 {
			alone++
		}
	}
	if len(s.Snap.Nodes) > 0 && len(h.Silent) == len(s.Snap.Nodes) {
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
	metrics.RedisLastCheck.WithLabelValues(ns, name).Set(float64(s.Snap.Now.Unix()))
	recordMemoryMetrics(s, counters)
	if s.Step.Shown().Operation == "" {
		metrics.RedisMigrationSlotsLeft.WithLabelValues(ns, name).Set(0)
	}
}

// infoInt is a CLUSTER INFO field of o as a number, 0 when absent.
func infoInt(o *observe.Observation, field string) int {
	n, _ := strconv.Atoi(o.Info[field])
	return n
}
