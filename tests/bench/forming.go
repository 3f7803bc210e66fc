package bench

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisnodes "github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// formingPoll is how often traceForming looks at a new cluster's pods and nodes.
const formingPoll = 100 * time.Millisecond

// formingMilestones are when (seconds after the trace started, 0 when not seen) a new
// cluster of nodes pods passed each stage of its forming, as its pods and its nodes showed
// it to an outside observer.
type formingMilestones struct {
	// PodsCreated: every pod exists; PodsReady: every pod is Ready.
	PodsCreated, PodsReady float64
	// Met: every node knows all the others (CLUSTER INFO cluster_known_nodes).
	Met float64
	// SlotsAssigned: every node sees the 16384 slots assigned; StateOK: cluster_state:ok.
	SlotsAssigned, StateOK float64
	// ReplicasLinked: every node that is not a master is a replica with its link up.
	ReplicasLinked float64
}

// String renders the milestones in order.
func (m formingMilestones) String() string {
	return fmt.Sprintf("pods created %.2f s, pods Ready %.2f s, every node met %.2f s, slots assigned %.2f s, cluster_state ok %.2f s, replicas linked %.2f s",
		m.PodsCreated, m.PodsReady, m.Met, m.SlotsAssigned, m.StateOK, m.ReplicasLinked)
}

// done reports whether every milestone was seen.
func (m formingMilestones) done() bool {
	return m.PodsCreated > 0 && m.PodsReady > 0 && m.Met > 0 && m.SlotsAssigned > 0 && m.StateOK > 0 && m.ReplicasLinked > 0
}

// traceForming polls the pods of the cluster key (nodes of them, masters of which are
// masters) and, with password, CLUSTER INFO and INFO replication of each running one, every
// formingPoll from start until every milestone was seen or the returned function is called;
// that function returns the milestones. One connection per node, kept: the trace shares the
// cores with what it watches.
func traceForming(ctx context.Context, c client.Reader, key client.ObjectKey, nodes, masters int, password func() (string, error), start time.Time) func() formingMilestones {
	var m formingMilestones
	clients := map[string]*goredis.Client{}
	pw := ""
	node := func(ip string) *goredis.Client {
		if pw == "" {
			pw, _ = password()
		}
		if clients[ip] == nil && pw != "" {
			clients[ip] = goredis.NewClient(&goredis.Options{Addr: net.JoinHostPort(ip, strconv.Itoa(resources.RedisPort)),
				Password: pw, DisableIdentity: true, Protocol: 2, PoolSize: 1, DialTimeout: time.Second, ReadTimeout: time.Second})
		}
		return clients[ip]
	}
	stop := pollInBackground(ctx, formingPoll, func(ctx context.Context) bool {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(key.Namespace), client.MatchingLabels{"app.kubernetes.io/instance": key.Name}); err == nil {
			m.observe(ctx, time.Since(start).Seconds(), pods.Items, nodes, masters, node)
		}
		return m.done()
	})
	return func() formingMilestones {
		stop()
		for _, rc := range clients {
			_ = rc.Close()
		}
		return m
	}
}

// observe records the milestones pods and their nodes (each reached through node) show
// at now.
func (m *formingMilestones) observe(ctx context.Context, now float64, pods []corev1.Pod, nodes, masters int, node func(ip string) *goredis.Client) {
	seen := func(at *float64, ok bool) {
		if ok && *at == 0 {
			*at = now
		}
	}
	seen(&m.PodsCreated, len(pods) == nodes)
	ready, met, assigned, stateOK, linked := 0, 0, 0, 0, 0
	for _, p := range pods {
		if testenv.PodReady(&p) {
			ready++
		}
		if p.Status.PodIP == "" {
			continue
		}
		rc := node(p.Status.PodIP)
		if rc == nil {
			continue
		}
		info, err := rc.ClusterInfo(ctx).Result()
		if err != nil {
			continue
		}
		fields := redisnodes.ParseClusterInfo(info)
		if fields["cluster_known_nodes"] == strconv.Itoa(nodes) {
			met++
		}
		if fields["cluster_slots_assigned"] == "16384" {
			assigned++
		}
		if fields["cluster_state"] == "ok" {
			stateOK++
		}
		if repl, err := rc.Info(ctx, "replication").Result(); err == nil {
			r := redisnodes.ParseClusterInfo(repl)
			if r["role"] == "slave" && r["master_link_status"] == "up" {
				linked++
			}
		}
	}
	seen(&m.PodsReady, ready == nodes)
	seen(&m.Met, met == nodes)
	seen(&m.SlotsAssigned, assigned == nodes)
	seen(&m.StateOK, stateOK == nodes)
	seen(&m.ReplicasLinked, linked == nodes-masters)
}
