// Package report derives what a RedisCluster tells its users from one reconcile's look:
// its status (phase, conditions, nodes, memory, volumes, restore, held slots, autoscale),
// the events a change of status calls for, and the cluster's metrics. Every judgement of
// health is health.Assess's and every decision the planner's (plan.NextStep): this package
// only says what they found, in the words of the API. It holds the condition types and
// reasons of the RedisCluster controller.
package report

import (
	"crypto/x509"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/restore"
)

// Input is what one reconcile read, decided and did, as the report takes it. Derive writes
// only Next's status.
type Input struct {
	// Cluster is the RedisCluster as read (its status is the last one written); Next the
	// copy whose status Derive writes.
	Cluster, Next *redisv1alpha1.RedisCluster
	// StatefulSet is the cluster's (nil when there is none yet); Pods its pods by ordinal.
	StatefulSet *appsv1.StatefulSet
	Pods        []corev1.Pod
	// Recorded is the member record (pod -> node ID).
	Recorded map[string]string
	// Snap is the look at the nodes (no Nodes when it could not be taken), Health what
	// clients would see of it, Step the one step planned from it.
	Snap   observe.Snapshot
	Health health.Health
	Step   plan.Step
	// Err is the reconcile's first error (a *PasswordInvalidError, a *PasswordLostError,
	// execute.ErrKeyConflict and *child.NotControlledError have reasons of their own).
	Err error
	// Unsupported says why the spec's Redis version is refused, ACLRejected why a node
	// refused the spec's new ACL rules ("" for neither).
	Unsupported, ACLRejected string
	// Restore is the backup a restoring cluster loads (nil when none, or done).
	Restore *restore.Source
	// External are the pods' external hosts, Announce what the nodes are to announce (nil
	// when nothing is), Certificate the TLS Secret's certificate (nil without TLS or while
	// it does not verify).
	External    map[string]string
	Announce    *plan.Announce
	Certificate *x509.Certificate
	// Held are the slots this reconcile's slot move held as too big to move.
	Held []layout.HeldSlot
	// Memory and WriteSafety are the configuration the nodes should run with (Memory's
	// Policy "" when the generated redis.conf could not be read).
	Memory      resources.RedisMemory
	WriteSafety resources.RedisWriteSafety
	// Volumes are the pods' claims and the size the spec asks of them; VolumesRefusedNow:
	// the API server refused a claim's growth in this reconcile.
	Volumes           plan.Volumes
	VolumesRefusedNow bool

	events []Event
}

// Event is an event a change of status calls for (a Warning when a partition starts, say).
type Event struct {
	// Type is corev1.EventTypeNormal or EventTypeWarning; Reason, Action and Note as in
	// events.EventRecorder.Eventf.
	Type, Reason, Action, Note string
}
