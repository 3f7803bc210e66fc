package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestMain removes the binaries the runs built.
func TestMain(m *testing.M) {
	code := m.Run()
	if dir, err := buildDir(); err == nil {
		_ = os.RemoveAll(dir)
	}
	os.Exit(code)
}

// BenchmarkAppServices runs the side-by-side measurement for each N in MWO_BENCH_N
// (comma-separated, default 1000), MWO_BENCH_RUNS times each (default 1; the floor and the
// operator alternate, each on a fresh cluster), prints the tables (with the medians of the
// update wave's figures when there are several runs) and writes bin/bench-appservices.json.
// MWO_BENCH_STEADY sets the steady-state window (default 2m); MWO_BENCH_CPUPROFILE=1 writes
// the in-process operator's CPU profile of its create and update waves to
// bin/bench-cpu-N.pprof; MWO_BENCH_SKIP=floor,memcached leaves those sides out;
// MWO_BENCH_TRACE=1 prints the update wave's progress each second;
// MWO_BENCH_APISERVER_PROFILE=1 writes the kube-apiserver's CPU profiles of the update
// waves to bin/apiserver-*.pprof; MWO_BENCH_WORKERS
// (comma-separated) runs the operator side once per AppService worker count given, in turn
// (default: the operator's own).
func BenchmarkAppServices(b *testing.B) {
	ns := intsFromEnv(b, "MWO_BENCH_N", 1000)
	steady := durationFromEnv(b, "MWO_BENCH_STEADY", 2*time.Minute)
	runs := intsFromEnv(b, "MWO_BENCH_RUNS", 1)[0]
	workerCounts := intsFromEnv(b, "MWO_BENCH_WORKERS", 0)
	var all []Figures
	for range b.N * runs {
		for i, n := range slices.Repeat(ns, len(workerCounts)) {
			o := Options{N: n, Steady: steady, Unrelated: 3000, Workers: workerCounts[i/len(ns)], Logf: func(format string, args ...any) { b.Logf(format, args...) }}
			if v := os.Getenv("MWO_BENCH_SKIP"); v != "" {
				o.Skip = strings.Split(v, ",")
			}
			o.Trace = os.Getenv("MWO_BENCH_TRACE") != ""
			if os.Getenv("MWO_BENCH_APISERVER_PROFILE") != "" {
				b.Setenv("MWO_APISERVER_PROFILING", "1")
				o.APIServerProfiles = filepath.Join(testenv.RepoRoot(), "bin")
			}
			if os.Getenv("MWO_BENCH_CPUPROFILE") != "" {
				o.CPUProfile = filepath.Join(testenv.RepoRoot(), "bin", fmt.Sprintf("bench-cpu-%d.pprof", n))
			}
			f, err := Run(b.Context(), o)
			if err != nil {
				b.Fatal(err)
			}
			all = append(all, f)
			b.ReportMetric(f.Converged/f.FloorAvailable, fmt.Sprintf("converged/floor@%d", n))
			b.ReportMetric(f.Update/f.FloorUpdate, fmt.Sprintf("update/floor@%d", n))
			b.ReportMetric(f.Update/f.FloorTogether, fmt.Sprintf("update/zero-cost@%d", n))
		}
	}
	slices.SortStableFunc(all, func(a, b Figures) int { return a.N - b.N })
	fmt.Print("\n" + Table(all) + "\n" + UpdateTable(all))
	data, _ := json.MarshalIndent(all, "", "  ")
	path := filepath.Join(testenv.RepoRoot(), "bin", "bench-appservices.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	fmt.Println("figures written to", path)
}

// BenchmarkIdleRedisClusters measures the operator's CPU with idle RedisClusters of
// MWO_BENCH_IDLE_NODES nodes (default 6: three masters and their replicas; 3: masters
// only), for each number in MWO_BENCH_IDLE (comma-separated, default 20,50), over
// MWO_BENCH_IDLE_WINDOW (default 1m), and how long a frozen master takes to show in the
// status (five, one cluster each), then prints the table. MWO_BENCH_CPUPROFILE=1 writes the
// operator's CPU profile of the window to bin/bench-idle-cpu-N.pprof and its heap profile
// at the window's end to bin/bench-idle-cpu-N-heap.pprof.
func BenchmarkIdleRedisClusters(b *testing.B) {
	counts := intsFromEnv(b, "MWO_BENCH_IDLE", 20, 50)
	window := durationFromEnv(b, "MWO_BENCH_IDLE_WINDOW", time.Minute)
	nodes := intsFromEnv(b, "MWO_BENCH_IDLE_NODES", 6)[0]
	var all []IdleFigures
	for range b.N {
		for _, n := range counts {
			profile := ""
			if os.Getenv("MWO_BENCH_CPUPROFILE") != "" {
				profile = filepath.Join(testenv.RepoRoot(), "bin", fmt.Sprintf("bench-idle-cpu-%d.pprof", n))
			}
			f, err := RunIdle(b.Context(), n, nodes, window, 5, profile, func(format string, args ...any) { b.Logf(format, args...) })
			if err != nil {
				b.Fatal(err)
			}
			all = append(all, f)
			b.ReportMetric(f.PerCluster, fmt.Sprintf("cpu-s/min/cluster@%d", n))
			b.ReportMetric(f.MarginalPerCluster, fmt.Sprintf("added-cpu-s/min/cluster@%d", n))
		}
	}
	fmt.Print("\n" + IdleTable(all))
}

// intsFromEnv is the comma-separated numbers of the variable name, or def when it is unset.
func intsFromEnv(b *testing.B, name string, def ...int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for s := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			b.Fatalf("%s=%q: %v", name, v, err)
		}
		out = append(out, n)
	}
	return out
}

// durationFromEnv is the duration in the variable name, or def when it is unset.
func durationFromEnv(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		b.Fatalf("%s=%q: %v", name, v, err)
	}
	return d
}

// TestBenchSmoke runs the benchmark with 30 AppServices, so make test keeps it working,
// and checks what does not depend on the machine's speed: the create wave writes one
// Deployment and one Service per AppService and a few status writes (one per change of
// what the Deployment reports), the update wave updates each Deployment once and follows
// its rollout in the status, and at steady state the operator writes nothing.
func TestBenchSmoke(t *testing.T) {
	const n = 30
	f, err := Run(t.Context(), Options{N: n, Steady: 5 * time.Second, Unrelated: 30, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + Table([]Figures{f}) + "\n" + UpdateTable([]Figures{f}))
	t.Logf("writes: create %v, update %v, steady %v", f.CreateWrites, f.UpdateWrites, f.SteadyWrites)
	if got := f.CreateWrites["create Deployment"] + f.CreateWrites["create Service"]; got != 2*n {
		t.Errorf("%d children created for %d AppServices, want %d", got, n, 2*n)
	}
	// One event per AppService created, naming every child the reconcile created (an event
	// sent late by the recorder may count in the next wave), and none for the image change:
	// the status says it.
	created, updated := f.CreateWrites["create Event"], f.UpdateWrites["create Event"]
	if created > n || created+updated != n {
		t.Errorf("%d events for %d AppServices created, %d for an image change of each: want one per AppService created, none for the change", created, n, updated)
	}
	if got := sum(f.CreateWrites) - f.CreateWrites["create Event"]; got > 4*n {
		t.Errorf("%d writes besides events to create %d AppServices (%v), want at most %d", got, n, f.CreateWrites, 4*n)
	}
	if got := f.UpdateWrites["update Deployment"]; got != n {
		t.Errorf("%d Deployment updates for an image change of %d AppServices, want %d", got, n, n)
	}
	// The Deployment's update and the settled status: no progress written while it rolls out.
	if got := sum(f.UpdateWrites) - f.UpdateWrites["create Event"]; got > 2*n {
		t.Errorf("%d writes besides events for an image change of %d AppServices (%v), want at most %d", got, n, f.UpdateWrites, 2*n)
	}
	if f.UpdateStatusChanges["progress"] != 0 || f.CreateReconciles == 0 || f.UpdateReconciles == 0 {
		t.Errorf("update wave: %d progress writes (want 0); reconciles: create %d, update %d (want both counted)",
			f.UpdateStatusChanges["progress"], f.CreateReconciles, f.UpdateReconciles)
	}
	// Every status write is accounted for by what changed.
	for wave, w := range map[string]struct{ writes, changes map[string]int64 }{
		"create": {f.CreateWrites, f.CreateStatusChanges}, "update": {f.UpdateWrites, f.UpdateStatusChanges},
	} {
		if got, want := sum(w.changes), w.writes["patch-status AppService"]; got != want {
			t.Errorf("%s wave: %d status writes by change (%v), %d status patches sent", wave, got, w.changes, want)
		}
	}
	if got := f.ProbeWrites["create Deployment"] + f.ProbeWrites["create Service"]; got != 2*probes {
		t.Errorf("%d children created for %d AppServices created one at a time (%v), want %d: a create that can only fail", got, probes, f.ProbeWrites, 2*probes)
	}
	if got := sum(f.SteadyWrites); got != 0 {
		t.Errorf("%d writes at steady state (%v), want 0", got, f.SteadyWrites)
	}
	// A restarted operator finds everything converged: it reads, it does not write.
	if f.RestartWrites != 0 {
		t.Errorf("the operator's process made %d writes reconciling %d converged AppServices, want 0", f.RestartWrites, n+1+probes)
	}
	// Each wave's CPU is read for the API server, this process and the whole machine (busy
	// equals total, give or take rounding, on a saturated machine).
	for wave, cpu := range map[string]map[string]float64{"floor create": f.FloorCreateCPU, "operator create": f.CreateCPU, "operator update": f.UpdateCPU} {
		if cpu["kube-apiserver"] <= 0 || cpu[benchProcess] <= 0 || cpu[machineBusy] <= 0 || cpu[machineTotal] < cpu[machineBusy]-0.05 {
			t.Errorf("%s wave: CPU seconds %v: want the API server's, the bench's and the machine's above 0", wave, cpu)
		}
	}
	// The user's writes alone are read too (n of them can take under a clock tick of the
	// bench process's CPU, so only the API server's is required).
	for wave, cpu := range map[string]map[string]float64{"AppService creates alone": f.FloorUserCreateCPU, "AppService patches alone": f.FloorUserPatchCPU} {
		if cpu["kube-apiserver"] <= 0 || cpu[machineTotal] < cpu[machineBusy]-0.05 {
			t.Errorf("%s: CPU seconds %v: want the API server's above 0", wave, cpu)
		}
	}
	if f.RSSFileBytes == 0 || f.RSSFileBytes >= f.RSSBytes {
		t.Errorf("operator process: %d bytes of its RSS %d file-backed, want some but not all", f.RSSFileBytes, f.RSSBytes)
	}
	if f.RSSBytes == 0 || f.PeakRSSBytes < f.RSSBytes || f.RSSUnrelatedBytes == 0 {
		t.Errorf("operator process RSS %d, peak %d, with unrelated objects %d: want each above 0, peak at least RSS", f.RSSBytes, f.PeakRSSBytes, f.RSSUnrelatedBytes)
	}
	// The sample's pattern writes at least its Deployments, and its RSS is read too.
	if m := f.Memcached; m.CreateWrites < n || m.RSSBytes == 0 {
		t.Errorf("memcached sample: %d writes for %d Memcached, RSS %d: want at least %d writes and an RSS", m.CreateWrites, n, m.RSSBytes, n)
	}
	// Labels stay bounded: two series (desired, ready) per AppService, plus a fixed set by
	// kind, phase and condition.
	// The n AppServices, the warm-up one and the latency probes exist at the scrape.
	if apps := n + 1 + probes; f.OwnSeries < 2*apps || f.OwnSeries > 2*apps+64 {
		t.Errorf("%d middleware_operator_* series for %d AppServices, want between %d and %d", f.OwnSeries, apps, 2*apps, 2*apps+64)
	}
}

// BenchmarkRedisBackup measures backup and restore of a RedisCluster of 3 masters and 3
// replicas holding MWO_BENCH_BACKUP_KEYS keys (comma-separated, default 100000; the issue's
// size is 1000000): MWO_BENCH_BACKUP_RUNS (default 3) RedisBackups alternating with
// `redis-cli --rdb` of the same nodes, and as many restores alternating with `redis-cli
// --pipe` loads into empty clusters; the operator's peak RSS during each; then it prints
// the table.
func BenchmarkRedisBackup(b *testing.B) {
	sizes := intsFromEnv(b, "MWO_BENCH_BACKUP_KEYS", 100000)
	runs := intsFromEnv(b, "MWO_BENCH_BACKUP_RUNS", 3)[0]
	var all []BackupFigures
	for range b.N {
		for _, n := range sizes {
			f, err := RunBackup(b.Context(), n, runs, func(format string, args ...any) { b.Logf(format, args...) })
			if err != nil {
				b.Fatal(err)
			}
			all = append(all, f)
			b.ReportMetric(median(f.BackupSeen)/median(f.RDB), fmt.Sprintf("backup/redis-cli-rdb@%d", n))
			b.ReportMetric(median(f.RestoreLoad)/median(f.Pipe), fmt.Sprintf("restore-load/redis-cli-pipe@%d", n))
		}
	}
	fmt.Print("\n" + BackupTable(all))
}

// BenchmarkUnrelatedSecrets creates MWO_BENCH_SECRETS (default 10,000) Secrets that no
// resource names, with the operator running in this process and as its own process, and
// prints the watch events they caused the operator and its RSS before and after (issue 30).
func BenchmarkUnrelatedSecrets(b *testing.B) {
	n := intsFromEnv(b, "MWO_BENCH_SECRETS", 10000)[0]
	for range b.N {
		f, err := RunUnrelatedSecrets(b.Context(), n, true, b.Logf)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Println(f)
		b.ReportMetric(float64(f.UnrelatedEvents), "events")
		b.ReportMetric(growth(f.RSSBefore, f.RSSAfter), "rss-growth-%")
	}
}

// TestUnrelatedSecretsReachNoWatch is the small run of BenchmarkUnrelatedSecrets: 300
// unrelated Secrets send the operator no watch event, while a Secret labelled
// caching.WatchLabel does (so the count is live).
func TestUnrelatedSecretsReachNoWatch(t *testing.T) {
	f, err := RunUnrelatedSecrets(t.Context(), 300, false, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(f)
	if f.LabelledEvents == 0 {
		t.Error("no event for the labelled Secret: the count does not see the operator's watches")
	}
	if f.UnrelatedEvents != 0 {
		t.Errorf("%d watch events from Secrets the operator was never told about, want 0", f.UnrelatedEvents)
	}
}

// BenchmarkRedisClusterSteps times every step the operator takes while one RedisCluster
// with MWO_BENCH_STEP_KEYS keys (default 100000) and a writer goes through forming, a scale
// out and in, an upgrade and a killed master, and prints the longest of each kind.
func BenchmarkRedisClusterSteps(b *testing.B) {
	keys := intsFromEnv(b, "MWO_BENCH_STEP_KEYS", 100000)[0]
	for range b.N {
		f, err := RunSteps(b.Context(), keys, func(format string, args ...any) { b.Logf(format, args...) })
		if err != nil {
			b.Fatal(err)
		}
		longest := 0.0
		for _, s := range f.Max {
			longest = max(longest, s)
		}
		b.ReportMetric(longest, "longest-step-s")
		fmt.Print("\n" + StepTable(f))
	}
}

// BenchmarkWriteCosts prints what MWO_BENCH_N (default 1000) writes of each kind an
// AppService update wave is made of cost the API server, MWO_BENCH_RUNS rounds (default 3);
// MWO_BENCH_APISERVER_PROFILE=1 writes the kube-apiserver's profiles to bin/.
func BenchmarkWriteCosts(b *testing.B) {
	n := intsFromEnv(b, "MWO_BENCH_N", 1000)[0]
	rounds := intsFromEnv(b, "MWO_BENCH_RUNS", 3)[0]
	for range b.N {
		profiles := ""
		if os.Getenv("MWO_BENCH_APISERVER_PROFILE") != "" {
			b.Setenv("MWO_APISERVER_PROFILING", "1")
			profiles = filepath.Join(testenv.RepoRoot(), "bin")
		}
		costs, err := WriteCosts(b.Context(), n, rounds, profiles)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Printf("\n| %d writes of | kube-apiserver CPU (s) | wall (s) |\n| --- | --- | --- |\n", n)
		for _, c := range costs {
			fmt.Printf("| %s | %.2f | %.2f |\n", c.What, c.APIServerSeconds, c.WallSeconds)
		}
	}
}

// BenchmarkCreateRedisClusters times, for each number in MWO_BENCH_CREATE (comma-separated,
// default 20), that many RedisClusters of MWO_BENCH_CREATE_NODES nodes (default 3: three
// masters without replicas; 6: three masters with a replica each) created at once until all
// are Ready, against the floor of as many plain StatefulSets of the same pods measured in
// the same run, and prints the table.
func BenchmarkCreateRedisClusters(b *testing.B) {
	counts := intsFromEnv(b, "MWO_BENCH_CREATE", 20)
	nodes := intsFromEnv(b, "MWO_BENCH_CREATE_NODES", 3)[0]
	var all []CreateFigures
	for range b.N {
		for _, n := range counts {
			f, err := RunCreate(b.Context(), n, nodes, func(format string, args ...any) { b.Logf(format, args...) })
			if err != nil {
				b.Fatal(err)
			}
			all = append(all, f)
			b.ReportMetric(f.Ratio, fmt.Sprintf("ready/floor@%dx%d", n, nodes))
		}
	}
	fmt.Print("\n" + CreateTable(all))
}
