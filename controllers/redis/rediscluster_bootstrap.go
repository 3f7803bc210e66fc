package redis

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// waitInterval is how often the reconciler looks again while Redis servers start: a
// server answering is not a Kubernetes event.
const waitInterval = time.Second

// sortByOrdinal orders pods by their StatefulSet ordinal.
func sortByOrdinal(pods []corev1.Pod) {
	sort.Slice(pods, func(i, j int) bool { return ordinal(pods[i].Name) < ordinal(pods[j].Name) })
}

func ordinal(pod string) int {
	n, _ := strconv.Atoi(pod[strings.LastIndex(pod, "-")+1:])
	return n
}

func podAddr(p *corev1.Pod) string {
	return net.JoinHostPort(p.Status.PodIP, strconv.Itoa(resources.RedisPort))
}

// formCluster forms the Redis Cluster when every pod runs, answers and is new and empty,
// and no cluster was ever recorded, exactly as `redis-cli --cluster create` would. Once any
// node belongs to a cluster, or the member record names any pod, it never runs again: new
// nodes join through scaling, and a lost cluster is guarded by guardLostCluster. Create
// itself refuses nodes that know other nodes, serve slots or hold keys, so existing data is
// never reset or flushed.
func (r *RedisClusterReconciler) formCluster(ctx context.Context, s *state) (*ctrl.Result, error) {
	if len(s.joined()) > 0 {
		return nil, r.dropAcceptance(ctx, s.rc)
	}
	if len(s.recorded) > 0 {
		return nil, fmt.Errorf("every answering node is empty but the member record names %d members: refusing to form a new cluster over a lost one", len(s.recorded))
	}
	want := int(*s.sts.Spec.Replicas)
	if len(s.pods) != want || len(s.members) != want {
		s.waiting = fmt.Sprintf("waiting for %d Redis nodes to run before forming the cluster (%d answer)", want, len(s.members))
		return &ctrl.Result{RequeueAfter: waitInterval}, nil
	}
	endpoints := make([]redisadmin.Endpoint, len(s.members))
	for i, m := range s.members {
		endpoints[i] = redisadmin.Endpoint{Addr: m.addr, Host: m.pod.Spec.NodeName}
	}
	plan, err := redisadmin.PlanCreate(endpoints, resources.RedisReplicasPerMaster(s.rc))
	if err != nil {
		return nil, err
	}
	inProgress, err := bounded(ctx, func(ctx context.Context) error { return r.adminFor(s).Create(ctx, plan) })
	if err != nil {
		return nil, fmt.Errorf("while forming the cluster: %w", err)
	}
	s.operation(redisv1alpha1.PhaseCreating, "forming the cluster")
	if inProgress {
		return &ctrl.Result{RequeueAfter: waitInterval}, nil
	}
	r.Recorder.Eventf(s.rc, nil, corev1.EventTypeNormal, "ClusterCreated", "Create",
		"formed a Redis Cluster of %d masters and %d replicas over 16384 slots", len(plan.Masters), len(s.pods)-len(plan.Masters))
	return &ctrl.Result{RequeueAfter: waitInterval}, nil
}

func (r *RedisClusterReconciler) adminFor(s *state) Admin {
	if s.admin == nil {
		s.admin = r.NewAdmin(s.login(), s.tls)
		if r.Fence != nil {
			s.admin = fencedAdmin{Admin: s.admin, fence: r.fence}
		}
	}
	return s.admin
}

// ErrFenced wraps the error of a Fence that forbids this replica to act.
var ErrFenced = errors.New("not acting on Redis")

// fence checks Fence, if any: nil while this replica may act on Redis, an error wrapping
// ErrFenced otherwise.
func (r *RedisClusterReconciler) fence(ctx context.Context) error {
	if r.Fence == nil {
		return nil
	}
	if err := r.Fence(ctx); err != nil {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return nil
}
