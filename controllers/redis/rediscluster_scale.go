package redis

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/child"
	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// fixOpenSlots finishes or rolls back a slot move that an interruption (an operator restart,
// a crashed node) left open, before anything else changes the topology.
func (r *RedisClusterReconciler) fixOpenSlots(ctx context.Context, s *state) (*ctrl.Result, error) {
	open := false
	for _, m := range s.members {
		open = open || m.self.HasOpenSlots()
	}
	if !open {
		return nil, nil
	}
	fixes, err := r.adminFor(s).Fix(ctx, s.addrs(), moveOptions(s))
	if err != nil {
		return nil, fmt.Errorf("while fixing open slots: %w", err)
	}
	r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "OpenSlotsFixed", "Fix", "fixed %d open slots left by an interrupted move", len(fixes))
	s.operation(redisv1alpha1.PhaseScaling, "finished or rolled back interrupted slot moves")
	return &ctrl.Result{RequeueAfter: waitInterval}, nil
}

// joinNewNodes adds one new, empty node per reconcile: as a master until there are
// replicas/(1+replicasPerMaster) of them, then as a replica of the master with the fewest
// replicas, preferring one on another Kubernetes node.
func (r *RedisClusterReconciler) joinNewNodes(ctx context.Context, s *state) (*ctrl.Result, error) {
	joined := s.joined()
	if len(joined) == 0 {
		return nil, nil
	}
	for _, m := range s.members {
		if !m.fresh() || leaving(s, m.pod) {
			continue
		}
		masterID := ""
		if masters := masterCounts(s); len(masters) >= resources.RedisMasters(s.rc) {
			masterID = pickMaster(s, masters, m.pod.Spec.NodeName)
		}
		s.operation(redisv1alpha1.PhaseScaling, "adding "+m.pod.Name+" to the cluster")
		inProgress, err := bounded(ctx, func(ctx context.Context) error {
			return r.adminFor(s).AddNode(ctx, m.addr, joined[0].addr, masterID)
		})
		if err != nil {
			return nil, fmt.Errorf("while adding %s to the cluster: %w", m.pod.Name, err)
		}
		if !inProgress {
			role := "master"
			if masterID != "" {
				role = "replica"
			}
			r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "NodesAdded", "Scale", "added %s as %s", m.pod.Name, role)
		}
		return &ctrl.Result{RequeueAfter: waitInterval}, nil
	}
	return nil, nil
}

// masterCounts maps every staying master's node id to its number of staying replicas.
func masterCounts(s *state) map[string]int {
	counts := map[string]int{}
	for _, m := range s.members {
		if !m.fresh() && !leaving(s, m.pod) && m.self.IsMaster() {
			counts[m.self.ID] += 0
		}
	}
	for _, m := range s.members {
		if !m.fresh() && !leaving(s, m.pod) && !m.self.IsMaster() {
			if _, ok := counts[m.self.MasterID]; ok {
				counts[m.self.MasterID]++
			}
		}
	}
	return counts
}

// pickMaster is the master with the fewest replicas, preferring one not on host.
func pickMaster(s *state, counts map[string]int, host string) string {
	hostOf := map[string]string{}
	for _, m := range s.members {
		hostOf[m.self.ID] = m.pod.Spec.NodeName
	}
	ids := make([]string, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, b := ids[i], ids[j]
		if counts[a] != counts[b] {
			return counts[a] < counts[b]
		}
		if (hostOf[a] == host) != (hostOf[b] == host) {
			return hostOf[b] == host
		}
		return a < b
	})
	return ids[0]
}

// moveBudget bounds the slot moves of one reconcile; a rebalance goes on at the next one.
const moveBudget = 5 * time.Second

// balanceSlots moves slots, a bounded batch per reconcile: off leaving masters and off
// staying masters beyond the spec's count (they become replicas afterwards); with
// AutoReceive until every master is within the rebalance threshold of its share (also after
// an interruption: the plan is made again from the current slots each time); with
// AssignReceive exactly the listed slots from the listed nodes to new, empty masters.
func (r *RedisClusterReconciler) balanceSlots(ctx context.Context, s *state) (*ctrl.Result, error) {
	weights := drainWeights(s)
	var empty []string
	for _, m := range s.members {
		if !m.fresh() && !leaving(s, m.pod) && m.self.IsMaster() && len(m.self.Slots) == 0 {
			if _, draining := weights[m.self.ID]; !draining {
				empty = append(empty, m.self.ID)
			}
		}
	}
	assign := s.rc.Spec.UpdateStrategy.Type == redisv1alpha1.AssignReceive
	if assign && !drainPending(s, weights) {
		if res, err := r.assignSlots(ctx, s, empty); res != nil || err != nil {
			return res, err
		}
	}
	moves, err := redisadmin.PlanRebalance(masterNodes(s), weights, redisadmin.DefaultRebalanceThreshold, !assign)
	if err != nil || len(moves) == 0 || (assign && !drainPending(s, weights)) {
		return nil, nil //nolint:nilerr // nothing to plan (no slots yet, say): the other steps report it
	}
	opts := moveOptions(s)
	opts.Budget = moveBudget
	s.operation(redisv1alpha1.PhaseScaling, fmt.Sprintf("moving slots: %d left to move", redisadmin.CountMovedSlots(moves)))
	stats, err := r.adminFor(s).Rebalance(ctx, s.addrs(), redisadmin.RebalanceOptions{UseEmptyMasters: !assign, Weights: weights, Move: opts})
	if err != nil {
		return nil, fmt.Errorf("while moving slots: %w", err)
	}
	left := redisadmin.CountMovedSlots(moves) - stats.Slots
	countMoves(s, stats, left)
	s.operation(redisv1alpha1.PhaseScaling, fmt.Sprintf("moving slots: %d moved, about %d left", stats.Slots, max(left, 0)))
	if !stats.Partial {
		r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "SlotsMoved", "Scale",
			"balanced the slots: the last batch moved %d slots and %d keys in %s", stats.Slots, stats.Keys, stats.Elapsed.Round(time.Millisecond))
	}
	return &ctrl.Result{RequeueAfter: waitInterval}, nil
}

// assignSlots moves, for AssignReceive, strategy i's slots to target i modulo the number of
// targets, a bounded batch per reconcile. The targets (the empty masters when the scale out
// starts) are recorded in the status before any slot moves; how far each strategy got is
// read from the targets' slots (they started empty, and strategies run in order), so an
// operator restarted (or paused and resumed, which changes the generation) at any point
// moves exactly the rest.
func (r *RedisClusterReconciler) assignSlots(ctx context.Context, s *state, empty []string) (*ctrl.Result, error) {
	strategies := s.rc.Spec.UpdateStrategy.AssignStrategies
	i, missing, target := 0, 0, ""
	if targets := s.rc.Status.AssignTargets; len(targets) > 0 && len(strategies) > 0 {
		// Resume whatever the generation: pausing (a spec change) must not abandon a move.
		i, missing, target = nextAssignment(s, strategies, targets)
	}
	if missing == 0 {
		// A new assignment starts only with a new spec (a scale out) that left empty masters.
		if len(empty) == 0 || len(strategies) == 0 || s.rc.Status.AssignGeneration == s.rc.Generation {
			return nil, nil
		}
		next := s.rc.DeepCopy()
		next.Status.AssignTargets, next.Status.AssignGeneration = empty, s.rc.Generation
		wrote, err := status.Patch(ctx, r.Client, s.rc, next, redisClusterStatus)
		if err != nil {
			return nil, err
		}
		if wrote {
			r.stale.Wrote(client.ObjectKeyFromObject(s.rc), s.rc.ResourceVersion)
		}
		s.rc, s.next.Status.AssignTargets, s.next.Status.AssignGeneration = next, empty, s.rc.Generation
		s.next.ResourceVersion = next.ResourceVersion
		s.operation(redisv1alpha1.PhaseScaling, fmt.Sprintf("moving the slots of %d strategies to %d new masters", len(strategies), len(empty)))
		return &ctrl.Result{RequeueAfter: waitInterval}, nil
	}
	from := strings.Split(strategies[i].FromReplicas, ",")
	for j := range from {
		from[j] = strings.TrimSpace(from[j])
	}
	opts := moveOptions(s)
	opts.Budget = moveBudget
	s.operation(redisv1alpha1.PhaseScaling, fmt.Sprintf("assignStrategies[%d]: %d of %d slots left to move", i, missing, strategies[i].Slots))
	stats, err := r.adminFor(s).Reshard(ctx, s.addrs(), missing, from, target, opts)
	if err != nil {
		return nil, fmt.Errorf("while moving the slots of assignStrategies[%d]: %w", i, err)
	}
	countMoves(s, stats, missing-stats.Slots)
	if !stats.Partial && stats.Slots == missing {
		r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "SlotsMoved", "Scale",
			"assignStrategies[%d]: moved its last %d slots and %d keys to %s", i, stats.Slots, stats.Keys, target)
	}
	return &ctrl.Result{RequeueAfter: waitInterval}, nil
}

// nextAssignment is the first strategy that still misses slots, how many, and its target.
// Each target's slots are handed out to its strategies in order.
func nextAssignment(s *state, strategies []redisv1alpha1.AssignStrategy, targets []string) (index, missing int, target string) {
	have := map[string]int{}
	for _, m := range s.members {
		have[m.self.ID] = redisadmin.CountSlots(m.self.Slots)
	}
	for i, a := range strategies {
		t := targets[i%len(targets)]
		got := min(int(a.Slots), have[t])
		have[t] -= got
		if got < int(a.Slots) {
			return i, int(a.Slots) - got, t
		}
	}
	return 0, 0, ""
}

// masterNodes are the joined masters as they describe themselves.
func masterNodes(s *state) []redisadmin.Node {
	var out []redisadmin.Node
	for _, m := range s.members {
		if !m.fresh() && m.self.IsMaster() {
			out = append(out, m.self)
		}
	}
	return out
}

// drainWeights gives the weight 0 to every master that must give its slots away: the
// leaving ones, and the staying ones beyond the spec's count of masters (those with the
// fewest slots, then the highest ordinals).
func drainWeights(s *state) map[string]float64 {
	w := map[string]float64{}
	var staying []member
	for _, m := range s.members {
		if m.fresh() || !m.self.IsMaster() {
			continue
		}
		if leaving(s, m.pod) {
			w[m.self.ID] = 0
		} else if len(m.self.Slots) > 0 {
			staying = append(staying, m)
		}
	}
	sort.SliceStable(staying, func(i, j int) bool {
		a, b := redisadmin.CountSlots(staying[i].self.Slots), redisadmin.CountSlots(staying[j].self.Slots)
		if a != b {
			return a > b
		}
		return ordinal(staying[i].pod.Name) < ordinal(staying[j].pod.Name)
	})
	for _, m := range staying[min(len(staying), resources.RedisMasters(s.rc)):] {
		w[m.self.ID] = 0
	}
	return w
}

// drainPending reports whether a master weighted 0 still has slots.
func drainPending(s *state, weights map[string]float64) bool {
	for _, m := range s.members {
		if _, ok := weights[m.self.ID]; ok && len(m.self.Slots) > 0 {
			return true
		}
	}
	return false
}

// removeLeavingNodes scales in, once balanceSlots moved every slot off the leaving
// masters: it removes one leaving node per reconcile from the cluster (replicas first; its
// replicas re-pointed, FORGET on every node, RESET on it), and only when none is left in
// the cluster shrinks the StatefulSet. With spec.finalizers "foreground" the removed pods'
// PersistentVolumeClaims are deleted too; otherwise they are kept (and a later scale out
// reuses them: the node was reset, so it joins as a new node).
func (r *RedisClusterReconciler) removeLeavingNodes(ctx context.Context, s *state) (*ctrl.Result, error) {
	var going []member
	for _, m := range s.members {
		if leaving(s, m.pod) && !m.fresh() {
			going = append(going, m)
		}
	}
	if len(going) > 0 {
		s.operation(redisv1alpha1.PhaseScaling, fmt.Sprintf("removing %d nodes from the cluster", len(going)))
		if drainPending(s, drainWeights(s)) {
			return &ctrl.Result{RequeueAfter: waitInterval}, nil
		}
		stay := ""
		for _, m := range s.members {
			if !leaving(s, m.pod) && !m.fresh() {
				stay = m.addr
				break
			}
		}
		// Replicas first, so no leaving replica is re-pointed only to be removed.
		sort.SliceStable(going, func(i, j int) bool { return !going[i].self.IsMaster() && going[j].self.IsMaster() })
		m := going[0]
		if _, err := bounded(ctx, func(ctx context.Context) error { return r.adminFor(s).DelNode(ctx, stay, m.self.ID) }); err != nil {
			return nil, fmt.Errorf("while removing %s from the cluster: %w", m.pod.Name, err)
		}
		r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "NodeRemoved", "Scale", "removed %s from the cluster", m.pod.Name)
		return &ctrl.Result{RequeueAfter: waitInterval}, nil
	}
	if *s.sts.Spec.Replicas <= s.rc.Spec.Replicas {
		return nil, r.deleteScaledInClaims(ctx, s)
	}
	for _, p := range s.pods {
		if leaving(s, &p) && !slices.ContainsFunc(s.members, func(m member) bool { return m.pod.Name == p.Name }) {
			// A leaving pod that does not answer may still be a member: wait for it.
			if _, recorded := s.recorded[p.Name]; recorded {
				s.waiting = "waiting for " + p.Name + " to answer before removing it"
				return &ctrl.Result{RequeueAfter: waitPodsInterval}, nil
			}
		}
	}
	sts := resources.RedisStatefulSet(s.rc, s.rc.Spec.Replicas)
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, sts, child.MergeStatefulSet)
	r.record(s, live, outcome, err)
	if err != nil {
		return nil, err
	}
	r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "NodesRemoved", "Scale",
		"scaled the StatefulSet to %d once the leaving nodes were out of the cluster", s.rc.Spec.Replicas)
	return &ctrl.Result{RequeueAfter: waitInterval}, nil
}

// deleteScaledInClaims deletes, with spec.finalizers "foreground", the claims of ordinals at
// or above spec.replicas whose pods are gone.
func (r *RedisClusterReconciler) deleteScaledInClaims(ctx context.Context, s *state) error {
	if s.rc.Spec.Finalizers != "foreground" {
		return nil
	}
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, claims, client.InNamespace(s.rc.Namespace),
		client.MatchingLabels(resources.SelectorLabels(resources.RedisClusterKind, s.rc.Name))); err != nil {
		return fmt.Errorf("while listing the claims of %s: %w", s.rc.Name, err)
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if ordinal(c.Name) < int(s.rc.Spec.Replicas) || !c.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Delete(ctx, c, client.Preconditions{UID: &c.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("while deleting claim %s: %w", c.Name, err)
		}
	}
	return nil
}
