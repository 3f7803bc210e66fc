package redis

import (
	"context"
	"fmt"
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

// joinNewNodes adds new, empty nodes to the cluster: as masters until there are
// replicas/(1+replicasPerMaster) of them, then as replicas of the master with the fewest
// replicas, preferring one on another Kubernetes node.
func (r *RedisClusterReconciler) joinNewNodes(ctx context.Context, s *state) (*ctrl.Result, error) {
	joined := s.joined()
	if len(joined) == 0 {
		return nil, nil
	}
	var added []string
	for _, m := range s.members {
		if !m.fresh() || leaving(s, m.pod) {
			continue
		}
		masterID := ""
		if masters := masterCounts(s); len(masters) >= resources.RedisMasters(s.rc) {
			masterID = pickMaster(s, masters, m.pod.Spec.NodeName)
		}
		s.operation(redisv1alpha1.PhaseScaling, "adding new nodes to the cluster")
		if err := r.adminFor(s).AddNode(ctx, m.addr, joined[0].addr, masterID); err != nil {
			return nil, fmt.Errorf("while adding %s to the cluster: %w", m.pod.Name, err)
		}
		role := "master"
		if masterID != "" {
			role = "replica"
		}
		added = append(added, m.pod.Name+" as "+role)
		// Read the topology again: the next node's role depends on this one.
		if res, err := r.readTopology(ctx, s); res != nil || err != nil {
			return res, err
		}
	}
	if len(added) > 0 {
		r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "NodesAdded", "Scale", "added %s", strings.Join(added, ", "))
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

// distributeSlots gives slots to staying masters that have none (new masters after a scale
// out): AutoReceive rebalances evenly, AssignReceive moves exactly the listed slots from the
// listed nodes, strategy i to the i-th empty master (round robin).
func (r *RedisClusterReconciler) distributeSlots(ctx context.Context, s *state) (*ctrl.Result, error) {
	var empty []string
	for _, m := range s.members {
		if !m.fresh() && !leaving(s, m.pod) && m.self.IsMaster() && len(m.self.Slots) == 0 {
			empty = append(empty, m.self.ID)
		}
	}
	if len(empty) == 0 {
		return nil, nil
	}
	r.announce(ctx, s, redisv1alpha1.PhaseScaling, fmt.Sprintf("moving slots to %d new masters", len(empty)))
	var stats redisadmin.MoveStats
	var err error
	admin := r.adminFor(s)
	if s.rc.Spec.UpdateStrategy.Type == redisv1alpha1.AssignReceive {
		for i, a := range s.rc.Spec.UpdateStrategy.AssignStrategies {
			from := strings.Split(a.FromReplicas, ",")
			for j := range from {
				from[j] = strings.TrimSpace(from[j])
			}
			st, e := admin.Reshard(ctx, s.addrs(), int(a.Slots), from, empty[i%len(empty)], moveOptions(s))
			stats.Slots, stats.Keys, stats.Elapsed = stats.Slots+st.Slots, stats.Keys+st.Keys, stats.Elapsed+st.Elapsed
			if err = e; err != nil {
				break
			}
		}
	} else {
		stats, err = admin.Rebalance(ctx, s.addrs(), redisadmin.RebalanceOptions{
			UseEmptyMasters: true, Weights: leavingWeights(s), Move: moveOptions(s),
		})
	}
	if err != nil {
		return nil, fmt.Errorf("while moving slots to the new masters: %w", err)
	}
	r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "SlotsMoved", "Scale",
		"moved %d slots and %d keys to %d new masters in %s", stats.Slots, stats.Keys, len(empty), stats.Elapsed.Round(time.Millisecond))
	return &ctrl.Result{RequeueAfter: waitInterval}, nil
}

// leavingWeights gives every leaving master the weight 0, so a rebalance empties it.
func leavingWeights(s *state) map[string]float64 {
	w := map[string]float64{}
	for _, m := range s.members {
		if !m.fresh() && leaving(s, m.pod) && m.self.IsMaster() {
			w[m.self.ID] = 0
		}
	}
	return w
}

// removeLeavingNodes scales in: it moves the slots of the masters being removed to the
// others, removes every leaving node from the cluster (its replicas re-pointed, FORGET on
// every node, RESET on it), and only then shrinks the StatefulSet. With spec.finalizers
// "foreground" the removed pods' PersistentVolumeClaims are deleted too; otherwise they are
// kept (and a later scale out reuses them: the node was reset, so it joins as a new node).
func (r *RedisClusterReconciler) removeLeavingNodes(ctx context.Context, s *state) (*ctrl.Result, error) {
	var going []member
	for _, m := range s.members {
		if leaving(s, m.pod) {
			going = append(going, m)
		}
	}
	if len(going) == 0 {
		return nil, r.deleteScaledInClaims(ctx, s)
	}
	s.operation(redisv1alpha1.PhaseScaling, fmt.Sprintf("removing %d nodes from the cluster", len(going)))
	admin := r.adminFor(s)
	if w := leavingWeights(s); len(w) > 0 {
		drained := true
		for _, m := range going {
			drained = drained && len(m.self.Slots) == 0
		}
		if !drained {
			r.announce(ctx, s, redisv1alpha1.PhaseScaling, fmt.Sprintf("moving slots off %d leaving masters", len(w)))
			stats, err := admin.Rebalance(ctx, s.addrs(), redisadmin.RebalanceOptions{Weights: w, Move: moveOptions(s)})
			if err != nil {
				return nil, fmt.Errorf("while moving slots off the leaving masters: %w", err)
			}
			r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "SlotsMoved", "Scale",
				"moved %d slots and %d keys off %d leaving masters in %s", stats.Slots, stats.Keys, len(w), stats.Elapsed.Round(time.Millisecond))
			return &ctrl.Result{RequeueAfter: waitInterval}, nil
		}
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
	var names []string
	for _, m := range going {
		if !m.fresh() {
			if err := admin.DelNode(ctx, stay, m.self.ID); err != nil {
				return nil, fmt.Errorf("while removing %s from the cluster: %w", m.pod.Name, err)
			}
		}
		names = append(names, m.pod.Name)
	}
	sts := resources.RedisStatefulSet(s.rc, s.rc.Spec.Replicas)
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, sts, child.MergeStatefulSet)
	r.record(s, live, outcome, err)
	if err != nil {
		return nil, err
	}
	r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "NodesRemoved", "Scale",
		"removed %s from the cluster and scaled the StatefulSet to %d", strings.Join(names, ", "), s.rc.Spec.Replicas)
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
