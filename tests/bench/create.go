package bench

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/redispods"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
)

// CreateFigures is what RunCreate measured for one number of RedisClusters created at once.
type CreateFigures struct {
	// Clusters is how many were created, Nodes the Redis nodes of each (3: three masters
	// without replicas; 6: three masters with one replica each).
	Clusters, Nodes int
	// FloorReadySeconds is how long after their creation the floor's StatefulSets all had
	// every replica Ready; FloorSeconds how long until, besides, every pod's redis-server
	// accepted connections (the floor the ratio uses).
	FloorReadySeconds, FloorSeconds float64
	// ClusterSeconds is how long after their creation the RedisClusters were all Running
	// and Ready; Ratio that over FloorSeconds.
	ClusterSeconds, Ratio float64
	// OperatorCPUSeconds is the operator process's CPU over the RedisCluster phase, RSSMiB
	// its resident memory at its end.
	OperatorCPUSeconds, RSSMiB float64
	// PodsReadySeconds is how long after their creation the RedisClusters' StatefulSets all
	// had every replica Ready (the operator's phase's own pods, polled every second); LagP50,
	// LagP90 and LagMax the spread, over the clusters, of the time from a cluster's
	// StatefulSet being Ready to its status saying Ready.
	PodsReadySeconds, LagP50, LagP90, LagMax float64
	// StatefulSetsCreatedSeconds is how long after the RedisClusters' creation the operator
	// had created the last of their StatefulSets (to the second).
	StatefulSetsCreatedSeconds float64
}

// RunCreate starts a fresh local cluster with real redis-server pods and the operator's
// binary, then times n StatefulSets of nodes Redis pods each, built by the operator's own
// builders but out of its sight, until all are Ready and their redis-servers listen (the
// floor), removes them, and times n RedisClusters of the same shape until all are Ready.
func RunCreate(ctx context.Context, n, nodes int, logf func(string, ...any)) (CreateFigures, error) {
	f := CreateFigures{Clusters: n, Nodes: nodes}
	if nodes < 3 || nodes%3 != 0 {
		return f, fmt.Errorf("%d nodes: want three masters with the same number of replicas each (3, 6, 9...)", nodes)
	}
	rb, err := startRedisBench(ctx)
	if err != nil {
		return f, err
	}
	defer rb.stop()
	env, op := rb.env, rb.op
	for _, ns := range []string{floorNamespace, createNamespace} {
		if err := namespace(ctx, env.Client, ns); err != nil {
			return f, err
		}
	}
	time.Sleep(5 * time.Second) // the operator's caches have synced

	if err := runCreateFloor(ctx, rb, n, nodes, &f); err != nil {
		return f, err
	}
	logf("floor: %d StatefulSets of %d Redis pods Ready after %.1f s, every redis-server listening after %.1f s",
		n, nodes, f.FloorReadySeconds, f.FloorSeconds)

	before, err := op.cpuSeconds()
	if err != nil {
		return f, err
	}
	start := time.Now()
	for i := range n {
		if err := env.Client.Create(ctx, createShape(createNamespace, fmt.Sprintf("rc-%d", i), nodes)); err != nil {
			return f, err
		}
	}
	trace, err := traceCreate(ctx, env.Client, createNamespace, n, start, 20*time.Minute)
	if err != nil {
		return f, err
	}
	f.ClusterSeconds = time.Since(start).Seconds()
	lags := trace.lags()
	f.StatefulSetsCreatedSeconds, f.PodsReadySeconds = latest(trace.created), latest(trace.podsReady)
	f.LagP50, f.LagP90, f.LagMax = percentile(lags, 50), percentile(lags, 90), percentile(lags, 100)
	after, err := op.cpuSeconds()
	if err != nil {
		return f, err
	}
	f.OperatorCPUSeconds = after - before
	rss, _, _, err := op.memory()
	if err != nil {
		return f, err
	}
	f.RSSMiB = float64(rss) / (1 << 20)
	f.Ratio = f.ClusterSeconds / f.FloorSeconds
	logf("%d RedisClusters of %d nodes Ready after %.1f s (%.1fx the floor); operator %.1f CPU-s, RSS %.0f MiB",
		n, nodes, f.ClusterSeconds, f.Ratio, f.OperatorCPUSeconds, f.RSSMiB)
	logf("the operator created the last of their StatefulSets after %.0f s; they were all Ready after %.1f s; from a cluster's StatefulSet Ready to its status Ready: p50 %.1f s, p90 %.1f s, max %.1f s",
		f.StatefulSetsCreatedSeconds, f.PodsReadySeconds, f.LagP50, f.LagP90, f.LagMax)
	return f, nil
}

// createTrace is when, in seconds after their creation, each RedisCluster's StatefulSet first
// had every replica Ready and its status first said Ready, seen by a poll every second.
// Its StatefulSet's creation (creationTimestamp: whole seconds) is in created.
type createTrace struct{ created, podsReady, ready map[string]float64 }

// traceCreate polls the n RedisClusters of ns and their StatefulSets every second until every
// cluster is Ready at once, or limit passes.
func traceCreate(ctx context.Context, c client.Client, ns string, n int, start time.Time, limit time.Duration) (createTrace, error) {
	t := createTrace{created: map[string]float64{}, podsReady: map[string]float64{}, ready: map[string]float64{}}
	for {
		now := time.Since(start).Seconds()
		sets := &appsv1.StatefulSetList{}
		if err := c.List(ctx, sets, client.InNamespace(ns)); err != nil {
			return t, err
		}
		for _, sts := range sets.Items {
			t.created[sts.Name] = sts.CreationTimestamp.Sub(start.Truncate(time.Second)).Seconds()
			if _, seen := t.podsReady[sts.Name]; !seen && sts.Spec.Replicas != nil && sts.Status.ReadyReplicas == *sts.Spec.Replicas {
				t.podsReady[sts.Name] = now
			}
		}
		list := &redisv1alpha1.RedisClusterList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return t, err
		}
		readyNow := 0
		for i := range list.Items {
			if !isReady(&list.Items[i]) {
				continue
			}
			readyNow++
			if _, seen := t.ready[list.Items[i].Name]; !seen {
				t.ready[list.Items[i].Name] = now
			}
		}
		if readyNow == n {
			return t, nil
		}
		if time.Since(start) > limit {
			return t, fmt.Errorf("%d of %d RedisClusters Ready after %s", readyNow, n, limit)
		}
		time.Sleep(time.Second)
	}
}

// latest is the largest of the times, 0 for none.
func latest(times map[string]float64) float64 {
	last := 0.0
	for _, s := range times {
		last = max(last, s)
	}
	return last
}

// lags are, for each cluster, the seconds from its StatefulSet seen Ready to its status seen
// Ready (the StatefulSet is named after the cluster).
func (t createTrace) lags() []float64 {
	var out []float64
	for name, ready := range t.ready {
		if pods, ok := t.podsReady[name]; ok {
			out = append(out, ready-pods)
		}
	}
	return out
}

// The namespaces of the two phases.
const (
	floorNamespace  = "floor"
	createNamespace = "create"
)

// createShape is a RedisCluster of nodes nodes: three masters, with nodes/3-1 replicas each.
func createShape(ns, name string, nodes int) *redisv1alpha1.RedisCluster {
	return redistest.NewClusterShape(ns, name, int32(nodes), int32(nodes/3-1))
}

// runCreateFloor creates, for each of n RedisClusters "f-i" that exist in memory only, the
// objects the operator would create for it (password Secret, redis.conf ConfigMap, headless
// and client Services, untimed, then the StatefulSets at once, timed) without the operator's
// managed-by label, so its caches never see them; the pods keep the RedisCluster name label,
// so the stand-in kubelet runs their redis-servers. It waits until every StatefulSet is
// Ready and every pod's redis-server accepts connections, then deletes the StatefulSets and
// waits until their pods and processes are gone.
func runCreateFloor(ctx context.Context, rb *redisBench, n, nodes int, f *CreateFigures) error {
	c := rb.env.Client
	sets := make([]*appsv1.StatefulSet, n)
	for i := range n {
		rc := createShape(floorNamespace, fmt.Sprintf("f-%d", i), nodes)
		// The API server's defaults, which this object never went through.
		rc.Spec.Repository, rc.Spec.Version = "redis", "7.0.15"
		children := []client.Object{
			resources.RedisPasswordSecret(rc, fmt.Sprintf("floor-password-%d", i)),
			resources.RedisConfigMap(rc, ""),
			resources.RedisHeadlessService(rc),
			resources.RedisClientService(rc),
		}
		for _, obj := range children {
			unmanaged(obj.(metav1.Object))
			if err := c.Create(ctx, obj); err != nil {
				return err
			}
		}
		sets[i] = resources.RedisStatefulSet(rc, resources.RedisNodes(rc))
		unmanaged(sets[i])
		unmanaged(&sets[i].Spec.Template)
		for j := range sets[i].Spec.VolumeClaimTemplates {
			unmanaged(&sets[i].Spec.VolumeClaimTemplates[j])
		}
	}
	start := time.Now()
	for _, sts := range sets {
		if err := c.Create(ctx, sts); err != nil {
			return err
		}
	}
	ready, err := waitFor(ctx, start, "floor: every StatefulSet Ready", func(ctx context.Context) (bool, error) { return floorReady(ctx, c, n) })
	if err != nil {
		return err
	}
	listening, err := waitFor(ctx, start, "floor: every redis-server listening", func(ctx context.Context) (bool, error) { return floorListening(ctx, c, n*nodes) })
	if err != nil {
		return err
	}
	f.FloorReadySeconds, f.FloorSeconds = ready, listening
	if err := c.DeleteAllOf(ctx, &appsv1.StatefulSet{}, client.InNamespace(floorNamespace)); err != nil {
		return err
	}
	return floorGone(ctx, rb, n, nodes)
}

// unmanaged removes the operator's managed-by label from obj: its caches select on it.
func unmanaged(obj metav1.Object) {
	labels := obj.GetLabels()
	delete(labels, objectlabels.LabelManagedBy)
	obj.SetLabels(labels)
}

// floorReady reports whether n StatefulSets in the floor namespace have every replica Ready.
func floorReady(ctx context.Context, c client.Client, n int) (bool, error) {
	list := &appsv1.StatefulSetList{}
	if err := c.List(ctx, list, client.InNamespace(floorNamespace)); err != nil {
		return false, err
	}
	ready := 0
	for _, sts := range list.Items {
		if sts.Spec.Replicas != nil && sts.Status.ReadyReplicas == *sts.Spec.Replicas {
			ready++
		}
	}
	return ready == n, nil
}

// floorListening reports whether the floor namespace has pods Redis pods and each one's
// redis-server accepts a connection at the pod's IP.
func floorListening(ctx context.Context, c client.Client, pods int) (bool, error) {
	list := &corev1.PodList{}
	if err := c.List(ctx, list, client.InNamespace(floorNamespace), client.MatchingLabels{redispods.SelectorLabel: objectlabels.RedisClusterKind}); err != nil {
		return false, err
	}
	if len(list.Items) != pods {
		return false, nil
	}
	d := net.Dialer{Timeout: time.Second}
	for _, pod := range list.Items {
		if pod.Status.PodIP == "" {
			return false, nil
		}
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(pod.Status.PodIP, fmt.Sprint(resources.RedisPort)))
		if err != nil {
			return false, nil //nolint:nilerr // not listening yet
		}
		_ = conn.Close()
	}
	return true, nil
}

// floorGone waits until the floor namespace has no pod left and the stand-in kubelet no
// process for any of the n StatefulSets' pods of nodes replicas.
func floorGone(ctx context.Context, rb *redisBench, n, nodes int) error {
	_, err := waitFor(ctx, time.Now(), "floor: every pod and process gone after deleting the StatefulSets", func(ctx context.Context) (bool, error) {
		list := &corev1.PodList{}
		if err := rb.env.Client.List(ctx, list, client.InNamespace(floorNamespace)); err != nil {
			return false, err
		}
		running := 0
		for i := range n {
			for j := range nodes {
				running += len(rb.kubelet.Processes(floorNamespace, fmt.Sprintf("f-%d-%d", i, j)))
			}
		}
		return len(list.Items) == 0 && running == 0, nil
	})
	return err
}

// CreateTable formats the figures as a Markdown table.
func CreateTable(all []CreateFigures) string {
	var b strings.Builder
	b.WriteString("| created at once | floor: StatefulSets Ready, redis-servers listening | RedisClusters Ready | ratio | their StatefulSets Ready | StatefulSet Ready -> status Ready p50 / p90 / max | operator CPU-s | operator RSS (MiB) |\n|---|---|---|---|---|---|---|---|\n")
	for _, f := range all {
		fmt.Fprintf(&b, "| %d x %d nodes | %.1f s, %.1f s | %.1f s | %.1f | %.1f s | %.1f / %.1f / %.1f s | %.1f | %.0f |\n",
			f.Clusters, f.Nodes, f.FloorReadySeconds, f.FloorSeconds, f.ClusterSeconds, f.Ratio, f.PodsReadySeconds, f.LagP50, f.LagP90, f.LagMax, f.OperatorCPUSeconds, f.RSSMiB)
	}
	return b.String()
}
