package redis

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

// Condition types and reasons of a RedisCluster.
const (
	ConditionReady       = "Ready"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"
	// ConditionPasswordApplied: the nodes require exactly the password Secret's password.
	ConditionPasswordApplied = "PasswordApplied"
	// ReasonPasswordCurrent and ReasonPasswordRotating are its reasons.
	ReasonPasswordCurrent  = "Current"
	ReasonPasswordRotating = "Rotating"

	ReasonClusterOK        = "ClusterOK"
	ReasonForming          = "Forming"
	ReasonPaused           = "Paused"
	ReasonNotControlled    = child.ReasonNotControlled
	ReasonReconcileError   = "ReconcileError"
	ReasonNodesUnhealthy   = "NodesUnhealthy"
	ReasonAllNodesHealthy  = "AllNodesHealthy"
	ReasonClusterNotFormed = "ClusterNotFormed"
	// ReasonDataLost: every recorded member came back without its data (or never answers).
	ReasonDataLost = "DataLost"
	// ReasonKeyConflict: a slot move stopped on keys that exist on both nodes with different
	// values (the condition names the slot and the nodes, never the keys).
	ReasonKeyConflict = "KeyConflict"
	// ReasonAuthenticationFailed: nodes refuse the password the operator has.
	ReasonAuthenticationFailed = "AuthenticationFailed"
	// ReasonPasswordInvalid: a password Secret's value is no password (a line break or a NUL
	// inside it, or nothing but a line ending; resources.RedisPassword); the condition names
	// the Secret, the key and the character.
	ReasonPasswordInvalid = "PasswordInvalid"
	// ConditionReplicasSeparated: every replica runs in another failure domain (Kubernetes
	// node, or zone) than its master, so losing one node keeps a copy of every shard.
	ConditionReplicasSeparated = "ReplicasSeparated"
	// ReasonSeparated and ReasonTooFewNodes are its reasons: the operator cannot separate
	// a shard's copies when there are fewer nodes (or zones) than a shard has members.
	ReasonSeparated   = "Separated"
	ReasonTooFewNodes = "TooFewNodes"
	// ReasonUnsupportedVersion: the spec names a Redis older than the operator supports
	// (resources.RedisMinMajor); no pod is created.
	ReasonUnsupportedVersion = "UnsupportedVersion"
)

// deriveStatus derives the whole status from the reconcile's snapshot, its health and its
// step, with the events the change of status calls for (s.reported; emitReported sends
// them): a pure function of the state, table-tested without a cluster.
func deriveStatus(s *state) {
	h := s.health
	next := s.next
	gen := s.rc.Generation
	next.Status.ObservedGeneration = gen
	if s.sts != nil {
		next.Status.Replicas = s.sts.Status.Replicas
		next.Status.ReadyReplicas = s.sts.Status.ReadyReplicas
	}
	next.Status.Nodes = nodeStatuses(s)
	memoryStatus(s)
	autoscaleStatus(s)
	volumesStatus(s)
	next.Status.SlotsAssigned, next.Status.SlotsOK, next.Status.Masters = int32(h.SlotsAssigned), int32(h.SlotsServed), int32(h.Masters) //nolint:gosec // at most 16384

	shown := s.step.Shown()
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
	initRestoreStatus(s)
	if p := restoreProgress(s); p != "" {
		// A restoring cluster serves every slot before its keys are in: not Ready until they are.
		h.Problems = append(h.Problems, p)
		if opPhase == "" && lost == "" {
			opPhase, opReason = redisv1alpha1.PhaseCreating, joinNonEmpty(p, waiting)
		}
	}
	problems := strings.Join(h.Problems, "; ")
	switch {
	case s.rc.Spec.Pause:
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
	case h.SlotsAssigned == 0 && len(s.recorded) == 0:
		reason := waiting
		if reason == "" {
			reason = fmt.Sprintf("waiting for %d Redis nodes to run before forming the cluster", resources.RedisNodes(s.rc))
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

// reportedEvent is an event the status derivation calls for, sent once the status is
// derived (emitReported).
type reportedEvent struct {
	kind, reason, action, note string
}

// report records an event of the status derivation (see reportedEvent).
func (s *state) report(kind, reason, action, format string, args ...any) {
	s.reported = append(s.reported, reportedEvent{kind: kind, reason: reason, action: action, note: fmt.Sprintf(format, args...)})
}

// emitReported sends the events the status derivation recorded.
func (r *RedisClusterReconciler) emitReported(s *state) {
	for _, e := range s.reported {
		r.Recorder.Eventf(s.rc, nil, e.kind, e.reason, e.action, "%s", e.note)
	}
}

// setSeparated says whether each shard's copies run apart; it warns once when they stop
// being, naming the pods that share a node with their master.
func setSeparated(s *state, gen int64) {
	if s.health.Masters == 0 {
		return
	}
	if len(s.health.Unseparated) == 0 {
		status.Set(&s.next.Status.Conditions, gen, ConditionReplicasSeparated, metav1.ConditionTrue, ReasonSeparated,
			"every replica runs on another Kubernetes node (and zone, where pods carry one) than its master")
		return
	}
	msg := strings.Join(s.health.Unseparated, "; ") +
		": no swap of replicas separates them; add Kubernetes nodes (a shard needs as many as it has members) or free the ones the pods cannot be scheduled on"
	if !meta.IsStatusConditionFalse(s.rc.Status.Conditions, ConditionReplicasSeparated) {
		s.report(corev1.EventTypeWarning, ReasonTooFewNodes, "Place", "%s", msg)
	}
	status.Set(&s.next.Status.Conditions, gen, ConditionReplicasSeparated, metav1.ConditionFalse, ReasonTooFewNodes, msg)
}

// setPasswordApplied says whether the nodes run the password Secret's password, or what a
// rotation under way waits for; it keeps the condition when the rotation step did not run.
func setPasswordApplied(s *state, gen int64) {
	var invalid *passwordInvalidError
	if errors.As(s.err, &invalid) {
		status.Set(&s.next.Status.Conditions, gen, ConditionPasswordApplied, metav1.ConditionFalse, ReasonPasswordInvalid, invalid.Error())
		return
	}
	if len(s.health.AuthFailed) > 0 { // whatever the record says, these nodes run another password
		status.Set(&s.next.Status.Conditions, gen, ConditionPasswordApplied, metav1.ConditionFalse, ReasonAuthenticationFailed, authFailed(s))
		return
	}
	switch s.step.Rotation {
	case "":
	case plan.RotationCurrent:
		msg := fmt.Sprintf("every node requires the password of Secret %s", resources.RedisPasswordSecretName(s.rc))
		if resources.RedisACLEnabled(s.rc) {
			msg += fmt.Sprintf(", and for the users %s and %s those of Secret %s", resources.RedisOperatorUser, resources.RedisExporterUser, resources.RedisUsersSecretName(s.rc))
		}
		status.Set(&s.next.Status.Conditions, gen, ConditionPasswordApplied, metav1.ConditionTrue, ReasonPasswordCurrent, msg)
	default:
		status.Set(&s.next.Status.Conditions, gen, ConditionPasswordApplied, metav1.ConditionFalse, ReasonPasswordRotating, s.step.Rotation)
	}
}

// missingPods names the ordinals the StatefulSet should run but has no pod for (a quota, a
// failed creation), or "".
func missingPods(s *state) string {
	if s.sts == nil || s.sts.Spec.Replicas == nil {
		return ""
	}
	have := map[int]bool{}
	for _, p := range s.pods {
		have[clusterconn.Ordinal(p.Name)] = true
	}
	var missing []string
	for i := range int(*s.sts.Spec.Replicas) {
		if !have[i] {
			missing = append(missing, fmt.Sprintf("%s-%d", s.sts.Name, i))
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("waiting for the StatefulSet to create %s", strings.Join(missing, ", "))
}

// reportLoss emits the Warning event once, when the cluster is first found lost.
func reportLoss(s *state, lost string) {
	if lost == "" {
		return
	}
	if c := meta.FindStatusCondition(s.rc.Status.Conditions, ConditionReady); c != nil && c.Reason == ReasonDataLost {
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
func setDegraded(s *state, gen int64) {
	reason, msg := degradedBecause(s)
	if reason == "" {
		reason, msg = partitioned(s.health)
	}
	if reason == "" {
		status.Set(&s.next.Status.Conditions, gen, ConditionDegraded, metav1.ConditionFalse, ReasonAllNodesHealthy, "no error")
		return
	}
	status.Set(&s.next.Status.Conditions, gen, ConditionDegraded, metav1.ConditionTrue, reason, msg)
	s.next.Status.Reason = msg
}

// degradedBecause names what keeps the operator from doing its work, or "" for nothing.
func degradedBecause(s *state) (reason, message string) {
	var notOurs *child.NotControlledError
	var lost *passwordLostError
	var invalid *passwordInvalidError
	switch {
	case s.unsupported != "":
		return ReasonUnsupportedVersion, s.unsupported
	case errors.As(s.err, &lost):
		return ReasonAuthenticationFailed, lost.Error()
	case errors.As(s.err, &invalid):
		return ReasonPasswordInvalid, invalid.Error()
	case len(s.health.AuthFailed) > 0:
		return ReasonAuthenticationFailed, authFailed(s)
	case errors.Is(s.err, execute.ErrKeyConflict):
		return ReasonKeyConflict, s.err.Error()
	case errors.As(s.err, &notOurs):
		return ReasonNotControlled, notOurs.Error()
	case s.aclRejected != nil:
		return ReasonInvalidACLRules, s.aclRejected.Error()
	case s.err != nil:
		return ReasonReconcileError, s.err.Error()
	}
	return "", ""
}

// authFailed says which nodes refuse the operator's password, and where that password is.
func authFailed(s *state) string {
	if resources.RedisACLEnabled(s.rc) {
		return fmt.Sprintf("%d Redis nodes refuse user %s with the password in Secret %q, key %q (%s): restore the password they were started with, or restart them with the new one",
			len(s.health.AuthFailed), resources.RedisOperatorUser, resources.RedisUsersSecretName(s.rc), resources.RedisUsersOperatorKey, strings.Join(s.health.AuthFailed, ", "))
	}
	return fmt.Sprintf("%d Redis nodes refuse the password in Secret %q (%s): restore the password they were started with, or restart them with the new one",
		len(s.health.AuthFailed), resources.RedisPasswordSecretName(s.rc), strings.Join(s.health.AuthFailed, ", "))
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
func nodeStatuses(s *state) []redisv1alpha1.RedisNode {
	failing := map[string]bool{} // by node id, in any joined view's opinion
	for _, o := range s.snap.Nodes {
		for _, n := range o.View {
			if !n.Myself && (n.Failed || n.PossiblyFailed) {
				failing[n.ID] = true
			}
		}
	}
	previous := map[string]redisv1alpha1.RedisNode{}
	for _, n := range s.rc.Status.Nodes {
		previous[n.Name] = n
	}
	out := make([]redisv1alpha1.RedisNode, 0, len(s.pods))
	for i := range s.pods {
		p := &s.pods[i]
		entry := redisv1alpha1.RedisNode{
			Name:       p.Name,
			DomainName: resources.RedisPodDNSName(s.rc, p.Name),
			Hostname:   p.Spec.NodeName,
			HostIP:     p.Status.HostIP,
		}
		if p.Status.PodIP != "" {
			entry.Instance = clusterconn.PodAddr(s.rc, p)
		}
		var o *observe.Observation
		if i < len(s.snap.Nodes) && s.snap.Nodes[i].Pod == p.Name {
			o = &s.snap.Nodes[i]
		}
		_, recorded := s.recorded[p.Name]
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
			case !o.Started.IsZero() && s.snap.Now.Sub(o.Started) < health.SettleTime(clusterconn.NodeTimeout):
				entry.Status, entry.Reason, entry.Message = corev1.ConditionFalse, "Settling",
					fmt.Sprintf("it started %s ago; it is trusted after cluster-node-timeout + 2 s (%s), when it has heard from every peer",
						s.snap.Now.Sub(o.Started).Round(time.Second), health.SettleTime(clusterconn.NodeTimeout))
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
