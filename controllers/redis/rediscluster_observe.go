package redis

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/middleware-operator/middleware-operator/internal/child"
	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// nodeTimeout is the cluster-node-timeout the generated redis.conf sets.
const nodeTimeout = 5 * time.Second

// readMembers reads the member record (the pods that joined the formed cluster, with their
// node IDs). It outlives every node, so observing can never forget that a cluster was formed.
func (r *RedisClusterReconciler) readMembers(ctx context.Context, s *state) (*ctrl.Result, error) {
	cm := &corev1.ConfigMap{}
	err := r.Get(ctx, client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RedisMembersConfigMapName(s.rc)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		s.recorded = map[string]string{}
	case err != nil:
		return nil, fmt.Errorf("while reading the member record of %s: %w", s.rc.Name, err)
	default:
		s.recorded = cm.Data
		if s.recorded == nil {
			s.recorded = map[string]string{}
		}
		s.recordExists = true
	}
	return nil, nil
}

// observeNodes takes the reconcile's one snapshot: the pods (Pending, silent and missing
// ones included), and every pod's node read once. The steps after it act on what answers,
// and the status is derived from it.
func (r *RedisClusterReconciler) observeNodes(ctx context.Context, s *state) (*ctrl.Result, error) {
	if err := r.snapshot(ctx, s); err != nil {
		return nil, err
	}
	if len(s.health.AuthFailed) > 0 {
		// Nothing the operator would do could be right while it cannot read the nodes.
		return &ctrl.Result{RequeueAfter: healthInterval}, nil
	}
	return nil, nil
}

// snapshot lists the pods and reads every pod's node, once per reconcile.
func (r *RedisClusterReconciler) snapshot(ctx context.Context, s *state) error {
	if s.observed {
		return nil
	}
	if err := r.listPods(ctx, s); err != nil {
		return err
	}
	obs := make([]redisadmin.Observation, len(s.pods))
	for i := range s.pods {
		p := &s.pods[i]
		// Kubernetes 1.35+ copies the node's zone onto the pod when it is scheduled (the
		// PodTopologyLabels admission plugin), so no Node has to be read.
		obs[i] = redisadmin.Observation{Pod: p.Name, Host: p.Spec.NodeName, Zone: p.Labels[corev1.LabelTopologyZone], Leaving: leaving(s, p)}
		if p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
			obs[i].Addr = podAddr(p)
		}
	}
	if s.login().Password != "" {
		r.adminFor(s).Observe(ctx, obs)
	} else {
		for i := range obs {
			obs[i].Err = fmt.Errorf("the password is not known")
		}
	}
	s.snap = redisadmin.Snapshot{
		Nodes: obs, Members: s.recorded, Masters: resources.RedisMasters(s.rc),
		ReplicasPerMaster: resources.RedisReplicasPerMaster(s.rc), NodeTimeout: nodeTimeout, Now: time.Now(),
	}
	s.snap.CheckIdentity()
	s.health = redisadmin.Assess(s.snap)
	s.members = s.members[:0]
	for i := range obs {
		o := &obs[i]
		if !o.Answered() {
			continue
		}
		self, _ := o.Self()
		s.members = append(s.members, member{pod: &s.pods[i], addr: o.Addr, self: self, view: o.View})
	}
	s.observed = true
	return nil
}

// listPods reads the cluster's pods, ordered by their StatefulSet ordinal.
func (r *RedisClusterReconciler) listPods(ctx context.Context, s *state) error {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(s.rc.Namespace),
		client.MatchingLabels(resources.SelectorLabels(resources.RedisClusterKind, s.rc.Name))); err != nil {
		return fmt.Errorf("while listing the pods of %s: %w", s.rc.Name, err)
	}
	s.pods = pods.Items
	sortByOrdinal(s.pods)
	return nil
}

// recordMembers keeps the member record current (redisadmin.Record): joined pods with
// their IDs; a pod whose old ID is still listed stays recorded, so its start guard holds it
// while its data is gone; a settled one is released.
func (r *RedisClusterReconciler) recordMembers(ctx context.Context, s *state) (*ctrl.Result, error) {
	want := redisadmin.Record(s.snap)
	if s.recordExists && maps.Equal(want, s.recorded) {
		return nil, nil
	}
	return nil, r.writeMembers(ctx, s, want)
}

func (r *RedisClusterReconciler) writeMembers(ctx context.Context, s *state, members map[string]string) error {
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, s.rc, resources.RedisMembersConfigMap(s.rc, members), child.MergeConfigMap)
	r.record(s, live, outcome, err)
	if err != nil {
		return err
	}
	s.recorded, s.recordExists = members, true
	return nil
}
