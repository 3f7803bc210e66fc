package redis

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/recovery"
)

// stepBudget bounds one step, its Redis commands and its waits, so that no reconcile holds
// a worker for long. Every step is idempotent: one cut short by it goes on from where the
// cluster is at the next reconcile (a Form's or a Join's replicas are attached by the
// recovery planner, and Assess does not call the cluster Ready while one of them is still
// an extra, empty master; slot moves left open are fixed by FixSlots). At 4 s and then 5 s
// a scale test twice ended with a slot routed two ways (on 2026-11-27, slot 7646 of a
// 10-to-6 scale in, for 4 minutes: its owner's own view gave it to a master that did not
// claim it); FixSlots now gives such a slot back (strayedSlots), and the budget is 5 s again.
const stepBudget = 5 * time.Second

// moveBudget bounds how long one step keeps starting new batches of slot moves; the batch
// under way finishes (well under a second at the default batch size), and the rest of a
// rebalance goes on at the next step.
const moveBudget = 3 * time.Second

// overrunLogged is how far past stepBudget a step must run before act logs it: a step that
// overruns names its kind and time, so a slow one can be found in the logs.
const overrunLogged = time.Second

// act carries out the planned step: one bounded thing, fenced where it changes Redis, with
// its event and metrics. Every acting step is logged with its reason when it starts and
// with its time when it ends; waits are not.
func (r *RedisClusterReconciler) act(ctx context.Context, s *state) error {
	step := &s.step
	if !step.Acts() {
		return nil
	}
	logf.FromContext(ctx).Info("step", "kind", step.Kind, "reason", step.Reason)
	ctx, cancel := context.WithTimeout(ctx, stepBudget)
	defer cancel()
	defer func(start time.Time) {
		took := time.Since(start)
		metrics.RedisStepSeconds.WithLabelValues(string(step.Kind)).Observe(took.Seconds())
		logf.FromContext(ctx).Info("step done", "kind", step.Kind, "seconds", took.Seconds())
		if took > stepBudget+overrunLogged {
			logf.FromContext(ctx).Info("step overran its budget", "kind", step.Kind, "took", took.Round(time.Millisecond).String(), "budget", stepBudget.String())
		}
	}(time.Now())
	switch step.Kind {
	case plan.StepRecordMembers:
		return r.writeMembers(ctx, s, step.Members)
	case plan.StepAcceptLostCluster:
		if err := r.writeMembers(ctx, s, map[string]string{}); err != nil {
			return err
		}
		r.event(s, corev1.EventTypeWarning, "DataLossAccepted", "Create",
			"%s is set: the record of the lost cluster's %d members is cleared and a new, empty cluster will be formed", AcceptDataLossAnnotation, len(s.snap.Members))
	case plan.StepDropAcceptance:
		return r.dropAcceptance(ctx, s)
	case plan.StepForm:
		began := time.Now()
		done, err := bounded(ctx, func(ctx context.Context) error { return r.adminFor(s).Create(ctx, step.Create) })
		if !errors.Is(err, layout.ErrNodeNotEmpty) { // a refused preflight formed nothing
			r.formed.mark(client.ObjectKeyFromObject(s.rc), began, formedFrom(s.snap))
		}
		if err != nil {
			return fmt.Errorf("while forming the cluster: %w", err)
		}
		if done {
			r.event(s, corev1.EventTypeNormal, "ClusterCreated", "Create", "formed a Redis Cluster of %d masters and %d replicas over 16384 slots",
				len(step.Create.Masters), len(s.pods)-len(step.Create.Masters))
		}
	case plan.StepRecover:
		return r.recover(ctx, s, step.Action)
	case plan.StepStartCARotation:
		return r.startCARotation(ctx, s)
	case plan.StepRotateCA:
		return r.advanceCA(ctx, s)
	case plan.StepFixSlots:
		var fixes []execute.SlotFix
		_, err := bounded(ctx, func(ctx context.Context) (err error) {
			fixes, err = r.adminFor(s).Fix(ctx, answeringAddrs(s), moveOptions(s))
			return err
		})
		if err != nil {
			return fmt.Errorf("while fixing open slots: %w", err)
		}
		if len(fixes) > 0 {
			r.event(s, corev1.EventTypeNormal, "OpenSlotsFixed", "Fix", "fixed %d open slots left by an interrupted move", len(fixes))
		}
	case plan.StepJoin:
		done, err := bounded(ctx, func(ctx context.Context) error {
			return r.adminFor(s).AddNode(ctx, step.Addr, step.Seed, step.MasterID)
		})
		if err != nil {
			return fmt.Errorf("while adding %s to the cluster: %w", step.Pod, err)
		}
		if done && step.MasterID == "" {
			r.event(s, corev1.EventTypeNormal, "NodesAdded", "Scale", "added %s as a master", step.Pod)
		} else if done {
			r.event(s, corev1.EventTypeNormal, "NodesAdded", "Scale", "added %s as a replica of %s", step.Pod, step.MasterID)
		}
	case plan.StepRecordTargets:
		s.next.Status.AssignTargets, s.next.Status.AssignGeneration = step.Targets, s.rc.Generation
	case plan.StepAssign, plan.StepRebalance:
		_, err := bounded(ctx, func(ctx context.Context) error { return r.moveSlots(ctx, s) })
		return err
	case plan.StepRemoveNode:
		if _, err := bounded(ctx, func(ctx context.Context) error { return r.adminFor(s).DelNode(ctx, step.Seed, step.NodeID) }); err != nil {
			return fmt.Errorf("while removing %s from the cluster: %w", step.Pod, err)
		}
		r.event(s, corev1.EventTypeNormal, "NodeRemoved", "Scale", "removed %s from the cluster", step.Pod)
	case plan.StepCheckACLRules:
		return r.fenced(ctx, func() error { return r.checkACLRules(ctx, s) })
	case plan.StepRenewCertificate:
		return r.renewCertificate(ctx, s)
	case plan.StepGrow:
		return r.writeStatefulSet(ctx, s, int32(step.Replicas)) //nolint:gosec // spec.replicas is an int32
	case plan.StepShrink:
		if err := r.writeStatefulSet(ctx, s, int32(step.Replicas)); err != nil { //nolint:gosec // spec.replicas is an int32
			return err
		}
		r.event(s, corev1.EventTypeNormal, "NodesRemoved", "Scale", "scaled the StatefulSet to %d once the leaving nodes were out of the cluster", step.Replicas)
	case plan.StepFailover:
		done, err := bounded(ctx, func(ctx context.Context) error { return r.adminFor(s).Failover(ctx, step.Addr) })
		if err != nil {
			return fmt.Errorf("while failing %s over before its upgrade: %w", step.Pod, err)
		}
		if done {
			metrics.RedisFailovers.WithLabelValues(s.rc.Namespace, s.rc.Name, "coordinated").Inc()
			r.event(s, corev1.EventTypeNormal, "FailedOver", "Upgrade", "a replica took over from %s before its pod restarts", step.Pod)
		}
	case plan.StepGrowClaims:
		return r.growClaims(ctx, s)
	case plan.StepDeleteClaims:
		return r.deleteLeftClaims(ctx, s)
	case plan.StepRecreateStatefulSet:
		return r.recreateStatefulSet(ctx, s)
	case plan.StepReplacePod:
		return r.replacePod(ctx, s, step.Pod)
	case plan.StepReloadCertificates:
		return r.reloadCertificates(ctx, s)
	case plan.StepAutoscale:
		r.actAutoscale(s)
	case plan.StepRestoreShard:
		return r.fenced(ctx, func() error { return r.restoreShard(s) })
	case plan.StepRecordReload:
		r.recordReload(s)
	case plan.StepReloadShard:
		return r.fenced(ctx, func() error { return r.reloadShard(s) })
	case plan.StepFinishReload:
		return r.finishReload(ctx, s)
	case plan.StepAbandonReload:
		return r.abandonReload(ctx, s)
	case plan.StepSetMemory:
		return r.setMemory(ctx, s)
	case plan.StepSetCoverage:
		return r.setCoverage(ctx, s)
	case plan.StepAnnounce:
		return r.announce(ctx, s)
	case plan.StepSetWriteSafety:
		return r.setWriteSafety(ctx, s)
	case plan.StepWriteRecord:
		return r.writeRecord(ctx, s)
	case plan.StepAddPassword:
		return r.fenced(ctx, func() error { return r.addPassword(ctx, s) })
	case plan.StepKeepOnlyPassword:
		return r.fenced(ctx, func() error { return r.keepOnlyPassword(ctx, s) })
	default:
		return fmt.Errorf("the planner chose step %q, which this operator does not know", step.Kind)
	}
	return nil
}

// fenced runs act only while this replica may act on Redis.
func (r *RedisClusterReconciler) fenced(ctx context.Context, act func() error) error {
	if err := r.fence(ctx); err != nil {
		return err
	}
	return act()
}

// recover runs one recovery; PlanAbandon's also spends the accept-data-loss annotation.
func (r *RedisClusterReconciler) recover(ctx context.Context, s *state, action recovery.Action) error {
	if err := r.adminFor(s).Run(ctx, action); err != nil {
		return fmt.Errorf("while healing the cluster (%s): %w", action.Kind, err)
	}
	metrics.RedisRecoveries.WithLabelValues(s.rc.Namespace, s.rc.Name, string(action.Kind)).Inc()
	kind := corev1.EventTypeNormal
	switch action.Kind {
	case recovery.ActionForceFailover:
		kind = corev1.EventTypeWarning
		metrics.RedisFailovers.WithLabelValues(s.rc.Namespace, s.rc.Name, "forced").Inc()
	case recovery.ActionTakeover:
		kind = corev1.EventTypeWarning
		metrics.RedisFailovers.WithLabelValues(s.rc.Namespace, s.rc.Name, "takeover").Inc()
	case recovery.ActionAbandon:
		reloading := ""
		if st := s.next.Status.Reload; st != nil {
			reloading = st.Backup
		}
		r.event(s, corev1.EventTypeWarning, "DataLossAccepted", "Heal", "%s: %s", lossAcceptedBy(s.rc.Annotations, reloading), action.Message)
		return r.dropAcceptance(ctx, s)
	}
	r.event(s, kind, string(action.Kind), "Heal", "%s", action.Message)
	return nil
}

// moveSlots moves one budgeted batch of a rebalance or an AssignReceive reshard, exactly
// the moves the step planned (held slots pinned, full targets skipped), and counts it.
func (r *RedisClusterReconciler) moveSlots(ctx context.Context, s *state) error {
	step := &s.step
	opts := moveOptions(s)
	opts.Budget = moveBudget
	stats, err := r.adminFor(s).MoveSlots(ctx, answeringAddrs(s), step.Moves, opts)
	r.recordMoveOutcome(s, stats)
	if step.Kind == plan.StepAssign {
		a := step.Reshard
		if err != nil {
			return fmt.Errorf("while moving the slots of assignStrategies[%d]: %w", a.Index, err)
		}
		countMoves(s, stats, a.Slots-stats.Slots)
		if !stats.Partial && stats.Slots == a.Slots {
			r.event(s, corev1.EventTypeNormal, "SlotsMoved", "Scale", "assignStrategies[%d]: moved its last %d slots and %d keys to %s", a.Index, stats.Slots, stats.Keys, a.To)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("while moving slots: %w", err)
	}
	left := step.SlotsLeft - stats.Slots
	countMoves(s, stats, left)
	step.Reason = fmt.Sprintf("moving slots: %d moved, about %d left", stats.Slots, max(left, 0))
	if !stats.Partial {
		r.event(s, corev1.EventTypeNormal, "SlotsMoved", "Scale", "balanced the slots: the last batch moved %d slots and %d keys in %s",
			stats.Slots, stats.Keys, stats.Elapsed.Round(time.Millisecond))
	}
	return nil
}

// replacePod deletes a pod on an old template (exactly that pod: a UID precondition).
func (r *RedisClusterReconciler) replacePod(ctx context.Context, s *state, name string) error {
	for i := range s.pods {
		p := &s.pods[i]
		if p.Name != name {
			continue
		}
		uid := p.UID
		if err := r.Delete(ctx, p, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("while replacing pod %s: %w", name, err)
		}
		r.deletedPods.mark(uid, time.Now())
		r.event(s, corev1.EventTypeNormal, "PodReplaced", "Upgrade", "replaced pod %s to run the new template", name)
	}
	return nil
}

// event records an event on the cluster.
func (r *RedisClusterReconciler) event(s *state, kind, reason, action, format string, args ...any) {
	r.Recorder.Eventf(s.rc, nil, kind, reason, action, format, args...)
}

// answeringAddrs are the addresses of the nodes that answered.
func answeringAddrs(s *state) []string {
	var out []string
	for i := range s.snap.Nodes {
		if s.snap.Nodes[i].Answered() {
			out = append(out, s.snap.Nodes[i].Addr)
		}
	}
	return out
}

// moveOptions are the slot-move settings from spec.updateStrategy.
func moveOptions(s *state) execute.MoveOptions {
	opts := execute.MoveOptions{}
	if p := s.rc.Spec.UpdateStrategy.Pipeline; p != nil {
		opts.Pipeline = p.IntValue()
	}
	return opts
}

// bounded runs an action that may wait on Redis until the step's deadline (stepBudget).
// Running out of time is not an error: the action is idempotent and the next reconcile goes
// on from where it is; done is false then.
func bounded(ctx context.Context, act func(ctx context.Context) error) (done bool, err error) {
	err = act(ctx)
	if err != nil && errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return false, nil
	}
	return err == nil, err
}

// countMoves adds a batch of slot moves to the cluster's counters and records what is left.
func countMoves(s *state, stats execute.MoveStats, left int) {
	ns, name := s.rc.Namespace, s.rc.Name
	metrics.RedisSlotsMoved.WithLabelValues(ns, name).Add(float64(stats.Slots))
	metrics.RedisKeysMoved.WithLabelValues(ns, name).Add(float64(stats.Keys))
	metrics.RedisMigrationSlotsLeft.WithLabelValues(ns, name).Set(float64(max(left, 0)))
}

// formedFrom is the run IDs of the node processes a Form step starts from: those the
// snapshot read, all empty (planForm). A node that restarts before the step's preflight
// comes back with another run ID.
func formedFrom(s observe.Snapshot) map[string]bool {
	ids := map[string]bool{}
	for i := range s.Nodes {
		if id := s.Nodes[i].RunID(); id != "" {
			ids[id] = true
		}
	}
	return ids
}
