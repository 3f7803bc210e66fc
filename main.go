// Command middleware-operator runs the controllers of AppService, RedisCluster and
// CloudManager in one controller-runtime manager.
package main

import (
	"cmp"
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/middleware-operator/middleware-operator/internal/logging"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/operator"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodetls"
	"github.com/middleware-operator/middleware-operator/internal/restore"
)

// flags are the operator's command-line settings.
type flags struct {
	metricsAddr, probeAddr, pprofAddr      string
	secureMetrics                          bool
	leaderElect                            bool
	leaderElectionID, leaderElectionNS     string
	leaseDuration, renewDeadline, retryPer time.Duration
	syncPeriod, gracefulShutdown           time.Duration
	watchNamespaces                        string
	monitoringObjects                      bool
	qps                                    float64
	burst                                  int
	appServiceWorkers                      int
	cloudManagerWorkers                    int
	redisClusterWorkers                    int
	enableHTTP2                            bool
	objectStoreAllowHTTP                   bool
	objectStoreEndpoints                   string
	clusterIssuers                         string
	restoreMaxRecord                       string
}

func parseFlags() (*flags, zap.Options) {
	f := &flags{}
	defaults := operator.Defaults()
	flag.StringVar(&f.metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint (HTTPS with authentication and authorization unless --metrics-secure=false); 0 disables it")
	flag.BoolVar(&f.secureMetrics, "metrics-secure", true, "serve metrics over HTTPS, allowing only callers that may GET /metrics")
	flag.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&f.pprofAddr, "pprof-bind-address", "", "address of the pprof endpoints; empty disables them")
	flag.BoolVar(&f.leaderElect, "leader-elect", false, "elect a leader on a Lease so only one replica reconciles")
	flag.StringVar(&f.leaderElectionID, "leader-election-id", "middleware-operator.middleware-operator.io", "name of the leader election Lease")
	flag.StringVar(&f.leaderElectionNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	flag.DurationVar(&f.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long followers wait before taking over an unrenewed lease")
	flag.DurationVar(&f.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader retries renewing before giving up leadership")
	flag.DurationVar(&f.retryPer, "leader-elect-retry-period", 2*time.Second, "how often candidates retry acquiring or renewing the lease")
	flag.DurationVar(&f.syncPeriod, "sync-period", defaults.SyncPeriod, "how often every watched object is reconciled again even without a change (resync)")
	flag.DurationVar(&f.gracefulShutdown, "graceful-shutdown-timeout", 30*time.Second, "how long running reconciles may take to finish on shutdown")
	flag.StringVar(&f.watchNamespaces, "watch-namespace", os.Getenv("WATCH_NAMESPACE"), "comma-separated namespaces to watch; empty watches all (default: $WATCH_NAMESPACE, which OLM sets from olm.targetNamespaces)")
	flag.Float64Var(&f.qps, "kube-api-qps", float64(defaults.QPS), "steady queries per second to the Kubernetes API")
	flag.IntVar(&f.burst, "kube-api-burst", defaults.Burst, "burst of queries to the Kubernetes API")
	flag.IntVar(&f.appServiceWorkers, "appservice-max-concurrent-reconciles", defaults.AppServiceWorkers, "AppServices reconciled at once")
	flag.IntVar(&f.cloudManagerWorkers, "cloudmanager-max-concurrent-reconciles", defaults.CloudManagerWorkers, "CloudManagers reconciled at once")
	flag.IntVar(&f.redisClusterWorkers, "rediscluster-max-concurrent-reconciles", defaults.RedisClusterWorkers, "RedisClusters reconciled at once")
	flag.BoolVar(&f.monitoringObjects, "monitoring-objects", true, "keep a ServiceMonitor and a PrometheusRule for the operator in its namespace ($POD_NAMESPACE) once the Prometheus Operator's API is served")
	flag.BoolVar(&f.enableHTTP2, "enable-http2", false, "serve metrics over HTTP/2 (off by default against HTTP/2 rapid-reset attacks)")
	flag.BoolVar(&f.objectStoreAllowHTTP, objectstore.AllowHTTPFlag, false, "let RedisBackups, RedisBackupSchedules and restores name http:// object store endpoints, "+
		"whose data and credentials cross the network in clear (off: https:// only, and an http:// endpoint is refused with a condition)")
	flag.StringVar(&f.objectStoreEndpoints, objectstore.EndpointsFlag, "", "comma-separated object store endpoints (scheme://host[:port]) that RedisBackups, "+
		"RedisBackupSchedules and restores may name, for example https://s3.eu-west-1.amazonaws.com,https://minio.backup.svc:9000; empty allows any")
	flag.StringVar(&f.clusterIssuers, nodetls.ClusterIssuersFlag, "", "comma-separated cert-manager ClusterIssuers that a RedisCluster's spec.tls.issuerRef may name: names, "+
		"or prefixes ending in * (tenant-a-*); * allows any. Empty allows none: a ClusterIssuer signs for every namespace, and every cluster it issues for trusts every other's certificates")
	flag.StringVar(&f.restoreMaxRecord, restore.MaxRecordFlag, "32Mi", "the largest RDB record (a key with its value) a restore or reload loads, a quantity from 1Mi to 512Mi; "+
		"one record over 1 MiB is held at a time, so the operator's memory limit must leave room for it")
	zapOpts := zap.Options{Development: false}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	return f, zapOpts
}

func main() {
	f, zapOpts := parseFlags()
	ctrl.SetLogger(logging.Deferred(zap.New(zap.UseFlagOptions(&zapOpts))))
	log := ctrl.Log.WithName("setup")
	gc := operator.TuneGC()
	log.Info("garbage collector", "gcPercent", gc.Percent, "memoryLimitBytes", gc.Limit, "note", "0 keeps GOGC / GOMEMLIMIT from the environment")
	if err := run(f); err != nil {
		log.Error(err, "the operator stopped")
		os.Exit(1)
	}
}

func run(f *flags) error {
	scheme := operator.Scheme()
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("while loading the kubeconfig: %w", err)
	}
	restConfig.QPS, restConfig.Burst = float32(f.qps), f.burst
	ctx := ctrl.SetupSignalHandler()
	if err := operator.WaitForAPIServer(ctx, restConfig, f.probeAddr, ctrl.Log.WithName("setup")); err != nil {
		if ctx.Err() != nil {
			return nil // stopped by a signal before the API server answered
		}
		return fmt.Errorf("while waiting for the API server: %w", err)
	}

	var tlsOpts []func(*tls.Config)
	if !f.enableHTTP2 {
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: f.metricsAddr, SecureServing: f.secureMetrics, TLSOpts: tlsOpts}
	if f.secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	maxRecord, err := parseMaxRecord(f.restoreMaxRecord)
	if err != nil {
		return err
	}
	cfg := operator.Config{
		WatchNamespaces: splitNamespaces(f.watchNamespaces), SyncPeriod: f.syncPeriod,
		AppServiceWorkers: f.appServiceWorkers, CloudManagerWorkers: f.cloudManagerWorkers, RedisClusterWorkers: f.redisClusterWorkers,
		ObjectStoreAllowHTTP: f.objectStoreAllowHTTP, ObjectStoreEndpoints: splitNamespaces(f.objectStoreEndpoints),
		ClusterIssuers: splitNamespaces(f.clusterIssuers), RestoreMaxRecord: maxRecord,
	}
	var lock *resourcelock.LeaseLock
	if f.leaderElect {
		if lock, err = operator.LeaderLock(restConfig, f.leaderElectionNS, f.leaderElectionID); err != nil {
			return fmt.Errorf("while setting up leader election: %w", err)
		}
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                              scheme,
		Metrics:                             metricsOpts,
		WebhookServer:                       webhook.NewServer(webhook.Options{TLSOpts: tlsOpts}),
		HealthProbeBindAddress:              f.probeAddr,
		PprofBindAddress:                    f.pprofAddr,
		LeaderElection:                      f.leaderElect,
		LeaderElectionID:                    f.leaderElectionID,
		LeaderElectionNamespace:             f.leaderElectionNS,
		LeaderElectionResourceLockInterface: leaderLock(lock),
		LeaderElectionReleaseOnCancel:       true,
		LeaseDuration:                       &f.leaseDuration,
		RenewDeadline:                       &f.renewDeadline,
		RetryPeriod:                         &f.retryPer,
		GracefulShutdownTimeout:             &f.gracefulShutdown,
		Cache:                               operator.CacheOptions(cfg),
	})
	if err != nil {
		return fmt.Errorf("while creating the manager: %w", err)
	}
	if lock != nil {
		fence := operator.FenceOf(lock, mgr.GetAPIReader())
		cfg.Fence, cfg.ArchiveFence = fence.Check, fence.Cached()
	}
	// Set from the downward API in the shipped Deployment; empty with make run.
	cfg.OperatorNamespace = os.Getenv("POD_NAMESPACE")
	// The admission guard is checked where the operator runs, or where it holds its lease.
	cfg.GuardNamespace = cmp.Or(cfg.OperatorNamespace, f.leaderElectionNS)
	if f.monitoringObjects {
		// Set from the downward API in the shipped Deployment; `make run` has none to use.
		cfg.MonitoringNamespace = os.Getenv("POD_NAMESPACE")
	}
	if err := operator.Setup(mgr, cfg); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	ctrl.Log.WithName("setup").Info("starting the manager", "watchNamespaces", f.watchNamespaces, "leaderElection", f.leaderElect)
	return mgr.Start(ctx)
}

// leaderLock is lock as the manager's option: nil (not a nil pointer) without leader election.
func leaderLock(lock *resourcelock.LeaseLock) resourcelock.Interface {
	if lock == nil {
		return nil
	}
	return lock
}

// parseMaxRecord reads --restore-max-record: a quantity from 1Mi to 512Mi.
func parseMaxRecord(v string) (int64, error) {
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Value() < 1<<20 || q.Value() > 512<<20 {
		return 0, fmt.Errorf("--%s=%q: want a quantity from 1Mi to 512Mi, for example 64Mi", restore.MaxRecordFlag, v)
	}
	return q.Value(), nil
}

// splitNamespaces splits a comma-separated namespace list, dropping empty entries.
func splitNamespaces(s string) []string {
	var out []string
	for n := range strings.SplitSeq(s, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}
