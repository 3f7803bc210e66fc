package redis

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/child"
	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// Condition types and reasons of a RedisCluster.
const (
	ConditionReady       = "Ready"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"

	ReasonClusterOK        = "ClusterOK"
	ReasonForming          = "Forming"
	ReasonPaused           = "Paused"
	ReasonNotControlled    = child.ReasonNotControlled
	ReasonReconcileError   = "ReconcileError"
	ReasonNodesUnhealthy   = "NodesUnhealthy"
	ReasonAllNodesHealthy  = "AllNodesHealthy"
	ReasonWaitingForPods   = "WaitingForPods"
	ReasonClusterNotFormed = "ClusterNotFormed"
)

// view is the cluster as Redis reports it.
type view struct {
	nodes []redisadmin.Node          // CLUSTER NODES from the first node that answered
	state string                     // cluster_state from the same node
	self  map[string]redisadmin.Node // each reachable node's description of itself, by address
}

// observe reads the topology from Redis (read-only commands) and derives the whole status.
func (r *RedisClusterReconciler) observe(ctx context.Context, s *state) {
	if s.pods == nil {
		_ = r.listPods(ctx, s)
	}
	v := r.readView(ctx, s)
	next := s.next
	gen := s.rc.Generation
	next.Status.ObservedGeneration = gen
	if s.sts != nil {
		next.Status.Replicas = s.sts.Status.Replicas
		next.Status.ReadyReplicas = s.sts.Status.ReadyReplicas
	}
	next.Status.Nodes = nodeStatuses(s, v)
	assigned, ok, masters := slotCounts(v.nodes)
	next.Status.SlotsAssigned, next.Status.SlotsOK, next.Status.Masters = int32(assigned), int32(ok), int32(masters) //nolint:gosec // at most 16384

	healthy := v.state == "ok" && ok == redisadmin.SlotCount && len(v.nodes) >= len(s.pods) && len(s.pods) > 0
	for _, n := range next.Status.Nodes {
		healthy = healthy && n.Status == corev1.ConditionTrue
	}
	switch {
	case s.rc.Spec.Pause:
		setPhaseKeep(next, "paused: spec.pause is true, so the operator makes no change to the StatefulSet or the Redis topology until it is false")
		status.Set(&next.Status.Conditions, gen, ConditionProgressing, metav1.ConditionFalse, ReasonPaused, next.Status.Reason)
	case s.opPhase != "":
		setPhase(next, s.opPhase, s.opReason)
		status.Set(&next.Status.Conditions, gen, ConditionProgressing, metav1.ConditionTrue, string(s.opPhase), s.opReason)
	case healthy:
		setPhase(next, redisv1alpha1.PhaseRunning, "")
		status.Set(&next.Status.Conditions, gen, ConditionProgressing, metav1.ConditionFalse, ReasonClusterOK, "every slot is served and every node is connected")
	case assigned == 0:
		setPhase(next, redisv1alpha1.PhaseCreating, fmt.Sprintf("waiting for %d Redis nodes to run before forming the cluster", s.rc.Spec.Replicas))
		status.Set(&next.Status.Conditions, gen, ConditionProgressing, metav1.ConditionTrue, ReasonForming, next.Status.Reason)
	default:
		setPhase(next, redisv1alpha1.PhaseFailed, fmt.Sprintf("cluster_state %s, %d of 16384 slots served by healthy masters", v.state, ok))
		status.Set(&next.Status.Conditions, gen, ConditionProgressing, metav1.ConditionFalse, ReasonNodesUnhealthy, next.Status.Reason)
	}
	if healthy {
		status.Set(&next.Status.Conditions, gen, ConditionReady, metav1.ConditionTrue, ReasonClusterOK,
			fmt.Sprintf("%d masters serve all 16384 slots", masters))
	} else {
		status.Set(&next.Status.Conditions, gen, ConditionReady, metav1.ConditionFalse, ReasonClusterNotFormed,
			fmt.Sprintf("%d of 16384 slots ok, cluster_state %q", ok, v.state))
	}
	setDegraded(s, gen)
}

// setDegraded reports a step error.
func setDegraded(s *state, gen int64) {
	conds := &s.next.Status.Conditions
	var notOurs *child.NotControlledError
	switch {
	case errors.As(s.err, &notOurs):
		status.Set(conds, gen, ConditionDegraded, metav1.ConditionTrue, ReasonNotControlled, notOurs.Error())
		s.next.Status.Reason = notOurs.Error()
	case s.err != nil:
		status.Set(conds, gen, ConditionDegraded, metav1.ConditionTrue, ReasonReconcileError, s.err.Error())
		s.next.Status.Reason = s.err.Error()
	default:
		status.Set(conds, gen, ConditionDegraded, metav1.ConditionFalse, ReasonAllNodesHealthy, "no error")
	}
}

func setPhase(rc *redisv1alpha1.RedisCluster, phase redisv1alpha1.Phase, reason string) {
	rc.Status.Phase, rc.Status.Reason = phase, reason
}

// setPhaseKeep keeps the phase and sets the reason (a paused cluster stays in its phase).
func setPhaseKeep(rc *redisv1alpha1.RedisCluster, reason string) {
	if rc.Status.Phase == "" {
		rc.Status.Phase = redisv1alpha1.PhaseNone
	}
	rc.Status.Reason = reason
}

// readView asks every pod for CLUSTER NODES (read-only). Each node's own line is the
// authority on its role, master and slots (gossip about replicas reaches the other nodes
// only after a while); the first answer's list gives the other nodes' failure flags, and
// its CLUSTER INFO the cluster state.
func (r *RedisClusterReconciler) readView(ctx context.Context, s *state) view {
	v := view{self: map[string]redisadmin.Node{}}
	if s.password == "" { // the password step failed; its error is in Degraded
		return v
	}
	admin := r.adminFor(s)
	for i := range s.pods {
		p := &s.pods[i]
		if p.Status.PodIP == "" {
			continue
		}
		nodes, err := admin.ClusterNodes(ctx, podAddr(p))
		if err != nil {
			continue
		}
		for _, n := range nodes {
			if n.Myself {
				v.self[podAddr(p)] = n
			}
		}
		if v.nodes != nil {
			continue
		}
		if info, err := admin.ClusterInfo(ctx, podAddr(p)); err == nil {
			v.nodes, v.state = nodes, info["cluster_state"]
		}
	}
	return v
}

// slotCounts returns the slots assigned to masters, those served by masters not failing,
// and the number of masters serving slots.
func slotCounts(nodes []redisadmin.Node) (assigned, ok, masters int) {
	for _, n := range nodes {
		if !n.IsMaster() || len(n.Slots) == 0 {
			continue
		}
		c := redisadmin.CountSlots(n.Slots)
		assigned += c
		masters++
		if !n.Failed && !n.PossiblyFailed {
			ok += c
		}
	}
	return assigned, ok, masters
}

// nodeStatuses is the seed's per-node list: one entry per pod, matched to its Redis node by
// address. lastTransitionTime moves only when a node's status does.
func nodeStatuses(s *state, v view) []redisv1alpha1.RedisNode {
	byAddr := map[string]redisadmin.Node{}
	for _, n := range v.nodes {
		byAddr[n.Addr] = n
	}
	failing := map[string]bool{} // by node id, in the first answer's opinion
	for _, n := range v.nodes {
		failing[n.ID] = n.Failed || n.PossiblyFailed
	}
	previous := map[string]redisv1alpha1.RedisNode{}
	for _, n := range s.rc.Status.Nodes {
		previous[n.Name] = n
	}
	var out []redisv1alpha1.RedisNode
	for i := range s.pods {
		p := &s.pods[i]
		entry := redisv1alpha1.RedisNode{
			Name:       p.Name,
			DomainName: resources.RedisPodDNSName(s.rc, p.Name),
			Hostname:   p.Spec.NodeName,
			HostIP:     p.Status.HostIP,
		}
		if p.Status.PodIP != "" {
			entry.Instance = podAddr(p)
		}
		n, known := v.self[entry.Instance]
		if !known {
			n, known = byAddr[entry.Instance]
		}
		switch {
		case entry.Instance == "":
			entry.Status, entry.Reason, entry.Message = corev1.ConditionFalse, "NoPodIP", "the pod has no IP yet"
		case !known:
			entry.Status, entry.Reason, entry.Message = corev1.ConditionFalse, "NotInCluster", "the node is not part of the cluster yet"
		default:
			entry.NodeID, entry.Type, entry.Slots = n.ID, n.Role, redisadmin.FormatSlotRanges(n.Slots)
			entry.MasterNodeID = n.MasterID
			if n.IsMaster() {
				entry.MasterNodeID = n.ID
			}
			switch {
			case n.Failed || n.PossiblyFailed || failing[n.ID]:
				entry.Status, entry.Reason, entry.Message = corev1.ConditionFalse, "Failing", "the cluster flags the node as failing"
			case len(v.self) > 0 && v.self[entry.Instance].ID == "":
				entry.Status, entry.Reason, entry.Message = corev1.ConditionFalse, "Unreachable", "the node does not answer"
			default:
				entry.Status, entry.Reason, entry.Message = corev1.ConditionTrue, "Connected", "serving"
			}
		}
		entry.LastTransitionTime = metav1.Now()
		if prev, ok := previous[p.Name]; ok && prev.Status == entry.Status {
			entry.LastTransitionTime = prev.LastTransitionTime
		}
		out = append(out, entry)
	}
	return out
}
