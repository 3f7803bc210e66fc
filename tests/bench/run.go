package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/common/expfmt"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/operator"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// Options sizes a run.
type Options struct {
	// N is the number of AppServices (and of the floor's Deployment + Service pairs).
	N int
	// Steady is how long the operator is watched after convergence.
	Steady time.Duration
	// Unrelated is how many unrelated Secrets and ConfigMaps (16 KiB each) are added, and a
	// third as many Deployments, in another namespace.
	Unrelated int
	// Logf receives progress lines.
	Logf func(format string, args ...any)
	// CPUProfile, when set, is where the bench process's CPU profile of the operator's
	// create and update waves is written (the in-process operator and the bench's clients).
	CPUProfile string
	// Trace prints the update wave's progress each second.
	Trace bool
	// APIServerProfiles, when set, is the directory where the kube-apiserver's CPU profiles
	// of the update waves are written: the floor's Deployment patches, the AppService
	// patches alone and the operator's wave, each over its first 8 seconds.
	APIServerProfiles string
	// Workers, when above 0, is the in-process operator's AppService worker count instead
	// of its default.
	Workers int
	// Skip names the sides not run ("floor", "memcached"), for measuring the operator alone
	// while working on it; their figures stay zero (ratios to a skipped floor print +Inf).
	Skip []string
}

const (
	workers = 16
	image1  = "nginx:1.27"
	image2  = "nginx:1.28"
	image3  = "nginx:1.29"
	image4  = "nginx:1.30"
	timeout = 20 * time.Minute
)

// Run measures the floor, the operator and the memcached sample's pattern for o.N, each on
// a fresh local cluster.
func Run(ctx context.Context, o Options) (Figures, error) {
	f := Figures{N: o.N, SteadySeconds: o.Steady.Seconds()}
	if !slices.Contains(o.Skip, "floor") {
		if err := runFloor(ctx, o, &f); err != nil {
			return f, fmt.Errorf("floor: %w", err)
		}
	}
	if err := runOperator(ctx, o, &f); err != nil {
		return f, fmt.Errorf("operator: %w", err)
	}
	if slices.Contains(o.Skip, "memcached") {
		return f, nil
	}
	if o.N > memcachedMaxN {
		o.Logf("memcached sample: skipped at N = %d (above %d): one reconcile at a time (the sample's default), it would take most of an hour", o.N, memcachedMaxN)
		return f, nil
	}
	if err := runMemcached(ctx, o, &f.Memcached); err != nil {
		return f, fmt.Errorf("memcached sample: %w", err)
	}
	return f, nil
}

// profileSeconds is how long each of the kube-apiserver's profiles runs (see
// Options.APIServerProfiles).
const profileSeconds = 8

// memcachedMaxN is the largest N the memcached sample's pattern is measured at.
const memcachedMaxN = 1000

// nodes is enough kwok nodes (1,000 pods each) for n pods and room to spare.
func nodes(n int) int { return n/900 + 1 }

// freshCluster starts a local cluster with room for n pods and namespace ns in it, and
// clients without a client-side rate limit, as the floor and the load use.
func freshCluster(ctx context.Context, n int, ns string) (*testenv.Env, client.Client, *kubernetes.Clientset, error) {
	env, err := testenv.Start(ctx, nodes(n))
	if err != nil {
		return nil, nil, nil, err
	}
	cfg := rest.CopyConfig(env.Cluster.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err == nil {
		err = namespace(ctx, c, ns)
	}
	var cs *kubernetes.Clientset
	if err == nil {
		cs, err = kubernetes.NewForConfig(cfg)
	}
	if err != nil {
		env.Stop()
		return nil, nil, nil, err
	}
	return env, c, cs, nil
}

func namespace(ctx context.Context, c client.Client, name string) error {
	return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

func runFloor(ctx context.Context, o Options, f *Figures) error {
	const ns = "floor"
	env, c, _, err := freshCluster(ctx, o.N, ns)
	if err != nil {
		return err
	}
	defer env.Stop()
	watched, stopWatching, err := watching(ctx, env, ns)
	if err != nil {
		return err
	}
	defer stopWatching()
	cpu := newCPUMeter(env.Cluster.PIDs())
	start := time.Now()
	if err := parallel(ctx, o.N, func(ctx context.Context, i int) error {
		dep, svc := floorChildren(ns, i, image1)
		if err := c.Create(ctx, dep); err != nil {
			return err
		}
		return c.Create(ctx, svc)
	}); err != nil {
		return err
	}
	f.FloorChildren = time.Since(start).Seconds()
	if f.FloorAvailable, err = waitFor(ctx, start, "floor Deployments Available", deploymentsDone(watched, ns, o.N, image1, true)); err != nil {
		return err
	}
	f.FloorCreateCPU = cpu.Reset()
	o.Logf("floor: %d Deployments and Services created in %.1f s, Available in %.1f s; CPU s: %s", o.N, f.FloorChildren, f.FloorAvailable, cpuLine(f.FloorCreateCPU))
	cpu.Reset()
	profiled := apiServerProfile(ctx, env.Cluster.Config, profileSeconds, o.APIServerProfiles, fmt.Sprintf("apiserver-floor-update-%d", o.N))
	start = time.Now()
	if err := parallel(ctx, o.N, func(ctx context.Context, i int) error { return patchFloorImage(ctx, c, ns, i, image2) }); err != nil {
		return err
	}
	if f.FloorUpdate, err = waitFor(ctx, start, "floor update", deploymentsDone(watched, ns, o.N, image2, false)); err != nil {
		return err
	}
	f.FloorUpdateCPU = cpu.Reset()
	if f.FloorAvailableAsAsked, err = waitFor(ctx, start, "the floor's Deployments available as asked", func(ctx context.Context) (bool, error) {
		n, err := countDeployments(ctx, watched, ns, func(d *appsv1.Deployment) bool { return availableAsAsked(d, image2) })
		return n == o.N, err
	}); err != nil {
		return err
	}
	if f.FloorRolledOut, err = waitFor(ctx, start, "the floor's rollout", deploymentsDone(watched, ns, o.N, image2, true)); err != nil {
		return err
	}
	o.Logf("floor: every Deployment carries the new image after %.1f s, all available as asked after %.1f s (the measure until 2026-12-01), rolled out after %.1f s; CPU s: %s",
		f.FloorUpdate, f.FloorAvailableAsAsked, f.FloorRolledOut, cpuLine(f.FloorUpdateCPU))
	if err := profiled(); err != nil {
		return err
	}
	if err := userWrites(ctx, o, env, c, watched, cpu, ns, f); err != nil {
		return err
	}
	return floorTogether(ctx, o, c, watched, cpu, ns, f)
}

// patchFloorImage sets the image of the floor's i-th Deployment in ns with a strategic
// merge patch, as client-go would.
func patchFloorImage(ctx context.Context, c client.Client, ns string, i int, image string) error {
	dep, _ := floorChildren(ns, i, image1)
	return c.Patch(ctx, dep, client.RawPatch("application/strategic-merge-patch+json",
		fmt.Appendf(nil, `{"spec":{"template":{"spec":{"containers":[{"name":%q,"image":%q}]}}}}`, dep.Spec.Template.Spec.Containers[0].Name, image)))
}

// floorTogether is the update wave of an operator that costs nothing: the user patches each
// AppService (carrying a status, with a watcher), and the moment a patch is answered its
// Deployment is patched too, by up to operator.AppServiceWorkers writers at once. The
// user's patches then meet the rollouts the earlier Deployment writes started, as they do
// with the operator, which the sum of the floor's update and the patches alone leaves out.
// It runs last on the floor's cluster, whose rollouts are over.
func floorTogether(ctx context.Context, o Options, c client.Client, watched client.Reader, cpu *cpuMeter, ns string, f *Figures) error {
	var deployments errgroup.Group
	deployments.SetLimit(operator.AppServiceWorkers) // Go waits for a free writer
	cpu.Reset()
	start := time.Now()
	err := parallel(ctx, o.N, func(ctx context.Context, i int) error {
		if err := patchImage(ctx, c, ns, i, image4); err != nil {
			return err
		}
		deployments.Go(func() error { return patchFloorImage(ctx, c, ns, i, image4) })
		return nil
	})
	if werr := deployments.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		return err
	}
	if f.FloorTogether, err = waitFor(ctx, start, "the floor's update with the user's patches", deploymentsDone(watched, ns, o.N, image4, false)); err != nil {
		return err
	}
	f.FloorTogetherCPU = cpu.Reset()
	if f.FloorTogetherRolledOut, err = waitFor(ctx, start, "the rollouts of the floor's update with the user's patches", deploymentsDone(watched, ns, o.N, image4, true)); err != nil {
		return err
	}
	o.Logf("floor: %d AppServices patched (with the operator's status and a watcher), each Deployment patched as its patch is answered: every Deployment carries the new image after %.1f s, rolled out after %.1f s; CPU s: %s",
		o.N, f.FloorTogether, f.FloorTogetherRolledOut, cpuLine(f.FloorTogetherCPU))
	return nil
}

// userWrites measures the user's writes of the operator's waves alone, on the floor's
// cluster once its rollout is over, with no operator running: N AppServices created, then
// each patched to the new image, as the operator's waves create and patch them.
//
// Then each AppService is given a status as the operator writes it, and patched once more
// with a watcher of AppServices running (as the operator's): the user's patches as they
// cost with any operator that reports a status, which makes each AppService twice as big.
func userWrites(ctx context.Context, o Options, env *testenv.Env, c client.Client, watched client.Reader, cpu *cpuMeter, ns string, f *Figures) error {
	var statusCPU map[string]float64
	for _, w := range []struct {
		what    string
		write   func(ctx context.Context, i int) error
		seconds *float64
		cpu     *map[string]float64
		// profile names the kube-apiserver profile of the write (none when empty); watch
		// starts the bench's AppService watcher before it.
		profile string
		watch   bool
	}{
		{"created", func(ctx context.Context, i int) error { return c.Create(ctx, app(ns, i, image1)) }, &f.FloorUserCreate, &f.FloorUserCreateCPU, "", false},
		{"patched to the new image", func(ctx context.Context, i int) error { return patchImage(ctx, c, ns, i, image2) }, &f.FloorUserPatch, &f.FloorUserPatchCPU,
			fmt.Sprintf("apiserver-patches-alone-%d", o.N), false},
		{"given the operator's status", func(ctx context.Context, i int) error {
			return c.Status().Patch(ctx, app(ns, i, image2), client.RawPatch("application/merge-patch+json", operatorStatus()))
		}, &f.FloorStatus, &statusCPU, "", false},
		{"patched again, with the operator's status and a watcher", func(ctx context.Context, i int) error {
			return patchImage(ctx, c, ns, i, image3)
		}, &f.FloorUserPatchStatus, &f.FloorUserPatchStatusCPU, "", true},
	} {
		if w.watch {
			if err := watched.Get(ctx, client.ObjectKeyFromObject(app(ns, 0, image1)), &appsv1api.AppService{}); err != nil {
				return err // the cache's AppService informer starts and syncs
			}
		}
		cpu.Reset()
		profiled := func() error { return nil }
		if w.profile != "" {
			profiled = apiServerProfile(ctx, env.Cluster.Config, profileSeconds, o.APIServerProfiles, w.profile)
		}
		start := time.Now()
		if err := parallel(ctx, o.N, w.write); err != nil {
			return err
		}
		*w.seconds, *w.cpu = time.Since(start).Seconds(), cpu.Reset()
		if err := profiled(); err != nil {
			return err
		}
		o.Logf("floor: %d AppServices %s in %.1f s with no operator; CPU s: %s", o.N, w.what, *w.seconds, cpuLine(*w.cpu))
	}
	return nil
}

// patchImage sets the image of the i-th AppService in ns, as a user would.
func patchImage(ctx context.Context, c client.Client, ns string, i int, image string) error {
	return c.Patch(ctx, app(ns, i, image), client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"image":%q}}`, image)))
}

func runOperator(ctx context.Context, o Options, f *Figures) error {
	const ns = "apps"
	env, c, cs, err := freshCluster(ctx, o.N, ns)
	if err != nil {
		return err
	}
	defer env.Stop()
	watched, stopWatching, err := watching(ctx, env, ns, "default")
	if err != nil {
		return err
	}
	defer stopWatching()
	// The in-process operator collects garbage as the operator's binary does.
	defer debug.SetGCPercent(debug.SetGCPercent(operator.GCPercent))
	baseline := heapInUse()
	writes := &testenv.WriteCounts{}
	changes := &statusChanges{}
	cfg := operator.Defaults()
	if o.Workers > 0 {
		cfg.AppServiceWorkers = o.Workers
	}
	f.Workers = cfg.AppServiceWorkers
	restConfig := rest.CopyConfig(env.Cluster.Config)
	restConfig.QPS, restConfig.Burst = cfg.QPS, cfg.Burst
	podLists := &atomic.Int64{}
	restConfig.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return eventWrites{next: next, counts: writes, podLists: podLists}
	})
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: operator.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: operator.CacheOptions(cfg),
		// Each N of a run starts a manager with the same controllers in this process.
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		NewClient: func(config *rest.Config, options client.Options) (client.Client, error) {
			inner, err := client.New(config, options)
			return testenv.CountingClient{Client: inner, ByWrite: writes}, err
		},
	})
	if err != nil {
		return err
	}
	if err := operator.Setup(mgr, cfg); err != nil {
		return err
	}
	mctx, stop := startManager(ctx, mgr, o.Logf)
	defer stop()
	if !mgr.GetCache().WaitForCacheSync(mctx) {
		return fmt.Errorf("the operator's cache never synced")
	}

	// The controllers start once every watch they use has synced: wait for a first
	// AppService to be served, so the figures measure work, not start-up.
	warm := app("default", 0, image1)
	if err := c.Create(ctx, warm); err != nil {
		return err
	}
	// Its status patch and its event (the recorder sends it in the background) are awaited
	// too: after the counts are reset they would count in the create wave.
	if _, err := waitFor(ctx, time.Now(), "the controllers to start, and the first AppService's status and event", func(ctx context.Context) (bool, error) {
		done, err := converged(watched, "default", 1)(ctx)
		return done && writes.Get("create Event") > 0, err
	}); err != nil {
		return err
	}

	// Latency: from just before each AppService's Create to its Deployment's ADDED event.
	sent, seen := sync.Map{}, sync.Map{}
	w, err := cs.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	go func() {
		for ev := range w.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok && ev.Type == watch.Added {
				seen.LoadOrStore(d.Name, time.Now())
			}
		}
	}()
	defer w.Stop()

	stopProfile, err := startCPUProfile(o.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	writes.Reset()
	changes.Reset()
	reconciled := &reconciles{}
	reconciled.Reset()
	cpu := newCPUMeter(env.Cluster.PIDs())
	start := time.Now()
	if err := parallel(ctx, o.N, func(ctx context.Context, i int) error {
		a := app(ns, i, image1)
		sent.Store(a.Name, time.Now())
		return c.Create(ctx, a)
	}); err != nil {
		return err
	}
	childrenExist := deploymentsDone(watched, ns, o.N, image1, false)
	if f.Children, err = waitFor(ctx, start, "children", func(ctx context.Context) (bool, error) {
		ok, err := childrenExist(ctx)
		if !ok || err != nil {
			return ok, err
		}
		return servicesExist(watched, ns, o.N)(ctx)
	}); err != nil {
		return err
	}
	if f.Converged, err = waitFor(ctx, start, "converged", converged(watched, ns, o.N)); err != nil {
		return err
	}
	f.CreateCPU = cpu.Reset()
	time.Sleep(2 * time.Second) // writes still under way are part of the wave
	f.CreateWrites, f.CreateStatusChanges, f.CreateReconciles = writes.Reset(), changes.Reset(), reconciled.Reset()
	o.Logf("operator: children of %d AppServices exist after %.1f s, every status converged after %.1f s, %d writes; CPU s: %s", o.N, f.Children, f.Converged, sum(f.CreateWrites), cpuLine(f.CreateCPU))
	var latencies []float64
	sent.Range(func(k, v any) bool {
		if t, ok := seen.Load(k); ok {
			latencies = append(latencies, t.(time.Time).Sub(v.(time.Time)).Seconds()) //nolint:forcetypeassert // times only
		}
		return true
	})
	f.WaveLatencyP50, f.WaveLatencyP99 = percentile(latencies, 50), percentile(latencies, 99)

	cpu.Reset()
	waits := &timings{}
	waits.Reset()
	profiled := apiServerProfile(ctx, env.Cluster.Config, profileSeconds, o.APIServerProfiles, fmt.Sprintf("apiserver-operator-update-%d", o.N))
	start = time.Now()
	patched := &atomic.Int64{}
	stopSettle := traceSettle(ctx, watched, ns, image2, start)
	defer stopSettle()
	if o.Trace {
		traceCtx, stopTrace := context.WithCancel(ctx)
		defer stopTrace()
		go traceUpdate(traceCtx, watched, ns, image2, writes, patched, start)
	}
	if err := parallel(ctx, o.N, func(ctx context.Context, i int) error {
		err := patchImage(ctx, c, ns, i, image2)
		if err == nil {
			patched.Add(1)
		}
		return err
	}); err != nil {
		return err
	}
	o.Logf("operator: the user's %d patches answered after %.1f s", o.N, time.Since(start).Seconds())
	if f.Update, err = waitFor(ctx, start, "update", deploymentsDone(watched, ns, o.N, image2, false)); err != nil {
		return err
	}
	f.UpdateCPU = cpu.Reset()
	o.Logf("operator: the update wave's means: %s", waits.Reset())
	stopProfile()
	if err := profiled(); err != nil {
		return err
	}
	if f.UpdateSettled, err = waitFor(ctx, start, "converged after the update", converged(watched, ns, o.N)); err != nil {
		return err
	}
	f.Settle = stopSettle()
	o.Logf("operator: its own Deployments rolled out after %.1f s, every status settled after %.1f s (%.2fx); from a Deployment rolled out to its status settled p50 %.2f s, p99 %.2f s, max %.2f s, %d over 1 s",
		f.Settle.RolledOut, f.UpdateSettled, f.UpdateSettled/f.Settle.RolledOut, f.Settle.LagP50, f.Settle.LagP99, f.Settle.LagMax, f.Settle.Over1s)
	time.Sleep(2 * time.Second)
	f.UpdateWrites, f.UpdateStatusChanges, f.UpdateReconciles = writes.Reset(), changes.Reset(), reconciled.Reset()
	f.UpdatePodLists = podLists.Swap(0)
	o.Logf("operator: every Deployment carries the new image after %.1f s, every status settled after %.1f s, %d writes, %d reconciles, %d pod lists; CPU s: %s",
		f.Update, f.UpdateSettled, sum(f.UpdateWrites), f.UpdateReconciles, f.UpdatePodLists, cpuLine(f.UpdateCPU))

	if f.LatencyP50, f.LatencyP99, err = probeLatency(ctx, c, cs, ns); err != nil {
		return err
	}
	if _, err := waitFor(ctx, time.Now(), "probes converged", converged(watched, ns, o.N+probes)); err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	f.ProbeWrites = writes.Reset()
	o.Logf("operator: with %d AppServices, creation to Deployment p50 %.3f s, p99 %.3f s (%d probes, 10/s); %v writes",
		o.N, f.LatencyP50, f.LatencyP99, probes, f.ProbeWrites)

	stopWatching() // its cache is not the operator's heap
	cpu0, err := processCPU(os.Getpid())
	if err != nil {
		return err
	}
	time.Sleep(o.Steady)
	cpu1, err := processCPU(os.Getpid())
	if err != nil {
		return err
	}
	f.SteadyCPU = (cpu1 - cpu0) / o.Steady.Minutes()
	f.SteadyWrites = writes.Reset()
	f.HeapBytes = heapAbove(baseline)
	o.Logf("operator: steady for %s: %d writes, %.2f CPU s/min; heap %d MiB", o.Steady, sum(f.SteadyWrites), f.SteadyCPU, f.HeapBytes>>20)
	if f.ScrapeBytes, f.OwnSeries, err = scrape(); err != nil {
		return err
	}
	o.Logf("operator: the metrics page is %d bytes, %d of its series the operator's own", f.ScrapeBytes, f.OwnSeries)

	// The operator as a process of its own, as a pod runs it, started now that N exist:
	// its start-up lists and reconciles them all, the peak of its life.
	proc, err := startOperatorProcess(env)
	if err != nil {
		return err
	}
	defer proc.stop()
	if f.RestartSeconds, err = proc.waitSettled(ctx, "appservice", o.N+1+probes); err != nil {
		return err
	}
	families, err := proc.scrape(ctx)
	if err != nil {
		return err
	}
	f.RestartWrites = apiWrites(families)
	if f.RSSBytes, f.PeakRSSBytes, f.RSSFileBytes, err = proc.memory(); err != nil {
		return err
	}
	heap, sys := goMemory(families)
	if err := proc.saveHeapProfile(ctx, filepath.Join(testenv.RepoRoot(), "bin", fmt.Sprintf("bench-heap-%d.pprof", o.N))); err != nil {
		return err
	}
	o.Logf("operator process: reconciled the %d existing AppServices in %.1f s with %d writes; RSS %d MiB (%d MiB file-backed), peak %d MiB; Go heap in use %d MiB, Go runtime %d MiB",
		o.N+1+probes, f.RestartSeconds, f.RestartWrites, f.RSSBytes>>20, f.RSSFileBytes>>20, f.PeakRSSBytes>>20, heap>>20, sys>>20)

	if err := unrelated(ctx, c, o.Unrelated); err != nil {
		return err
	}
	time.Sleep(10 * time.Second)
	f.HeapUnrelatedBytes = heapAbove(baseline)
	if f.RSSUnrelatedBytes, f.PeakRSSUnrelatedBytes, _, err = proc.memory(); err != nil {
		return err
	}
	o.Logf("operator: heap %d MiB, process RSS %d MiB (peak %d MiB) after %d unrelated Secrets and ConfigMaps and %d Deployments",
		f.HeapUnrelatedBytes>>20, f.RSSUnrelatedBytes>>20, f.PeakRSSUnrelatedBytes>>20, o.Unrelated, o.Unrelated/3)
	return nil
}

// traceUpdate prints, each second until ctx ends, how many of the user's patches have been
// answered, how many Deployments in ns carry image and the operator's writes so far: the
// update wave's progress, for MWO_BENCH_TRACE.
func traceUpdate(ctx context.Context, watched client.Reader, ns, image string, writes *testenv.WriteCounts, patched *atomic.Int64, start time.Time) {
	for ctx.Err() == nil {
		time.Sleep(time.Second)
		done, err := deploymentsRunning(ctx, watched, ns, image, false)
		if err != nil {
			continue
		}
		fmt.Fprintf(os.Stderr, "update wave at %.1f s: %d AppServices patched, %d Deployments carry the image; operator writes: %d Deployment updates, %d status patches, %d events\n",
			time.Since(start).Seconds(), patched.Load(), done, writes.Get("update Deployment"), writes.Get("patch-status AppService"), writes.Get("create Event"))
	}
}

// startManager starts mgr until ctx ends or the returned stop is called; stop waits for it
// and logs an error it stopped with. The context is the manager's.
func startManager(ctx context.Context, mgr ctrl.Manager, logf func(string, ...any)) (context.Context, func()) {
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	return mctx, func() {
		cancel()
		if err := <-done; err != nil {
			logf("the operator stopped with %v", err)
		}
	}
}

// startCPUProfile starts profiling this process's CPU into path (nothing when path is
// empty) and returns the function that stops it, which may be called more than once.
func startCPUProfile(path string) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	out, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		_ = out.Close()
		return nil, err
	}
	return sync.OnceFunc(func() {
		pprof.StopCPUProfile()
		_ = out.Close()
	}), nil
}

// startOperatorProcess runs the operator's binary against env with the shipped defaults,
// its metrics in plain HTTP for the bench to read and no leader election: at steady state
// the in-process operator writes nothing, so the two do not contend.
func startOperatorProcess(env *testenv.Env) (*process, error) {
	bin, err := binary(".", operatorBuildFlags...)
	if err != nil {
		return nil, err
	}
	pprof, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--metrics-secure=false", "--health-probe-bind-address=0", "--monitoring-objects=false", "--pprof-bind-address=" + pprof}
	// MWO_BENCH_OPERATOR_ARGS adds flags (space-separated) to try settings other than the
	// shipped ones, e.g. --rediscluster-max-concurrent-reconciles=16.
	args = append(args, strings.Fields(os.Getenv("MWO_BENCH_OPERATOR_ARGS"))...)
	p, err := startProcess(bin, env.Cluster.Kubeconfig, filepath.Join(env.Cluster.Dir, "operator.log"), "--metrics-bind-address", args...)
	if p != nil {
		p.pprof = pprof
	}
	return p, err
}

// probes is how many AppServices are created one at a time, once N exist, to measure the
// latency from an AppService's creation to its Deployment's.
const probes = 100

// probeLatency creates probes AppServices in ns, one every 100 ms, and returns the 50th and
// 99th percentiles of the time from each Create call to its Deployment's ADDED event.
func probeLatency(ctx context.Context, c client.Client, cs *kubernetes.Clientset, ns string) (p50, p99 float64, err error) {
	// Watch from now on (no initial events for the N existing), and reopen a watch the API
	// server ends (at N = 5,000 one ended during the probes) where it stopped.
	list, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return 0, 0, err
	}
	rv := list.ResourceVersion
	open := func() (watch.Interface, error) {
		return cs.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
	}
	w, err := open()
	if err != nil {
		return 0, 0, err
	}
	defer func() { w.Stop() }()
	seen := map[string]time.Time{}
	sent := map[string]time.Time{}
	events := w.ResultChan()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for next := 0; len(seen) < probes; {
		select {
		case ev, ok := <-events:
			if !ok {
				if w, err = open(); err != nil {
					return 0, 0, fmt.Errorf("while reopening the Deployment watch: %w", err)
				}
				events = w.ResultChan()
				continue
			}
			if ev.Type == watch.Error {
				return 0, 0, fmt.Errorf("the Deployment watch failed: %w", apierrors.FromObject(ev.Object))
			}
			d, isDep := ev.Object.(*appsv1.Deployment)
			if !isDep {
				continue
			}
			rv = d.ResourceVersion
			if ev.Type == watch.Added && strings.HasPrefix(d.Name, "probe-") {
				seen[d.Name] = time.Now()
			}
		case <-tick.C:
			if next < probes {
				a := app(ns, next, image2)
				a.Name = fmt.Sprintf("probe-%03d", next)
				sent[a.Name] = time.Now()
				if err := c.Create(ctx, a); err != nil {
					return 0, 0, err
				}
				next++
			}
		case <-deadline:
			return 0, 0, fmt.Errorf("%d of %d probe Deployments after %s", len(seen), probes, timeout)
		}
	}
	var latencies []float64
	for name, t := range seen {
		latencies = append(latencies, t.Sub(sent[name]).Seconds())
	}
	return percentile(latencies, 50), percentile(latencies, 99), nil
}

// converged reports whether ns holds n AppServices whose status describes their spec and
// says Available, with no rollout under way.
func converged(c client.Reader, ns string, n int) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		list := &appsv1api.AppServiceList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return false, err
		}
		done := 0
		for _, a := range list.Items {
			if a.Status.ObservedGeneration == a.Generation && meta.IsStatusConditionTrue(a.Status.Conditions, "Available") &&
				meta.IsStatusConditionFalse(a.Status.Conditions, "Progressing") {
				done++
			}
		}
		return done == n, nil
	}
}

// unrelated creates n Secrets and n ConfigMaps of 16 KiB, and n/3 Deployments without pods,
// in a namespace of their own: objects the operator must not hold in memory.
func unrelated(ctx context.Context, c client.Client, n int) error {
	const ns = "unrelated"
	if err := namespace(ctx, c, ns); err != nil {
		return err
	}
	blob := strings.Repeat("x", 16<<10)
	return parallel(ctx, n, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("u-%05d", i)
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: map[string]string{"v": blob}}); err != nil {
			return err
		}
		if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"v": blob}}); err != nil {
			return err
		}
		if i%3 != 0 {
			return nil
		}
		dep, _ := floorChildren(ns, i, image1)
		dep.Labels, dep.Spec.Replicas = map[string]string{"app": name}, ptr.To[int32](0)
		return c.Create(ctx, dep)
	})
}

// scrape renders what the operator's metrics endpoint serves (controller-runtime's
// registry, which holds the operator's own metrics too) in the text format Prometheus
// scrapes, and returns its size and the number of middleware_operator_* series.
func scrape() (bytes, own int, err error) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0, 0, err
	}
	var page strings.Builder
	enc := expfmt.NewEncoder(&page, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			return 0, 0, err
		}
		if strings.HasPrefix(mf.GetName(), "middleware_operator_") {
			own += len(mf.GetMetric())
		}
	}
	return page.Len(), own, nil
}

// statusChanges counts the operator's AppService status writes by what changed
// (middleware_operator_status_writes_total), wave by wave.
type statusChanges struct{ last map[string]int64 }

// Reset returns the status writes by change since the last Reset.
func (s *statusChanges) Reset() map[string]int64 {
	now := map[string]int64{}
	families, _ := ctrlmetrics.Registry.Gather()
	for _, mf := range families {
		if mf.GetName() != "middleware_operator_status_writes_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["kind"] == "AppService" {
				now[labels["change"]] = int64(m.GetCounter().GetValue())
			}
		}
	}
	since := map[string]int64{}
	for k, v := range now {
		if d := v - s.last[k]; d > 0 {
			since[k] = d
		}
	}
	s.last = now
	return since
}

// reconciles counts the in-process operator's AppService reconciles
// (controller_runtime_reconcile_total of the appservice controller, every result), wave by
// wave.
type reconciles struct{ last int64 }

// Reset returns the reconciles since the last Reset.
func (r *reconciles) Reset() int64 {
	var now int64
	families, _ := ctrlmetrics.Registry.Gather()
	for _, mf := range families {
		if mf.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabel(m, "controller", "appservice") {
				now += int64(m.GetCounter().GetValue())
			}
		}
	}
	since := now - r.last
	r.last = now
	return since
}
