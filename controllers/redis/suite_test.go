package redis_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	rediscontrollers "github.com/middleware-operator/middleware-operator/controllers/redis"
	"github.com/middleware-operator/middleware-operator/controllers/redisbackup"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/recovery"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/redispods"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

var (
	env     *testenv.Env
	kubelet *redispods.Kubelet
	// mgr runs the reconciler under test.
	mgr ctrl.Manager
	// logs holds everything the operator logged.
	logs testenv.LockedBuffer
	// store is the S3-compatible object store backups go to (HTTPS with its own CA).
	store *localcluster.ObjectStore
)

// countingAdmin counts the topology commands (formations and recoveries) it sends.
type countingAdmin struct {
	clusterconn.Admin
	topology *atomic.Int64
}

func (c countingAdmin) Create(ctx context.Context, plan layout.Plan) error {
	c.topology.Add(1)
	return c.Admin.Create(ctx, plan)
}

func (c countingAdmin) Run(ctx context.Context, action recovery.Action) error {
	c.topology.Add(int64(len(action.Commands)))
	return c.Admin.Run(ctx, action)
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if code, ran := testenv.RunUnitTestsWhenShort(m); ran {
		return code
	}
	testenv.TestsAtATime(6)
	var err error
	testenv.LogWriter = &logs // the operator logs at debug level here; run greps it for passwords
	testenv.FailureReport = reportSteps
	env, err = testenv.Start(context.Background(), 3)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if kubelet, err = redispods.Watching(env.Cluster.Config, env.Cluster.Dir+"/redis-data", logf); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubeletDone := make(chan struct{})
	go func() { kubelet.Run(ctx); close(kubeletDone) }()
	defer func() { cancel(); <-kubeletDone }()

	if store, err = localcluster.StartObjectStore(ctx, localcluster.ObjectStoreOptions{Dir: env.Cluster.Dir + "/objectstore"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer store.Stop()

	var stop func() error
	mgr, stop, err = env.StartManager(func(mgr ctrl.Manager) error {
		clusters := &rediscontrollers.RedisClusterReconciler{
			Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("rediscluster-controller"),
			PasswordGrace:     5 * time.Second, // this runner refreshes Secret volumes at once; a kubelet takes up to 2 min
			OperatorNamespace: operatorNamespace,
			ClusterIssuers:    []string{"t-*"}, // the tests' namespaces name their ClusterIssuers
		}
		if err := clusters.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 4}); err != nil { // as main.go ships it
			return err
		}
		if err := (&redisbackup.RedisBackupReconciler{
			Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("redisbackup-controller"), Clusters: clusters.Connections(),
		}).SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
			return err
		}
		return (&redisbackup.RedisBackupScheduleReconciler{
			Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("redisbackupschedule-controller"),
		}).SetupWithManager(mgr, controller.Options{})
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = stop() }()
	code := m.Run()
	code = env.CheckManagerGrants(code, mayBeUnused, "controllers/redis/rediscluster_controller.go", "controllers/redisbackup/redisbackup_controller.go",
		"controllers/redisbackup/redisbackupschedule_controller.go")
	reportReconcileTimes()
	if reconcileTooSlow && code == 0 {
		fmt.Fprintf(os.Stderr, "FAIL: a reconcile held a worker longer than 15 s, or a step longer than %d s\n", stepTooSlow)
		code = 1
	}
	if leaked := passwordsInLogs(); leaked != "" {
		fmt.Fprintln(os.Stderr, "FAIL: a Redis password appears in the operator's logs:", leaked)
		return 1
	}
	if leaked := keysShown(); leaked != "" {
		fmt.Fprintln(os.Stderr, "FAIL: a key name the tests wrote appears where the operator reports:", leaked)
		return 1
	}
	return code
}

// passwordsInLogs returns the name of a password Secret whose value the operator logged.
func passwordsInLogs() string {
	secrets := &corev1.SecretList{}
	if err := env.Client.List(context.Background(), secrets, client.MatchingLabels{"app.kubernetes.io/name": "rediscluster"}); err != nil {
		return "cannot list Secrets: " + err.Error()
	}
	logged := logs.String()
	if len(logged) == 0 {
		return "nothing was logged: the check would prove nothing"
	}
	for _, s := range secrets.Items {
		if pw := string(s.Data["password"]); pw != "" && strings.Contains(logged, pw) {
			return s.Namespace + "/" + s.Name
		}
	}
	return ""
}

// testKey matches the names of the keys the tests write (w:<n> by the writers, p:<n> by
// preload), standing alone.
var testKey = regexp.MustCompile(`(^|[^A-Za-z0-9_.])[wp]:[0-9]+([^0-9]|$)`)

// keysShown returns where a key name the tests wrote appears in what the operator reports:
// its logs, the events, the RedisClusters' statuses. None may hold key names or values.
func keysShown() string {
	if m := testKey.FindString(logs.String()); m != "" {
		return "the operator's logs: " + m
	}
	evs := &corev1.EventList{}
	if err := env.Client.List(context.Background(), evs); err != nil {
		return "cannot list events: " + err.Error()
	}
	for _, e := range evs.Items {
		if m := testKey.FindString(e.Message); m != "" {
			return "event " + e.Namespace + "/" + e.Name + ": " + m
		}
	}
	rcs := &redisv1alpha1.RedisClusterList{}
	if err := env.Client.List(context.Background(), rcs); err != nil {
		return "cannot list RedisClusters: " + err.Error()
	}
	for _, rc := range rcs.Items {
		status, _ := json.Marshal(rc.Status)
		if m := testKey.FindString(string(status)); m != "" {
			return "the status of " + rc.Namespace + "/" + rc.Name + ": " + m
		}
	}
	return ""
}

// logf prints the Redis kubelet's progress when MWO_TEST_VERBOSE is set.
func logf(format string, args ...any) {
	if os.Getenv("MWO_TEST_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

// reportReconcileTimes prints, from controller-runtime's reconcile-time histogram and the
// operator's conflict counter, how long the longest reconciles of the whole run took and
// how many status writes hit a conflict; it fails the run when a reconcile took over 15 s or
// a step over stepTooSlow.
func reportReconcileTimes() {
	families, err := metrics.Registry.Gather()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot read the metrics:", err)
		return
	}
	for _, f := range families {
		switch f.GetName() {
		case "controller_runtime_reconcile_time_seconds":
			for _, m := range f.GetMetric() {
				h := m.GetHistogram()
				slowest := slowestBucket(h)
				fmt.Fprintf(os.Stderr, "reconciles of %s: %d in %.0f s; the longest took at most %g s\n", controllerOf(m), h.GetSampleCount(), h.GetSampleSum(), slowest)
				// A backup copies for as long as the data takes; the suite's are small.
				if limit := map[string]float64{"redisbackup": 60}[controllerOf(m)]; slowest > max(limit, 15) {
					reconcileTooSlow = true
				}
			}
		case "middleware_operator_rediscluster_step_seconds":
			var steps []string
			for _, m := range f.GetMetric() {
				h := m.GetHistogram()
				slowest := slowestBucket(h)
				steps = append(steps, fmt.Sprintf("%s %d, at most %g s", m.GetLabel()[0].GetValue(), h.GetSampleCount(), slowest))
				if slowest > stepTooSlow {
					reconcileTooSlow = true
				}
			}
			fmt.Fprintf(os.Stderr, "steps by kind: %s\n", strings.Join(steps, "; "))
			reportOverruns()
		case "middleware_operator_rediscluster_status_conflicts_total":
			for _, m := range f.GetMetric() {
				fmt.Fprintf(os.Stderr, "status writes refused on a conflict: %.0f\n", m.GetCounter().GetValue())
			}
		}
	}
}

// reportOverruns prints the operator's "step overran its budget" lines (at most 10), which
// say which step kinds ran past stepBudget and for how long.
func reportOverruns() {
	var lines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "step overran its budget") {
			lines = append(lines, l)
		}
	}
	fmt.Fprintf(os.Stderr, "steps that overran their budget: %d\n", len(lines))
	for _, l := range lines[:min(len(lines), 10)] {
		fmt.Fprintln(os.Stderr, "  "+l)
	}
}

// reportSteps logs, for a test that failed, the last steps the operator took in its
// namespace and the errors it met there, runs of the same step and reason counted once, so
// that a CI failure says what the operator was doing (its logs are not in the test output).
func reportSteps(t *testing.T, ns string) {
	type entry struct {
		what  string
		count int
	}
	var entries []entry
	for _, l := range strings.Split(logs.String(), "\n") {
		var line struct {
			Msg, Namespace, Kind, Reason, Error string
		}
		if json.Unmarshal([]byte(l), &line) != nil || line.Namespace != ns {
			continue
		}
		var what string
		switch {
		case line.Msg == "step":
			what = fmt.Sprintf("step %s: %s", line.Kind, line.Reason)
		case line.Error != "":
			what = fmt.Sprintf("%s: %s", line.Msg, line.Error)
		default:
			continue
		}
		if n := len(entries); n > 0 && entries[n-1].what == what {
			entries[n-1].count++
			continue
		}
		entries = append(entries, entry{what, 1})
	}
	t.Logf("the operator's last steps and errors in %s (%d runs of one step and reason in all):", ns, len(entries))
	for _, e := range entries[max(0, len(entries)-40):] {
		t.Logf("  %dx %s", e.count, e.what)
	}
}

// controllerOf is the controller label of a controller-runtime series.
func controllerOf(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "controller" {
			return l.GetValue()
		}
	}
	return "?"
}

// slowestBucket is the upper bound of h's highest non-empty bucket (+Inf above the last).
func slowestBucket(h *dto.Histogram) float64 {
	var slowest float64
	prev := uint64(0)
	for _, b := range h.GetBucket() {
		if b.GetCumulativeCount() > prev {
			slowest = b.GetUpperBound()
		}
		prev = b.GetCumulativeCount()
	}
	if h.GetSampleCount() > prev {
		slowest = math.Inf(1)
	}
	return slowest
}

// reconcileTooSlow is set when a reconcile held a worker longer than 15 s, or one step
// longer than stepTooSlow.
var reconcileTooSlow bool

// stepTooSlow is the guard on one step's duration: a step runs under stepBudget (5 s), and
// a batch of slot moves under way may finish past it; the guard (a bucket bound of the step
// histogram) leaves room for a loaded machine.
const stepTooSlow = 30

// mayBeUnused are the grants of the RBAC markers that no request of the operator needs to
// use in a test run, and why the operator has them.
var mayBeUnused = map[testenv.Grant]string{
	{Group: "redis.middleware-operator.io", Resource: "redisclusters/finalizers", Verb: "update"}:        "the API server checks it when the operator sets blockOwnerDeletion on a child's owner reference; the operator sends no such request itself",
	{Group: "redis.middleware-operator.io", Resource: "redisbackupschedules/finalizers", Verb: "update"}: "the API server checks it when a schedule's RedisBackup carries blockOwnerDeletion in its owner reference; the operator sends no such request itself",
	{Group: "events.k8s.io", Resource: "events", Verb: "patch"}:                                          "the event recorder patches an event's series only when the same event repeats within minutes",
	{Group: "", Resource: "services", Verb: "update"}:                                                    "child.Ensure puts back a Service someone edited (or one an older operator made differently); no test here edits one (the AppService tests do)",
	{Group: "policy", Resource: "poddisruptionbudgets", Verb: "update"}:                                  "child.Ensure puts back a PodDisruptionBudget someone edited (or one an older operator made differently); no test here edits one",
}
