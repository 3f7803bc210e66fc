package redis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// ensureConfigMap writes redis.conf, merging the user's ConfigMap (spec.pod[0].configmap).
func (r *RedisClusterReconciler) ensureConfigMap(ctx context.Context, s *state) error {
	userConf := ""
	if name := resources.RedisPodSpec(s.rc).Configmap; name != "" {
		cm := &corev1.ConfigMap{} // the user's: not in the cache, which holds only the operator's own
		if err := r.userObject(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return &child.MissingError{Msg: fmt.Sprintf("spec.pod[0].configmap: ConfigMap %q not found: create it with a %q key or remove the field", name, resources.RedisUserConfigKey)}
			}
			return fmt.Errorf("while reading ConfigMap %s: %w", name, err)
		}
		userConf = cm.Data[resources.RedisUserConfigKey]
		if conflict := resources.RedisUserConfConflict(s.rc, userConf); conflict != "" {
			return errors.New(conflict)
		}
	}
	cm := resources.RedisConfigMap(s.rc, userConf)
	maps.Copy(cm.Data, resources.RedisAnnounceFiles(s.rc, s.external))
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, cm, child.MergeConfigMap)
	r.record(s, live, outcome, err)
	return err
}

func (r *RedisClusterReconciler) ensureServices(ctx context.Context, s *state) error {
	services := []*corev1.Service{resources.RedisHeadlessService(s.rc), resources.RedisClientService(s.rc)}
	if resources.RedisOnNodePorts(s.rc) {
		// No one Service port reaches every node when each listens on its own: clients inside
		// start from any node's <pod>-external Service (port 6379) or node address instead.
		services = services[:1]
	}
	for _, svc := range services {
		live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, svc, child.MergeService)
		r.record(s, live, outcome, err)
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *RedisClusterReconciler) ensurePodDisruptionBudget(ctx context.Context, s *state) error {
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, resources.RedisPodDisruptionBudget(s.rc), child.MergePodDisruptionBudget)
	r.record(s, live, outcome, err)
	return err
}

// ensureStatefulSet creates the StatefulSet with spec.replicas pods and keeps its template
// current, with the pods it has: the planner changes their number (StepGrow, and
// StepShrink once a scale in's leaving nodes are out of the cluster). A template change
// restarts no pod by itself (OnDelete): the upgrade steps replace them one at a time.
func (r *RedisClusterReconciler) ensureStatefulSet(ctx context.Context, s *state) error {
	if err := r.readStatefulSetIfAny(ctx, s); err != nil {
		return err
	}
	if statefulSetHold(s) != nil && s.sts != nil {
		return nil // the pods keep the rules they run until a node took the new ones (readACLVerdict)
	}
	replicas := resources.RedisNodes(s.rc)
	if s.sts != nil {
		replicas = ptr.Deref(s.sts.Spec.Replicas, replicas)
	}
	return r.writeStatefulSet(ctx, s, replicas)
}

// readStatefulSet reads the StatefulSet from the cache when its children are not due to be
// ensured; a missing one is ensured at once.
func (r *RedisClusterReconciler) readStatefulSet(ctx context.Context, s *state) error {
	if err := r.readStatefulSetIfAny(ctx, s); err != nil || s.sts != nil {
		return err
	}
	return r.ensureStatefulSet(ctx, s)
}

// readStatefulSetIfAny reads the StatefulSet from the cache; s.sts stays nil without one.
func (r *RedisClusterReconciler) readStatefulSetIfAny(ctx context.Context, s *state) error {
	live := &appsv1.StatefulSet{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: s.rc.Name}, live)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("while reading StatefulSet %s: %w", s.rc.Name, err)
	}
	s.sts = live
	return nil
}

// warnUnsupported records a Warning event when the cluster's Redis version is newly refused.
func (r *RedisClusterReconciler) warnUnsupported(s *state) {
	if c := meta.FindStatusCondition(s.rc.Status.Conditions, report.ConditionDegraded); c == nil || c.Reason != report.ReasonUnsupportedVersion || c.Message != s.unsupported {
		r.event(s, corev1.EventTypeWarning, report.ReasonUnsupportedVersion, "Reconcile", "%s", s.unsupported)
	}
}

// writeStatefulSet is the one writer of the StatefulSet: the spec's template with replicas
// pods. It writes nothing while the spec's new ACL rules are unchecked or a node refused
// them (readACLVerdict, checkACLRules), nor
// while the StatefulSet is being deleted with its pods orphaned (recreateStatefulSet): once
// it is gone, this creates it again, with the spec's claim templates, and it adopts the pods.
func (r *RedisClusterReconciler) writeStatefulSet(ctx context.Context, s *state, replicas int32) error {
	if err := statefulSetHold(s); err != nil && s.sts != nil {
		return err
	}
	if s.sts != nil && !s.sts.DeletionTimestamp.IsZero() {
		return nil
	}
	sts, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, resources.RedisStatefulSet(s.rc, replicas), child.MergeStatefulSet)
	r.record(s, sts, outcome, err)
	if err != nil {
		return err
	}
	s.sts = sts
	return nil
}

// statefulSetHold is why the StatefulSet may not be written now, nil when it may: new ACL
// rules a node refused, an unsupported Redis version (prepare then does not ensure the
// children), new ACL rules no node was asked about yet. The planner waits on the same
// holds (plannerDesired: TemplateHeld, Refused).
func statefulSetHold(s *state) error {
	switch {
	case s.aclRejected != nil:
		return s.aclRejected
	case s.unsupported != "":
		return fmt.Errorf("%s: the StatefulSet keeps the version its pods run", s.unsupported)
	case s.aclUnchecked:
		return errors.New("the new ACL rules were not checked on a node yet: the StatefulSet keeps the rules the pods run")
	}
	return nil
}

// deleteLeftClaims deletes the claims the step names (StepDeleteClaims), each only while it
// is the claim the look listed (its UID): one made again meanwhile by a scale out stays.
func (r *RedisClusterReconciler) deleteLeftClaims(ctx context.Context, s *state) error {
	for _, c := range s.volumes.Left {
		if !slices.Contains(s.step.Claims, c.Name) {
			continue
		}
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: s.rc.Namespace, Name: c.Name}}
		uid := types.UID(c.UID)
		if err := r.Delete(ctx, claim, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("while deleting claim %s: %w", c.Name, err)
		}
	}
	r.event(s, corev1.EventTypeNormal, "ClaimsDeleted", "Scale", "deleted the claims of the pods the scale in removed: %s", strings.Join(s.step.Claims, ", "))
	return nil
}

// deleteClaims deletes the cluster's claims of ordinals at or above from, one by one, each
// only if it is still the claim that was listed (the operator has no deletecollection grant).
func (r *RedisClusterReconciler) deleteClaims(ctx context.Context, rc *redisv1alpha1.RedisCluster, from int) error {
	claims := &corev1.PersistentVolumeClaimList{}
	if err := r.List(ctx, claims, client.InNamespace(rc.Namespace),
		client.MatchingLabels(objectlabels.SelectorLabels(objectlabels.RedisClusterKind, rc.Name))); err != nil {
		return fmt.Errorf("while listing the claims of %s: %w", rc.Name, err)
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if clusterconn.Ordinal(c.Name) < from || !c.DeletionTimestamp.IsZero() {
			continue
		}
		if err := r.Delete(ctx, c, client.Preconditions{UID: &c.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("while deleting claim %s: %w", c.Name, err)
		}
	}
	return nil
}

// record emits the events of a child's outcome (see child.RecordOutcome).
func (r *RedisClusterReconciler) record(s *state, live client.Object, outcome child.Outcome, err error) {
	child.RecordOutcome(r.Recorder, s.rc, s.rc.Status.Conditions, live, outcome, err)
}
