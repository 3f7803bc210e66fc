package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/tests/redispods"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// IdleFigures is what RunIdle measured for one number of idle RedisClusters.
type IdleFigures struct {
	// Clusters is how many RedisClusters of Nodes nodes ran (three masters, Nodes/3-1
	// replicas each); FormedSeconds how long after
	// their creation all were Running and Ready.
	Clusters, Nodes int
	FormedSeconds   float64
	// CPUPerMinute is the operator process's CPU-seconds per minute over the window, once
	// every cluster was Ready; PerCluster that divided by Clusters. BaselinePerMinute is
	// its CPU-seconds per minute with no cluster (leader election, informers, metrics),
	// measured before the first was created; MarginalPerCluster is what each cluster adds:
	// (CPUPerMinute - BaselinePerMinute) / Clusters.
	CPUPerMinute, PerCluster, BaselinePerMinute, MarginalPerCluster float64
	// DetectSeconds are, for each master frozen (SIGSTOP, one per cluster in turn), the time
	// until its cluster's status no longer said Ready.
	DetectSeconds []float64
	// RSSBeforeMiB is the operator's resident memory before the first cluster was created,
	// RSSIdleMiB at the end of the idle window; RSSPerClusterMiB the growth divided by
	// Clusters.
	RSSBeforeMiB, RSSIdleMiB, RSSPerClusterMiB float64
	// FullLooks, QuietLooks and Reconciles are, per cluster and minute over the window, the
	// operator's full looks, its quiet looks (middleware_operator_rediscluster_looks_total)
	// and its RedisCluster reconciles (controller_runtime_reconcile_total).
	FullLooks, QuietLooks, Reconciles float64
}

// RunIdle starts a fresh local cluster with real redis-server pods, runs the operator's
// binary against it, creates n RedisClusters of nodes nodes, waits until all are Ready, lets
// them settle, then measures the operator's CPU over window (and writes its CPU profile of
// the window to profile, unless ""), and how long a frozen master takes to show in the
// status (kills times, one cluster each).
func RunIdle(ctx context.Context, n, nodes int, window time.Duration, kills int, profile string, logf func(string, ...any)) (IdleFigures, error) {
	f := IdleFigures{Clusters: n, Nodes: nodes}
	rb, err := startRedisBench(ctx)
	if err != nil {
		return f, err
	}
	defer rb.stop()
	env, kubelet, op := rb.env, rb.kubelet, rb.op

	const ns = "idle"
	if err := namespace(ctx, env.Client, ns); err != nil {
		return f, err
	}
	time.Sleep(5 * time.Second) // the operator's caches have synced
	rss, _, _, err := op.memory()
	if err != nil {
		return f, err
	}
	f.RSSBeforeMiB = float64(rss) / (1 << 20)
	if f.BaselinePerMinute, err = cpuPerMinute(op, idleBaselineWindow); err != nil {
		return f, err
	}
	start := time.Now()
	for i := range n {
		if err := env.Client.Create(ctx, createShape(ns, fmt.Sprintf("rc-%d", i), nodes)); err != nil {
			return f, err
		}
	}
	if err := waitAllReady(ctx, env.Client, ns, n, 20*time.Minute); err != nil {
		return f, err
	}
	f.FormedSeconds = time.Since(start).Seconds()
	logf("%d RedisClusters (%d redis-servers) Ready after %.0f s; settling 30 s", n, nodes*n, f.FormedSeconds)
	time.Sleep(30 * time.Second)

	looksBefore, err := op.scrape(ctx)
	if err != nil {
		return f, err
	}
	profiled := op.startCPUProfile(ctx, window, profile)
	if f.CPUPerMinute, err = cpuPerMinute(op, window); err != nil {
		return f, err
	}
	looksAfter, err := op.scrape(ctx)
	if err != nil {
		return f, err
	}
	perClusterMinute := func(family, label, value string) float64 {
		return (sumWhere(looksAfter, family, label, value) - sumWhere(looksBefore, family, label, value)) / float64(n) / window.Minutes()
	}
	f.FullLooks = perClusterMinute("middleware_operator_rediscluster_looks_total", "look", "full")
	f.QuietLooks = perClusterMinute("middleware_operator_rediscluster_looks_total", "look", "quiet")
	f.Reconciles = perClusterMinute("controller_runtime_reconcile_total", "controller", "rediscluster")
	logf("per cluster and minute: %.1f full looks, %.1f quiet looks, %.1f reconciles", f.FullLooks, f.QuietLooks, f.Reconciles)
	if err := profiled(); err != nil {
		return f, err
	}
	if profile != "" {
		if err := op.saveHeapProfile(ctx, strings.TrimSuffix(profile, ".pprof")+"-heap.pprof"); err != nil {
			return f, err
		}
	}
	f.PerCluster = f.CPUPerMinute / float64(n)
	f.MarginalPerCluster = (f.CPUPerMinute - f.BaselinePerMinute) / float64(n)
	logf("operator CPU over %s idle: %.2f CPU-s a minute, %.4f per cluster; %.3f with no cluster, so %.4f added by each", window,
		f.CPUPerMinute, f.PerCluster, f.BaselinePerMinute, f.MarginalPerCluster)
	if rss, _, _, err = op.memory(); err != nil {
		return f, err
	}
	f.RSSIdleMiB = float64(rss) / (1 << 20)
	f.RSSPerClusterMiB = (f.RSSIdleMiB - f.RSSBeforeMiB) / float64(n)
	logf("operator RSS %.1f MiB before the clusters, %.1f MiB idle with %d: %.2f MiB per cluster", f.RSSBeforeMiB, f.RSSIdleMiB, n, f.RSSPerClusterMiB)

	for i := range min(kills, n) {
		d, err := detectKilledMaster(ctx, env.Client, kubelet, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("rc-%d", i)})
		if err != nil {
			return f, err
		}
		f.DetectSeconds = append(f.DetectSeconds, d)
		logf("rc-%d: a frozen master showed in the status after %.1f s", i, d)
	}
	return f, nil
}

// redisBench is a fresh local cluster whose Redis pods run real redis-server processes, and
// the operator's binary running against it.
type redisBench struct {
	env     *testenv.Env
	kubelet *redispods.Kubelet
	op      *process
	cancel  context.CancelFunc
	done    chan struct{}
}

// startRedisBench starts the local cluster, the Redis pods' runner and the operator.
func startRedisBench(ctx context.Context) (*redisBench, error) {
	env, err := testenv.Start(ctx, 3)
	if err != nil {
		return nil, err
	}
	kubelet, err := redispods.Watching(env.Cluster.Config, env.Cluster.Dir+"/redis-data", func(string, ...any) {})
	if err != nil {
		env.Stop()
		return nil, err
	}
	kctx, cancel := context.WithCancel(ctx)
	rb := &redisBench{env: env, cancel: cancel, done: make(chan struct{}), kubelet: kubelet}
	go func() { rb.kubelet.Run(kctx); close(rb.done) }()
	if rb.op, err = startOperatorProcess(env); err != nil {
		rb.stop()
		return nil, err
	}
	return rb, nil
}

// stop ends the operator, the Redis pods and the cluster.
func (rb *redisBench) stop() {
	if rb.op != nil {
		rb.op.stop()
	}
	rb.cancel()
	<-rb.done
	rb.env.Stop()
}

// waitAllReady waits until n RedisClusters in ns are Running and Ready.
func waitAllReady(ctx context.Context, c client.Client, ns string, n int, limit time.Duration) error {
	_, err := traceCreate(ctx, c, ns, n, time.Now(), limit)
	return err
}

func isReady(rc *redisv1alpha1.RedisCluster) bool {
	c := meta.FindStatusCondition(rc.Status.Conditions, "Ready")
	return rc.Status.Phase == redisv1alpha1.PhaseRunning && c != nil && c.Status == metav1.ConditionTrue
}

// detectKilledMaster freezes one master of the cluster at key (SIGSTOP: the process is there
// but answers nothing, as a hung or partitioned node; a crash the kubelet restarts within
// the look interval may never show) and returns how long its status took to stop saying
// Ready; then it lets the process go on and waits until the cluster is Ready again.
func detectKilledMaster(ctx context.Context, c client.Client, kubelet *redispods.Kubelet, key client.ObjectKey) (float64, error) {
	rc, pod, pids, err := masterProcesses(ctx, c, kubelet, key)
	if err != nil {
		return 0, err
	}
	signal := func(sig syscall.Signal) {
		for _, pid := range pids {
			_ = syscall.Kill(pid, sig)
		}
	}
	// The operator looks at an idle cluster every 10 s: freezing at a random point of that
	// cycle, not at whatever phase the previous kill's recovery left, makes the median a
	// fair one (half a cycle of wait on average, plus the detection itself).
	time.Sleep(rand.N(plan.LookIdle))
	start := time.Now()
	signal(syscall.SIGSTOP)
	defer signal(syscall.SIGCONT)
	var seen float64
	for seen == 0 {
		if time.Since(start) > 2*time.Minute {
			return 0, fmt.Errorf("%s still Ready 2 minutes after %s was frozen", key.Name, pod)
		}
		time.Sleep(100 * time.Millisecond)
		if err := c.Get(ctx, key, rc); err != nil {
			return 0, err
		}
		if !isReady(rc) {
			seen = time.Since(start).Seconds()
		}
	}
	signal(syscall.SIGCONT)
	return seen, waitAllReadyOne(ctx, c, key)
}

// masterProcesses finds the first master the status of the cluster at key lists, and the
// processes the stand-in kubelet runs for its pod.
func masterProcesses(ctx context.Context, c client.Client, kubelet *redispods.Kubelet, key client.ObjectKey) (*redisv1alpha1.RedisCluster, string, []int, error) {
	rc := &redisv1alpha1.RedisCluster{}
	if err := c.Get(ctx, key, rc); err != nil {
		return nil, "", nil, err
	}
	i := slices.IndexFunc(rc.Status.Nodes, func(n redisv1alpha1.RedisNode) bool { return n.Type == "master" })
	if i < 0 {
		return nil, "", nil, fmt.Errorf("%s lists no master", key.Name)
	}
	pod := rc.Status.Nodes[i].Name
	pids := kubelet.Processes(key.Namespace, pod)
	if len(pids) == 0 {
		return nil, "", nil, fmt.Errorf("no process for %s", pod)
	}
	return rc, pod, pids, nil
}

// waitAllReadyOne waits up to 3 minutes until the cluster at key is Ready again.
func waitAllReadyOne(ctx context.Context, c client.Client, key client.ObjectKey) error {
	deadline := time.Now().Add(3 * time.Minute)
	rc := &redisv1alpha1.RedisCluster{}
	for {
		if err := c.Get(ctx, key, rc); err != nil {
			return err
		}
		if isReady(rc) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not Ready 3 minutes after a master was killed: %s", key.Name, rc.Status.Reason)
		}
		time.Sleep(time.Second)
	}
}

// idleBaselineWindow is how long RunIdle measures the operator with no cluster.
const idleBaselineWindow = 30 * time.Second

// cpuPerMinute is the CPU-seconds a minute op uses over the next window.
func cpuPerMinute(op *process, window time.Duration) (float64, error) {
	before, err := op.cpuSeconds()
	if err != nil {
		return 0, err
	}
	time.Sleep(window)
	after, err := op.cpuSeconds()
	if err != nil {
		return 0, err
	}
	return (after - before) / window.Minutes(), nil
}

// IdleTable formats the idle figures as a Markdown table.
func IdleTable(all []IdleFigures) string {
	var b strings.Builder
	b.WriteString("| idle RedisClusters (nodes each) | formed in | operator CPU-s/min | per cluster | with no cluster | added per cluster | RSS before, idle (MiB) | RSS per cluster (MiB) | full, quiet looks, reconciles /min/cluster | frozen master -> not Ready (median, max) |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range all {
		d := slices.Clone(f.DetectSeconds)
		sort.Float64s(d)
		med, worst := 0.0, 0.0
		if len(d) > 0 {
			med, worst = d[len(d)/2], d[len(d)-1]
		}
		fmt.Fprintf(&b, "| %d (%d) | %.0f s | %.2f | %.4f | %.3f | %.4f | %.0f, %.0f | %.2f | %.1f, %.1f, %.1f | %.1f s, %.1f s |\n", f.Clusters, f.Nodes, f.FormedSeconds, f.CPUPerMinute, f.PerCluster,
			f.BaselinePerMinute, f.MarginalPerCluster, f.RSSBeforeMiB, f.RSSIdleMiB, f.RSSPerClusterMiB, f.FullLooks, f.QuietLooks, f.Reconciles, med, worst)
	}
	return b.String()
}
