// Package bench measures the AppService controller at scale on the local cluster, side by
// side with a floor: a plain client-go program that creates the same Deployments and
// Services with 16 workers and no client-side limit. BenchmarkAppServices prints the table
// and writes the figures as JSON; TestBenchSmoke runs it with a small N in make test.
package bench

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// Figures are one run's measurements; durations in seconds.
type Figures struct {
	N int `json:"n"`
	// Workers is the operator's AppService worker count.
	Workers int `json:"workers"`
	// The floor: N Deployments and N Services created by client-go directly.
	FloorChildren  float64 `json:"floorChildrenSeconds"`
	FloorAvailable float64 `json:"floorAvailableSeconds"`
	FloorUpdate    float64 `json:"floorUpdateSeconds"`
	// FloorRolledOut is when, after the floor's image change, every Deployment is
	// available with the new image: the rollouts' end.
	FloorRolledOut float64 `json:"floorRolledOutSeconds"`
	// FloorAvailableAsAsked is when every Deployment first counted as many available
	// replicas as it asks for, its spec observed (availableAsAsked): what FloorRolledOut
	// measured until 2026-12-01.
	FloorAvailableAsAsked float64 `json:"floorAvailableAsAskedSeconds"`
	// The user's own part of each of the operator's waves, alone, on the floor's cluster
	// once its rollout is over and with no operator to react: N AppServices created, then
	// each patched to the new image. No operator can make its waves cost less.
	FloorUserCreate float64 `json:"floorAppServiceCreateSeconds"`
	FloorUserPatch  float64 `json:"floorAppServicePatchSeconds"`
	// FloorStatus is the operator's status written to each of them, and
	// FloorUserPatchStatus their patch once more with it and a watcher of AppServices: the
	// user's part of an update wave with any operator that reports a status.
	FloorStatus             float64            `json:"floorStatusSeconds"`
	FloorUserPatchStatus    float64            `json:"floorAppServicePatchWithStatusSeconds"`
	FloorUserPatchStatusCPU map[string]float64 `json:"floorAppServicePatchWithStatusCPUSeconds"`
	// FloorTogether is the update wave of an operator that costs nothing: each AppService
	// patched (with the status and the watcher) and its Deployment patched as soon as the
	// patch is answered, so the user's patches meet the rollouts as they do with an
	// operator. Measured last on the floor's cluster.
	FloorTogether float64 `json:"floorTogetherSeconds"`
	// FloorTogetherRolledOut is when that wave's rollouts ended: the earliest an operator
	// whose Deployment writes follow the user's patches could report every status settled.
	FloorTogetherRolledOut float64            `json:"floorTogetherRolledOutSeconds"`
	FloorTogetherCPU       map[string]float64 `json:"floorTogetherCPUSeconds"`
	// The operator: N AppServices.
	Children  float64 `json:"childrenSeconds"`
	Converged float64 `json:"convergedSeconds"`
	Update    float64 `json:"updateSeconds"`
	// UpdateSettled is when, after the image change, every status again describes its
	// spec, Available and not Progressing: the rollouts' end as the AppServices report it.
	UpdateSettled float64 `json:"updateSettledSeconds"`
	// Settle is, in the same wave, when the operator's own Deployments rolled out and how
	// long each status took to settle after its Deployment did.
	Settle SettleTrace `json:"settle"`
	// CPU seconds by component (the local cluster's processes, the bench's own process with
	// its clients and the in-process operator, and the machine's busy and total seconds)
	// during each wave.
	FloorCreateCPU     map[string]float64 `json:"floorCreateCPUSeconds"`
	FloorUpdateCPU     map[string]float64 `json:"floorUpdateCPUSeconds"`
	FloorUserCreateCPU map[string]float64 `json:"floorAppServiceCreateCPUSeconds"`
	FloorUserPatchCPU  map[string]float64 `json:"floorAppServicePatchCPUSeconds"`
	CreateCPU          map[string]float64 `json:"createCPUSeconds"`
	UpdateCPU          map[string]float64 `json:"updateCPUSeconds"`
	// Writes the operator made, by verb and kind, per wave.
	CreateWrites map[string]int64 `json:"createWrites"`
	UpdateWrites map[string]int64 `json:"updateWrites"`
	// The AppService status writes of each wave by what changed (see statusChange in
	// controllers/apps): the operator's own account of each status write.
	CreateStatusChanges map[string]int64 `json:"createStatusChanges"`
	UpdateStatusChanges map[string]int64 `json:"updateStatusChanges"`
	ProbeWrites         map[string]int64 `json:"probeWrites"`
	// The AppService reconciles of each wave (controller_runtime_reconcile_total).
	CreateReconciles int64 `json:"createReconciles"`
	UpdateReconciles int64 `json:"updateReconciles"`
	// UpdatePodLists is how many LISTs of pods the operator sent in the update wave (a
	// rollout that stands still is checked, see apps.PodCheckAfter).
	UpdatePodLists int64 `json:"updatePodLists"`
	// Steady state after convergence.
	SteadySeconds float64          `json:"steadySeconds"`
	SteadyWrites  map[string]int64 `json:"steadyWrites"`
	SteadyCPU     float64          `json:"steadyCPUSecondsPerMinute"`
	// Go heap in use after a GC: with the AppServices, then also with unrelated objects.
	HeapBytes          uint64 `json:"heapBytes"`
	HeapUnrelatedBytes uint64 `json:"heapWithUnrelatedBytes"`
	// The operator's binary started as a process once N exist: how long until it had
	// reconciled them all and was idle, the writes that took, and its resident set then
	// (current and peak), and after the unrelated objects were added.
	RestartSeconds        float64 `json:"restartSeconds"`
	RestartWrites         int64   `json:"restartWrites"`
	RSSBytes              uint64  `json:"rssBytes"`
	PeakRSSBytes          uint64  `json:"peakRSSBytes"`
	RSSFileBytes          uint64  `json:"rssFileBytes"` // of RSSBytes, file-backed (the binary)
	RSSUnrelatedBytes     uint64  `json:"rssWithUnrelatedBytes"`
	PeakRSSUnrelatedBytes uint64  `json:"peakRSSWithUnrelatedBytes"`
	// ScrapeBytes is the size of the operator's metrics page (text format) at steady state;
	// OwnSeries counts its middleware_operator_* series there.
	ScrapeBytes int `json:"scrapeBytes"`
	OwnSeries   int `json:"ownSeries"`
	// Latency from an AppService's creation to its Deployment's: while N exist (probes
	// created one every 100 ms), and during the creation wave of N.
	LatencyP50     float64 `json:"latencyP50Seconds"`
	LatencyP99     float64 `json:"latencyP99Seconds"`
	WaveLatencyP50 float64 `json:"waveLatencyP50Seconds"`
	WaveLatencyP99 float64 `json:"waveLatencyP99Seconds"`
	// Memcached is the Operator SDK memcached sample's pattern on its own fresh cluster.
	Memcached MemcachedFigures `json:"memcached"`
}

// Table renders figures as the README's tables: speed and writes, then memory and the
// memcached sample's pattern side by side.
func Table(fs []Figures) string {
	var b strings.Builder
	b.WriteString("| N | floor: children / Available / update (s) | AppServices alone: creates / patches (s) | operator: children / converged / update / settled (s) | ratio converged / update | writes per AppService: create / update | steady writes, CPU s/min | latency p50 / p99 with N (s) | creation wave latency p50 / p99 (s) | metrics page: bytes / own series |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, f := range fs {
		fmt.Fprintf(&b, "| %d | %.1f / %.1f / %.1f | %.1f / %.1f | %.1f / %.1f / %.1f / %.1f | %.2f / %.2f | %.2f / %.2f | %d, %.2f | %.3f / %.3f | %.1f / %.1f | %d / %d |\n",
			f.N, f.FloorChildren, f.FloorAvailable, f.FloorUpdate, f.FloorUserCreate, f.FloorUserPatch, f.Children, f.Converged, f.Update, f.UpdateSettled,
			f.Converged/f.FloorAvailable, f.Update/f.FloorUpdate,
			float64(sum(f.CreateWrites))/float64(f.N), float64(sum(f.UpdateWrites))/float64(f.N),
			sum(f.SteadyWrites), f.SteadyCPU, f.LatencyP50, f.LatencyP99, f.WaveLatencyP50, f.WaveLatencyP99,
			f.ScrapeBytes, f.OwnSeries)
	}
	b.WriteString("\n| N | operator heap per AppService | operator process: RSS / peak (MiB), binary's pages | +unrelated: RSS / peak | restart: settled (s) / writes | memcached: Deployments / Available (s) | memcached writes: create / steady | memcached steady CPU s/min | memcached RSS / peak (MiB), binary's pages | +unrelated: RSS / peak |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, f := range fs {
		m := f.Memcached
		fmt.Fprintf(&b, "| %d | %.1f KiB | %.1f / %.1f, %.1f | %+.1f%% / %+.1f%% | %.1f / %d | %.1f / %.1f | %d / %d | %.2f | %.1f / %.1f, %.1f | %+.1f%% / %+.1f%% |\n",
			f.N, float64(f.HeapBytes)/float64(f.N)/1024, mib(f.RSSBytes), mib(f.PeakRSSBytes), mib(f.RSSFileBytes),
			growth(f.RSSBytes, f.RSSUnrelatedBytes), growth(f.PeakRSSBytes, f.PeakRSSUnrelatedBytes), f.RestartSeconds, f.RestartWrites,
			m.Children, m.Available, m.CreateWrites, m.SteadyWrites, m.SteadyCPU, mib(m.RSSBytes), mib(m.PeakRSSBytes), mib(m.RSSFileBytes),
			growth(m.RSSBytes, m.RSSUnrelatedBytes), growth(m.PeakRSSBytes, m.PeakRSSUnrelatedBytes))
	}
	b.WriteString("\n| N | wave | CPU seconds by process during the wave |\n| --- | --- | --- |\n")
	for _, f := range fs {
		for _, w := range []struct {
			name string
			cpu  map[string]float64
		}{{"floor create", f.FloorCreateCPU}, {"AppService creates alone", f.FloorUserCreateCPU}, {"operator create", f.CreateCPU},
			{"floor update", f.FloorUpdateCPU}, {"AppService patches alone", f.FloorUserPatchCPU},
			{"AppService patches with the operator's status", f.FloorUserPatchStatusCPU}, {"operator update", f.UpdateCPU}} {
			fmt.Fprintf(&b, "| %d | %s | %s |\n", f.N, w.name, cpuLine(w.cpu))
		}
	}
	b.WriteString("\n| N | wave | writes per AppService by verb and resource |\n| --- | --- | --- |\n")
	for _, f := range fs {
		for _, w := range []struct {
			name   string
			writes map[string]int64
			per    int
		}{{"create N", f.CreateWrites, f.N}, {"update N", f.UpdateWrites, f.N}, {"create one at a time", f.ProbeWrites, probes},
			{"steady", f.SteadyWrites, f.N}, {"create N: status writes by change", f.CreateStatusChanges, f.N},
			{"update N: status writes by change", f.UpdateStatusChanges, f.N}} {
			perApp := make([]string, 0, len(w.writes))
			for _, k := range slices.Sorted(maps.Keys(w.writes)) {
				perApp = append(perApp, fmt.Sprintf("%s %.2f", k, float64(w.writes[k])/float64(w.per)))
			}
			if len(perApp) == 0 {
				perApp = append(perApp, "none")
			}
			fmt.Fprintf(&b, "| %d | %s | %s |\n", f.N, w.name, strings.Join(perApp, ", "))
		}
	}
	return b.String()
}

// UpdateTable renders, one row per run, the update wave against its floor: the wave
// against the floor's plus the user's own patches (its lower bound), the rollouts' end as
// the statuses report it against the floor's, and the writes and reconciles per AppService;
// then, for each N run more than once, the medians.
func UpdateTable(fs []Figures) string {
	var b strings.Builder
	b.WriteString("| N | run | floor update + AppService patches alone (s) | operator update wave (s) | ratio to floor + patches | patches with the operator's status (s) | ratio to floor + those | a zero-cost operator's wave (s) | ratio to it | floor rolled out (s) | operator settled (s) | ratio | zero-cost wave rolled out (s) | settled / it | operator's own rollouts (s) | settled / own rollouts | rolled out to settled p99 / max (s) | writes per update | reconciles per AppService: create / update | creation latency p50 / p99 with N (s) | peak RSS operator / memcached (MiB) |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	row := func(n int, run string, r updateRow) {
		fmt.Fprintf(&b, "| %d | %s | %.1f + %.1f | %.1f | %.2f | %.1f | %.2f | %.1f | %.2f | %.1f | %.1f | %.2f | %.1f | %.2f | %.1f | %.2f | %.2f / %.2f | %.2f | %.2f / %.2f | %.3f / %.3f | %.1f / %.1f |\n",
			n, run, r.floorUpdate, r.userPatch, r.update, r.updateRatio, r.userPatchStatus, r.updateRatioStatus, r.together, r.updateRatioTogether,
			r.floorRolledOut, r.settled, r.settledRatio, r.togetherRolledOut, r.settledTogetherRatio, r.ownRolledOut, r.settledOwnRatio, r.lagP99, r.lagMax,
			r.writesPerUpdate, r.createReconciles, r.updateReconciles, r.p50, r.p99, r.peakRSS, r.memcachedPeakRSS)
	}
	type side struct{ n, workers int }
	runs := map[side][]updateRow{}
	var sides []side
	for _, f := range fs {
		k := side{f.N, f.Workers}
		if _, ok := runs[k]; !ok {
			sides = append(sides, k)
		}
		r := rowOf(f)
		runs[k] = append(runs[k], r)
		row(f.N, fmt.Sprintf("%d (%d workers)", len(runs[k]), f.Workers), r)
	}
	for _, k := range sides {
		if rs := runs[k]; len(rs) > 1 {
			row(k.n, fmt.Sprintf("median of %d (%d workers)", len(rs), k.workers), medianRow(rs))
		}
	}
	return b.String()
}

// updateRow is one row of UpdateTable.
type updateRow struct {
	floorUpdate, userPatch, update, updateRatio, floorRolledOut, settled, settledRatio       float64
	ownRolledOut, settledOwnRatio, lagP99, lagMax, togetherRolledOut, settledTogetherRatio   float64
	userPatchStatus, updateRatioStatus, together, updateRatioTogether                        float64
	writesPerUpdate, createReconciles, updateReconciles, p50, p99, peakRSS, memcachedPeakRSS float64
}

func rowOf(f Figures) updateRow {
	n := float64(f.N)
	return updateRow{
		floorUpdate: f.FloorUpdate, userPatch: f.FloorUserPatch, update: f.Update, updateRatio: f.Update / (f.FloorUpdate + f.FloorUserPatch),
		userPatchStatus: f.FloorUserPatchStatus, updateRatioStatus: f.Update / (f.FloorUpdate + f.FloorUserPatchStatus),
		together: f.FloorTogether, updateRatioTogether: f.Update / f.FloorTogether,
		floorRolledOut: f.FloorRolledOut, settled: f.UpdateSettled, settledRatio: f.UpdateSettled / f.FloorRolledOut,
		togetherRolledOut: f.FloorTogetherRolledOut, settledTogetherRatio: f.UpdateSettled / f.FloorTogetherRolledOut,
		ownRolledOut: f.Settle.RolledOut, settledOwnRatio: f.UpdateSettled / f.Settle.RolledOut, lagP99: f.Settle.LagP99, lagMax: f.Settle.LagMax,
		writesPerUpdate: float64(sum(f.UpdateWrites)) / n, createReconciles: float64(f.CreateReconciles) / n,
		updateReconciles: float64(f.UpdateReconciles) / n, p50: f.LatencyP50, p99: f.LatencyP99,
		peakRSS: mib(f.PeakRSSBytes), memcachedPeakRSS: mib(f.Memcached.PeakRSSBytes),
	}
}

// medianRow is the median of each column of rs, the ratios of the medians of the times
// they divide (not the medians of the runs' ratios).
func medianRow(rs []updateRow) updateRow {
	col := func(get func(updateRow) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = get(r)
		}
		return median(v)
	}
	m := updateRow{
		floorUpdate: col(func(r updateRow) float64 { return r.floorUpdate }), userPatch: col(func(r updateRow) float64 { return r.userPatch }),
		userPatchStatus: col(func(r updateRow) float64 { return r.userPatchStatus }), together: col(func(r updateRow) float64 { return r.together }),
		update: col(func(r updateRow) float64 { return r.update }), floorRolledOut: col(func(r updateRow) float64 { return r.floorRolledOut }),
		settled: col(func(r updateRow) float64 { return r.settled }), ownRolledOut: col(func(r updateRow) float64 { return r.ownRolledOut }),
		togetherRolledOut: col(func(r updateRow) float64 { return r.togetherRolledOut }),
		lagP99:            col(func(r updateRow) float64 { return r.lagP99 }), lagMax: col(func(r updateRow) float64 { return r.lagMax }), writesPerUpdate: col(func(r updateRow) float64 { return r.writesPerUpdate }),
		createReconciles: col(func(r updateRow) float64 { return r.createReconciles }), updateReconciles: col(func(r updateRow) float64 { return r.updateReconciles }),
		p50: col(func(r updateRow) float64 { return r.p50 }), p99: col(func(r updateRow) float64 { return r.p99 }),
		peakRSS: col(func(r updateRow) float64 { return r.peakRSS }), memcachedPeakRSS: col(func(r updateRow) float64 { return r.memcachedPeakRSS }),
	}
	m.updateRatio, m.settledRatio, m.settledOwnRatio = m.update/(m.floorUpdate+m.userPatch), m.settled/m.floorRolledOut, m.settled/m.ownRolledOut
	m.updateRatioStatus, m.updateRatioTogether = m.update/(m.floorUpdate+m.userPatchStatus), m.update/m.together
	m.settledTogetherRatio = m.settled / m.togetherRolledOut
	return m
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// growth is how much after is above before, in percent.
func growth(before, after uint64) float64 {
	if before == 0 {
		return 0
	}
	return 100 * (float64(after) - float64(before)) / float64(before)
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// app is the i-th AppService of a run: one pod, one port.
func app(ns string, i int, image string) *appsv1api.AppService {
	return &appsv1api.AppService{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%05d", i), Namespace: ns},
		Spec: appsv1api.AppServiceSpec{
			Size: ptr.To[int32](1), Image: image,
			Ports: []appsv1api.AppServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}},
		},
	}
}

// parallel runs f(i) for i in [0, n) on the bench's workers; the first error wins.
func parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// waitFor polls cond every 100 ms until it holds (for at most the bench's timeout), and
// returns how long that took from start.
func waitFor(ctx context.Context, start time.Time, what string, cond func(ctx context.Context) (bool, error)) (float64, error) {
	return waitForEvery(ctx, start, what, 100*time.Millisecond, cond)
}

// waitForEvery is waitFor asking cond every period.
func waitForEvery(ctx context.Context, start time.Time, what string, period time.Duration, cond func(ctx context.Context) (bool, error)) (float64, error) {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond(ctx)
		if err != nil {
			return 0, err
		}
		if ok {
			return time.Since(start).Seconds(), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s: not after %s", what, timeout)
		}
		time.Sleep(period)
	}
}

// deploymentsDone reports whether ns holds n Deployments that all run image and, when
// available is set, have rolled out (rolledOut).
func deploymentsDone(c client.Reader, ns string, n int, image string, available bool) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		done, err := deploymentsRunning(ctx, c, ns, image, available)
		return done == n, err
	}
}

// deploymentsRunning counts the Deployments in ns that run image and, when available is
// set, have rolled out (rolledOut).
func deploymentsRunning(ctx context.Context, c client.Reader, ns, image string, available bool) (int, error) {
	return countDeployments(ctx, c, ns, func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == image && (!available || rolledOut(d, image))
	})
}

// countDeployments counts the Deployments in ns for which counted is true.
func countDeployments(ctx context.Context, c client.Reader, ns string, counted func(*appsv1.Deployment) bool) (int, error) {
	list := &appsv1.DeploymentList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return 0, err
	}
	done := 0
	for i := range list.Items {
		if counted(&list.Items[i]) {
			done++
		}
	}
	return done, nil
}

// availableAsAsked reports whether d's controller observed its spec and counts as many
// available replicas as it asks for: the measure of a rollout's end until 2026-12-01, which
// an old pod still running satisfies before the new one starts (see rolledOut).
func availableAsAsked(d *appsv1.Deployment, image string) bool {
	return d.Spec.Template.Spec.Containers[0].Image == image && d.Status.ObservedGeneration == d.Generation &&
		d.Status.AvailableReplicas == ptr.Deref(d.Spec.Replicas, 1)
}

// servicesExist reports whether ns holds n Services.
func servicesExist(c client.Reader, ns string, n int) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		list := &corev1.ServiceList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return false, err
		}
		return len(list.Items) >= n, nil
	}
}

// floorChildren are the Deployment and Service the operator would make for the i-th app.
func floorChildren(ns string, i int, image string) (*appsv1.Deployment, *corev1.Service) {
	a := app(ns, i, image)
	return resources.AppServiceDeployment(a), resources.AppServiceService(a)
}

// heapInUse is the Go heap in use after a GC.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// heapAbove is the Go heap in use after a GC beyond baseline (0 when below it).
func heapAbove(baseline uint64) uint64 {
	h := heapInUse()
	return h - min(baseline, h)
}

// percentile is the p-th percentile (0-100) of xs.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p/100))]
}
