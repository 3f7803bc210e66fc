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
// `redis-cli --cluster create` would. Once any node belongs to a cluster, it never runs
// again: new nodes join through scaling. Create itself refuses nodes that know other nodes,
// serve slots or hold keys, so existing data is never reset or flushed.
func (r *RedisClusterReconciler) formCluster(ctx context.Context, s *state) (*ctrl.Result, error) {
	if len(s.joined()) > 0 {
		return nil, nil
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
	if err := r.adminFor(s).Create(ctx, plan); err != nil {
		return nil, fmt.Errorf("while forming the cluster: %w", err)
	}
	r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "ClusterCreated", "Create",
		"formed a Redis Cluster of %d masters and %d replicas over 16384 slots", len(plan.Masters), len(s.pods)-len(plan.Masters))
	return &ctrl.Result{RequeueAfter: waitInterval}, nil
}

// heal re-introduces members whose addresses changed (pods recreated with new IPs keep
// their node ids in nodes.conf on their volume), then waits for gossip to spread it.
func (r *RedisClusterReconciler) heal(ctx context.Context, s *state) (*ctrl.Result, error) {
	sent, err := r.adminFor(s).Heal(ctx, s.addrs())
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
