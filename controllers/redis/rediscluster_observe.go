package redis

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/loading"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodetls"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// readMembers reads the member record (the pods that joined the formed cluster, with their
// node IDs). It outlives every node, so observing can never forget that a cluster was formed.
func (r *RedisClusterReconciler) readMembers(ctx context.Context, s *state) error {
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RedisMembersConfigMapName(s.rc)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		s.recorded = map[string]string{}
	case err != nil:
		return fmt.Errorf("while reading the member record of %s: %w", s.rc.Name, err)
	default:
		s.recorded = cm.Data
		if s.recorded == nil {
			s.recorded = map[string]string{}
		}
		s.recordExists = true
	}
	return nil
}

// takeSnapshot takes the reconcile's one look: the pods (Pending, silent and missing ones
// included) with every pod's node read once, judged by health.Assess. The plan and the
// status are derived from it alone.
func (r *RedisClusterReconciler) takeSnapshot(ctx context.Context, s *state) {
	if s.recorded == nil {
		if err := r.readMembers(ctx, s); err != nil && s.err == nil {
			s.err = err
		}
	}
	if err := r.listPods(ctx, s); err != nil && s.err == nil {
		s.err = err
	}
	obs := clusterconn.PodObservations(s.rc, s.pods, func(p *corev1.Pod) bool { return r.deletedPods.pending(p, time.Now()) })
	for i := range obs {
		obs[i].Err = s.silent[obs[i].Addr] // not read again (observe.Observe)
	}
	if s.login().Password != "" {
		r.adminFor(s).Observe(ctx, obs)
	} else {
		for i := range obs {
			obs[i].Err = fmt.Errorf("the password is not known")
		}
	}
	now := time.Now()
	s.snap = observe.Snapshot{
		Nodes: obs, Members: s.recorded, Masters: resources.RedisMasters(s.rc),
		ReplicasPerMaster: resources.RedisReplicasPerMaster(s.rc), NodeTimeout: clusterconn.NodeTimeout, Now: now,
		FormedFrom: r.formed.from(client.ObjectKeyFromObject(s.rc), now, health.SettleTime(clusterconn.NodeTimeout)),
	}
	s.snap.CheckIdentity()
	r.checkCertificates(ctx, s)
	r.readConf(ctx, s)
	r.checkCoverage(s)
	r.readBackupsUnderWay(ctx, s)
	s.health = health.Assess(s.snap)
	s.announce = r.plannerAnnounce(s)
}

// plannerDesired is the desired cluster as the planner takes it (plan.Desired): the spec,
// the StatefulSet and what the status recorded.
func (r *RedisClusterReconciler) plannerDesired(s *state) plan.Desired {
	rc := s.rc
	spec := plan.Desired{
		Name: rc.Name, Paused: rc.Spec.Pause, Refused: s.unsupported, Replicas: int(resources.RedisNodes(rc)), MembersRecorded: s.recordExists,
		AcceptDataLoss: rc.Annotations[AcceptDataLossAnnotation] == "true", AcceptAnnotation: AcceptDataLossAnnotation,
		Rotation: r.credKeeper().Rotation(s.rc, &s.creds), Restore: loading.Restore(s.rc, s.restore), Memory: memoryTarget(s), Coverage: s.coverage,
		WriteSafety: plan.WriteSafety(s.writeSafety),
		ReloadFrom:  rc.Annotations[loading.RestoreLostShardsAnnotation], ReloadAnnotation: loading.RestoreLostShardsAnnotation, Reload: loading.Reload(s.rc, s.reload),
	}
	spec.HeldSlots = report.HeldSlots(s.rc, s.snap)
	plannerAutoscale(s, &spec)
	spec.CARotation, spec.GeneratedCA, spec.GeneratedCert = nodetls.CARotation(s.rc, &s.certs), nodetls.GeneratedCA(s.rc, &s.certs), nodetls.GeneratedCert(s.rc, &s.certs, s.tlsExternalHosts())
	spec.Volumes = s.volumes
	spec.Announce = s.announce
	spec.Archived = rc.Spec.Archive != nil
	switch {
	case s.aclRejected != nil:
		spec.TemplateHeld = s.aclRejected.Error()
	case s.aclUnchecked:
		spec.TemplateHeld, spec.ACLRulesUnchecked = "the new ACL rules were not checked on a node yet", true
	}
	if s.sts != nil {
		spec.StatefulSetReplicas, spec.UpdateRevision = int(ptr.Deref(s.sts.Spec.Replicas, 0)), s.sts.Status.UpdateRevision
	}
	spec.StatefulSetMissing = s.sts == nil
	if c := meta.FindStatusCondition(rc.Status.Conditions, report.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		spec.NotReadySince = c.LastTransitionTime.Time
	}
	if rc.Spec.UpdateStrategy.Type == redisv1alpha1.AssignReceive {
		spec.Assign = &plan.Assignment{Targets: rc.Status.AssignTargets, Recorded: rc.Status.AssignGeneration == rc.Generation}
		for _, a := range rc.Spec.UpdateStrategy.AssignStrategies {
			from := strings.Split(a.FromReplicas, ",")
			for j := range from {
				from[j] = strings.TrimSpace(from[j])
			}
			spec.Assign.Strategies = append(spec.Assign.Strategies, plan.Strategy{Slots: int(a.Slots), From: from})
		}
	}
	return spec
}

// podClusterIndex indexes pods by the RedisCluster they belong to (their name and instance
// labels), so a look takes its cluster's pods from the cache's index instead of matching
// the labels of every pod in the namespace (120 for 20 clusters of six, each look).
const podClusterIndex = "rediscluster.pod.instance"

// podCluster is the index function of podClusterIndex.
func podCluster(obj client.Object) []string {
	labels := obj.GetLabels()
	if labels[objectlabels.LabelName] != objectlabels.RedisClusterKind || labels[objectlabels.LabelInstance] == "" {
		return nil
	}
	return []string{labels[objectlabels.LabelInstance]}
}

// listPods reads the cluster's pods, ordered by their StatefulSet ordinal: through
// podClusterIndex once SetupWithManager registered it, else by their labels.
func (r *RedisClusterReconciler) listPods(ctx context.Context, s *state) error {
	pods, err := r.clusterPods(ctx, s.rc)
	s.pods = pods
	return err
}

// clusterPods are rc's pods by ordinal, as the cache holds them.
func (r *RedisClusterReconciler) clusterPods(ctx context.Context, rc *redisv1alpha1.RedisCluster) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	// The pods are only read (never written to), so the cache's objects are used as they
	// are, without a deep copy each look.
	opts := []client.ListOption{client.InNamespace(rc.Namespace), client.UnsafeDisableDeepCopy,
		client.MatchingLabels(objectlabels.SelectorLabels(objectlabels.RedisClusterKind, rc.Name))}
	if r.podsIndexed {
		opts = append(opts, client.MatchingFields{podClusterIndex: rc.Name})
	}
	if err := r.List(ctx, pods, opts...); err != nil {
		return nil, fmt.Errorf("while listing the pods of %s: %w", rc.Name, err)
	}
	clusterconn.SortByOrdinal(pods.Items)
	return pods.Items, nil
}

// writeMembers writes the member record (pod -> node ID).
func (r *RedisClusterReconciler) writeMembers(ctx context.Context, s *state, members map[string]string) error {
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, resources.RedisMembersConfigMap(s.rc, members), child.MergeConfigMap)
	r.record(s, live, outcome, err)
	if err != nil {
		return err
	}
	s.recorded, s.recordExists = members, true
	return nil
}
