package report

import (
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// Derive derives the whole status into s.Next from the reconcile's snapshot, its health and
// its step, and returns the events the change of status calls for, to be sent once the
// status is written: a pure function of s, table-tested without a cluster.
func Derive(s *Input) []Event {
	s.events = nil
	derive(s)
	return s.events
}

// derive is Derive without its events' reset.
func derive(s *Input) {
	h := s.Health
	next := s.Next
	gen := s.Cluster.Generation
	next.Status.ObservedGeneration = gen
	if s.StatefulSet != nil {
		next.Status.Replicas = s.StatefulSet.Status.Replicas
		next.Status.ReadyReplicas = s.StatefulSet.Status.ReadyReplicas
	}
	next.Status.Nodes = nodeStatuses(s)
	memoryStatus(s)
	autoscaleStatus(s)
	volumesStatus(s)
	next.Status.SlotsAssigned, next.Status.SlotsOK, next.Status.Masters = int32(h.SlotsAssigned), int32(h.SlotsServed), int32(h.Masters) //nolint:gosec // at most 16384

	shown := s.Step.Shown()
	opPhase, opReason, waiting, lost := redisv1alpha1.Phase(shown.Operation), shown.Reason, "", ""
	switch {
	case shown.Kind == plan.StepLost:
		opPhase, lost = "", shown.Reason
	case opPhase == "" && shown.Kind == plan.StepWait:
		waiting = shown.Reason
	}
	if missing := missingPods(s); missing != "" && waiting == "" {
		waiting = missing
	}
	InitRestoreStatus(s.Next, s.Restore)
	if p := RestoreProgress(s.Next); p != "" {
		// A restoring cluster serves every slot before its keys are in: not Ready until they are.
		h.Problems = append(h.Problems, p)
		if opPhase == "" && lost == "" {
			opPhase, opReason = redisv1alpha1.PhaseCreating, joinNonEmpty(p, waiting)
		}
	}
	problems := strings.Join(h.Problems, "; ")
	switch {
	case s.Cluster.Spec.Pause:
		setPhaseKeep(next, "paused: spec.pause is true, so the operator makes no change to the StatefulSet or the Redis topology until it is false")
		status.Set(&next.Status.Conditions, gen, ConditionProgressing, metav1.ConditionFalse, ReasonPaused, next.Status.Reason)
	case lost != "":
		setPhase(next, redisv1alpha1.PhaseFailed, lost)
		status.Set(&next.Status.Conditions, gen, ConditionProgressing, metav1.ConditionFalse, ReasonDataLost, lost)
	case opPhase != "":
		setPhase(next, opPhase, opReason)
		status.Set(&next.Status.Conditions, gen, ConditionProgressing, metav1.ConditionTrue, string(opPhase), opReason)
	case h.Ready() && waiting == "":
		setPhase(next, redisv1alpha1.PhaseRunning, "")
		status.Set(&next.Status.Conditions, gen, ConditionProgressing, metav1.ConditionFalse, ReasonClusterOK, "every slot is served and every node is connected")
	case h.SlotsAssigned == 0 && len(s.Recorded) == 0:
		reason := waiting
		if reason == "" {
			reason = fmt.Sprintf("waiting for %d Redis nodes to run before forming the cluster", resources.RedisNodes(s.Cluster))
		}
		setPhase(next, redisv1alpha1.PhaseCreating, reason)
		status.Set(&next.Status.Conditions, gen, ConditionProgressing, metav1.ConditionTrue, ReasonForming, reason)
	case h.SlotsServed < nodes.SlotCount:
		setPhase(next, redisv1alpha1.PhaseFailed, joinNonEmpty(problems, waiting))
		status.Set(&next.Status.Conditions, gen, ConditionProgressing, metav1.ConditionTrue, ReasonNodesUnhealthy, next.Status.Reason)
	default:
		reason := joinNonEmpty("every slot is served; "+problems, waiting)
		setPhase(next, redisv1alpha1.PhaseHealing, reason)
		status.Set(&next.Status.Conditions, gen, ConditionProgressing, metav1.ConditionTrue, string(redisv1alpha1.PhaseHealing), reason)
	}
	switch {
	case h.Ready():
		status.Set(&next.Status.Conditions, gen, ConditionReady, metav1.ConditionTrue, ReasonClusterOK,
			fmt.Sprintf("%d masters serve all 16384 slots to clients entering at any node", h.Masters))
	case lost != "":
		status.Set(&next.Status.Conditions, gen, ConditionReady, metav1.ConditionFalse, ReasonDataLost, lost)
	default:
		status.Set(&next.Status.Conditions, gen, ConditionReady, metav1.ConditionFalse, ReasonClusterNotFormed,
			fmt.Sprintf("%d of 16384 slots served: %s", h.SlotsServed, problems))
	}
	setPasswordApplied(s, gen)
	reportLoss(s, lost)
	setDegraded(s, gen)
	reportPartition(s)
	setSeparated(s, gen)
	setWritesAccepted(s, gen)
	setExternallyReachable(s, gen)
	heldSlotsStatus(s, gen)
}

// report records an event of the status derivation (see Event).
func (s *Input) report(kind, reason, action, format string, args ...any) {
	s.events = append(s.events, Event{Type: kind, Reason: reason, Action: action, Note: fmt.Sprintf(format, args...)})
}

// setSeparated says whether each shard's copies run apart; it warns once when they stop
// being, naming the pods that share a node with their master.
func setSeparated(s *Input, gen int64) {
	if s.Health.Masters == 0 {
		return
	}
	if len(s.Health.Unseparated) == 0 {
		status.Set(&s.Next.Status.Conditions, gen, ConditionReplicasSeparated, metav1.ConditionTrue, ReasonSeparated,
			"every replica runs on another Kubernetes node (and zone, where pods carry one) than its master")
		return
	}
	msg := strings.Join(s.Health.Unseparated, "; ") +
		": no swap of replicas separates them; add Kubernetes nodes (a shard needs as many as it has members) or free the ones the pods cannot be scheduled on"
	if !meta.IsStatusConditionFalse(s.Cluster.Status.Conditions, ConditionReplicasSeparated) {
		s.report(corev1.EventTypeWarning, ReasonTooFewNodes, "Place", "%s", msg)
	}
	status.Set(&s.Next.Status.Conditions, gen, ConditionReplicasSeparated, metav1.ConditionFalse, ReasonTooFewNodes, msg)
}

// setPasswordApplied says whether the nodes run the password Secret's password, or what a
// rotation under way waits for; it keeps the condition when the rotation step did not run.
func setPasswordApplied(s *Input, gen int64) {
	var invalid *PasswordInvalidError
	if errors.As(s.Err, &invalid) {
		status.Set(&s.Next.Status.Conditions, gen, ConditionPasswordApplied, metav1.ConditionFalse, ReasonPasswordInvalid, invalid.Error())
		return
	}
	if len(s.Health.AuthFailed) > 0 { // whatever the record says, these nodes run another password
		status.Set(&s.Next.Status.Conditions, gen, ConditionPasswordApplied, metav1.ConditionFalse, ReasonAuthenticationFailed, authFailed(s))
		return
	}
	switch s.Step.Rotation {
	case "":
	case plan.RotationCurrent:
		msg := fmt.Sprintf("every node requires the password of Secret %s", resources.RedisPasswordSecretName(s.Cluster))
		if resources.RedisACLEnabled(s.Cluster) {
			msg += fmt.Sprintf(", and for the users %s and %s those of Secret %s", resources.RedisOperatorUser, resources.RedisExporterUser, resources.RedisUsersSecretName(s.Cluster))
		}
		status.Set(&s.Next.Status.Conditions, gen, ConditionPasswordApplied, metav1.ConditionTrue, ReasonPasswordCurrent, msg)
	default:
		status.Set(&s.Next.Status.Conditions, gen, ConditionPasswordApplied, metav1.ConditionFalse, ReasonPasswordRotating, s.Step.Rotation)
	}
}

// missingPods names the ordinals the StatefulSet should run but has no pod for (a quota, a
// failed creation), or "".
func missingPods(s *Input) string {
	if s.StatefulSet == nil || s.StatefulSet.Spec.Replicas == nil {
		return ""
	}
	have := map[int]bool{}
	for _, p := range s.Pods {
		have[clusterconn.Ordinal(p.Name)] = true
	}
	var missing []string
	for i := range int(*s.StatefulSet.Spec.Replicas) {
		if !have[i] {
			missing = append(missing, fmt.Sprintf("%s-%d", s.StatefulSet.Name, i))
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("waiting for the StatefulSet to create %s", strings.Join(missing, ", "))
}

// reportLoss emits the Warning event once, when the cluster is first found lost.
func reportLoss(s *Input, lost string) {
	if lost == "" {
		return
	}
	if c := meta.FindStatusCondition(s.Cluster.Status.Conditions, ConditionReady); c != nil && c.Reason == ReasonDataLost {
		return
	}
	s.report(corev1.EventTypeWarning, ReasonDataLost, "Create", "%s", lost)
}

func joinNonEmpty(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + "; " + b
}

// setDegraded reports a step error, else a network partition the look sees.
func setDegraded(s *Input, gen int64) {
	reason, msg := degradedBecause(s)
	if reason == "" {
		reason, msg = partitioned(s.Health)
	}
	if reason == "" {
		status.Set(&s.Next.Status.Conditions, gen, ConditionDegraded, metav1.ConditionFalse, ReasonAllNodesHealthy, "no error")
		return
	}
	status.Set(&s.Next.Status.Conditions, gen, ConditionDegraded, metav1.ConditionTrue, reason, msg)
	s.Next.Status.Reason = msg
}

// degradedBecause names what keeps the operator from doing its work, or "" for nothing.
func degradedBecause(s *Input) (reason, message string) {
	var notOurs *child.NotControlledError
	var lost *PasswordLostError
	var invalid *PasswordInvalidError
	switch {
	case s.Unsupported != "":
		return ReasonUnsupportedVersion, s.Unsupported
	case errors.As(s.Err, &lost):
		return ReasonAuthenticationFailed, lost.Error()
	case errors.As(s.Err, &invalid):
		return ReasonPasswordInvalid, invalid.Error()
	case len(s.Health.AuthFailed) > 0:
		return ReasonAuthenticationFailed, authFailed(s)
	case errors.Is(s.Err, execute.ErrKeyConflict):
		return ReasonKeyConflict, s.Err.Error()
	case errors.As(s.Err, &notOurs):
		return ReasonNotControlled, notOurs.Error()
	case s.ACLRejected != "":
		return ReasonInvalidACLRules, s.ACLRejected
	case s.Err != nil:
		return ReasonReconcileError, s.Err.Error()
	}
	return "", ""
}

// authFailed says which nodes refuse the operator's password, and where that password is.
func authFailed(s *Input) string {
	if resources.RedisACLEnabled(s.Cluster) {
		return fmt.Sprintf("%d Redis nodes refuse user %s with the password in Secret %q, key %q (%s): restore the password they were started with, or restart them with the new one",
			len(s.Health.AuthFailed), resources.RedisOperatorUser, resources.RedisUsersSecretName(s.Cluster), resources.RedisUsersOperatorKey, strings.Join(s.Health.AuthFailed, ", "))
	}
	return fmt.Sprintf("%d Redis nodes refuse the password in Secret %q (%s): restore the password they were started with, or restart them with the new one",
		len(s.Health.AuthFailed), resources.RedisPasswordSecretName(s.Cluster), strings.Join(s.Health.AuthFailed, ", "))
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

// nodeStatuses is the seed's per-node list: one entry per pod, from the snapshot: what the
// node says of itself, or why it does not answer. lastTransitionTime moves only when a
// node's status does.
func nodeStatuses(s *Input) []redisv1alpha1.RedisNode {
	failing := map[string]bool{} // by node id, in any joined view's opinion
	for _, o := range s.Snap.Nodes {
		for _, n := range o.View {
			if !n.Myself && (n.Failed || n.PossiblyFailed) {
				failing[n.ID] = true
			}
		}
	}
	previous := map[string]redisv1alpha1.RedisNode{}
	for _, n := range s.Cluster.Status.Nodes {
		previous[n.Name] = n
	}
	out := make([]redisv1alpha1.RedisNode, 0, len(s.Pods))
	for i := range s.Pods {
		p := &s.Pods[i]
		entry := redisv1alpha1.RedisNode{
			Name:       p.Name,
			DomainName: resources.RedisPodDNSName(s.Cluster, p.Name),
			Hostname:   p.Spec.NodeName,
			HostIP:     p.Status.HostIP,
		}
		if p.Status.PodIP != "" {
			entry.Instance = clusterconn.PodAddr(s.Cluster, p)
		}
		var o *observe.Observation
		if i < len(s.Snap.Nodes) && s.Snap.Nodes[i].Pod == p.Name {
			o = &s.Snap.Nodes[i]
		}
		_, recorded := s.Recorded[p.Name]
		switch {
		case p.Status.Phase == corev1.PodPending || entry.Instance == "":
			entry.Status, entry.Reason, entry.Message = corev1.ConditionFalse, "PodPending", "the pod is not running yet"
		case o == nil || !o.Answered():
			entry.Status, entry.Reason, entry.Message = corev1.ConditionFalse, "Unreachable", "the node does not answer"
			if o != nil && conn.IsAuthError(o.Err) {
				entry.Reason, entry.Message = "AuthenticationFailed", "the node refuses the password"
			} else if recorded {
				entry.Message = "the node does not answer; if its volume was lost, its start guard holds it until its old role is settled"
			}
		case !o.Joined():
			entry.Status, entry.Reason, entry.Message = corev1.ConditionFalse, "NotInCluster", "the node is not part of the cluster yet"
		default:
			n, _ := o.Self()
			entry.NodeID, entry.Type, entry.Slots = n.ID, n.Role, nodes.FormatSlotRanges(n.Slots)
			entry.MasterNodeID = n.MasterID
			if n.IsMaster() {
				entry.MasterNodeID = n.ID
			}
			switch {
			case failing[n.ID]:
				entry.Status, entry.Reason, entry.Message = corev1.ConditionFalse, "Failing", "another node flags it as failing"
			case o.Info["cluster_state"] != "ok":
				entry.Status, entry.Reason, entry.Message = corev1.ConditionFalse, "ClusterStateFail", "it reports cluster_state "+o.Info["cluster_state"]
			case health.SettleLeft(&s.Snap, o) > 0:
				entry.Status, entry.Reason, entry.Message = corev1.ConditionFalse, "Settling",
					fmt.Sprintf("it started %s ago; it is trusted after cluster-node-timeout + 2 s (%s), when it has heard from every peer",
						s.Snap.Now.Sub(o.Started).Round(time.Second), health.SettleTime(s.Snap.NodeTimeout))
			case n.Role == nodes.RoleSlave && !o.InSync():
				entry.Status, entry.Reason, entry.Message = corev1.ConditionFalse, "ReplicationDown", replicationProblem(o)
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

// replicationProblem says why a replica is not in sync with its master.
func replicationProblem(o *observe.Observation) string {
	if link := o.Replication["master_link_status"]; link != "up" {
		return "its link to its master is " + link
	}
	return "a full sync from its master is under way"
}
