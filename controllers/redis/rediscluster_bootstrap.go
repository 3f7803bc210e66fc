package redis

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// waitInterval is how often the reconciler looks again while Redis servers start: a
// server answering is not a Kubernetes event.
const waitInterval = time.Second

// waitForPods lists the cluster's pods and goes on once every one runs with an IP.
func (r *RedisClusterReconciler) waitForPods(ctx context.Context, s *state) (*ctrl.Result, error) {
	if err := r.listPods(ctx, s); err != nil {
		return nil, err
	}
	want := int(*s.sts.Spec.Replicas)
	running := 0
	for _, p := range s.pods {
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && p.DeletionTimestamp.IsZero() {
			running++
		}
	}
	if running < want || len(s.pods) != want {
		return &ctrl.Result{RequeueAfter: waitInterval}, nil
	}
	return nil, nil
}

// listPods reads the cluster's pods, ordered by their StatefulSet ordinal.
func (r *RedisClusterReconciler) listPods(ctx context.Context, s *state) error {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(s.rc.Namespace),
		client.MatchingLabels(resources.SelectorLabels(resources.RedisClusterKind, s.rc.Name))); err != nil {
		return fmt.Errorf("while listing the pods of %s: %w", s.rc.Name, err)
	}
	s.pods = pods.Items
	sort.Slice(s.pods, func(i, j int) bool { return ordinal(s.pods[i].Name) < ordinal(s.pods[j].Name) })
	return nil
}

func ordinal(pod string) int {
	n, _ := strconv.Atoi(pod[strings.LastIndex(pod, "-")+1:])
	return n
}

func podAddr(p *corev1.Pod) string {
	return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(resources.RedisPort))
}

// formCluster forms the Redis Cluster when every node is new and empty, exactly as
// `redis-cli --cluster create` would. A node that already knows other nodes, serves slots
// or holds keys means the cluster exists: it is never created again (Create itself refuses
// too), never reset, never flushed.
func (r *RedisClusterReconciler) formCluster(ctx context.Context, s *state) (*ctrl.Result, error) {
	admin := r.adminFor(s)
	fresh := 0
	for i := range s.pods {
		nodes, err := admin.ClusterNodes(ctx, podAddr(&s.pods[i]))
		if err != nil {
			// The server is still starting.
			return &ctrl.Result{RequeueAfter: waitInterval}, nil //nolint:nilerr // waiting, not failing
		}
		if len(nodes) == 1 && len(nodes[0].Slots) == 0 {
			fresh++
		}
	}
	switch {
	case fresh == 0:
		return r.heal(ctx, s)
	case fresh < len(s.pods):
		if clusterFormed(s.rc) {
			// Nodes joining an existing cluster: scaling and healing (issue 5).
			return nil, nil
		}
		return nil, fmt.Errorf("some nodes already belong to a cluster and others are new: refusing to create a cluster over existing data")
	}
	if s.rc.Status.SlotsAssigned > 0 {
		return nil, fmt.Errorf("every node is empty but the cluster had %d slots assigned: refusing to create a new cluster over a lost one", s.rc.Status.SlotsAssigned)
	}
	endpoints := make([]redisadmin.Endpoint, len(s.pods))
	for i := range s.pods {
		endpoints[i] = redisadmin.Endpoint{Addr: podAddr(&s.pods[i]), Host: s.pods[i].Spec.NodeName}
	}
	plan, err := redisadmin.PlanCreate(endpoints, resources.RedisReplicasPerMaster(s.rc))
	if err != nil {
		return nil, err
	}
	setPhase(s.next, redisv1alpha1.PhaseCreating, "forming the cluster: assigning slots and joining nodes")
	if err := admin.Create(ctx, plan); err != nil {
		return nil, fmt.Errorf("while forming the cluster: %w", err)
	}
	r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "ClusterCreated", "Create",
		"formed a Redis Cluster of %d masters and %d replicas over 16384 slots", len(plan.Masters), len(s.pods)-len(plan.Masters))
	return nil, nil
}

// heal re-introduces members whose addresses changed (pods recreated with new IPs keep
// their node ids in nodes.conf on their volume), then waits for gossip to spread it.
func (r *RedisClusterReconciler) heal(ctx context.Context, s *state) (*ctrl.Result, error) {
	addrs := make([]string, len(s.pods))
	for i := range s.pods {
		addrs[i] = podAddr(&s.pods[i])
	}
	sent, err := r.adminFor(s).Heal(ctx, addrs)
	if err != nil {
		return nil, err
	}
	if sent == 0 {
		return nil, nil
	}
	r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "NodesReintroduced", "Heal",
		"sent %d CLUSTER MEET to re-join nodes whose addresses changed", sent)
	return &ctrl.Result{RequeueAfter: waitInterval}, nil
}

func (r *RedisClusterReconciler) adminFor(s *state) Admin {
	if s.admin == nil {
		s.admin = r.NewAdmin(s.password)
	}
	return s.admin
}
