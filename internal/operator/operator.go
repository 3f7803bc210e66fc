// Package operator assembles the operator as main.go ships it: what its cache holds and
// which controllers run with how many workers. main.go, the benchmarks and tests that need
// the real thing build the manager from here, so they measure what users run.
package operator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	alerts "github.com/middleware-operator/middleware-operator/config/prometheus"
	appscontrollers "github.com/middleware-operator/middleware-operator/controllers/apps"
	rediscontrollers "github.com/middleware-operator/middleware-operator/controllers/redis"
	"github.com/middleware-operator/middleware-operator/controllers/redisbackup"
	"github.com/middleware-operator/middleware-operator/internal/caching"
	"github.com/middleware-operator/middleware-operator/internal/guard"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/monitoring"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
)

// Config is what the operator's flags decide about its controllers and cache.
type Config struct {
	// WatchNamespaces limits the cache to these namespaces; empty watches all.
	WatchNamespaces []string
	// SyncPeriod is how often every cached object is reconciled again without a change.
	SyncPeriod time.Duration
	// Workers per kind: how many objects of the kind are reconciled at once.
	AppServiceWorkers, CloudManagerWorkers, RedisClusterWorkers int
	// QPS and Burst limit the operator's requests to the API server on the client side.
	QPS   float32
	Burst int
	// Fence, when set, is checked by the RedisCluster controller before it changes a cluster
	// (LeaseFence.Check with leader election).
	Fence func(context.Context) error
	// ArchiveFence, when set, is checked by the RedisCluster controller before every write
	// of the archive to the object store (LeaseFence.Cached with leader election).
	ArchiveFence func(context.Context) error
	// MonitoringNamespace is where the leader keeps the operator's ServiceMonitor and
	// PrometheusRule once the Prometheus Operator's API is served (monitoring.Keeper);
	// empty keeps none.
	MonitoringNamespace string
	// OperatorNamespace is the namespace the operator runs in ($POD_NAMESPACE): each
	// RedisCluster's NetworkPolicy lets its pods reach the Redis client port. Empty (the
	// operator outside a cluster) adds no such rule.
	OperatorNamespace string
	// ObjectStoreAllowHTTP lets backups, schedules and restores name http:// object store
	// endpoints; ObjectStoreEndpoints, when not empty, are the only endpoints they may name
	// (objectstore.NewEndpointPolicy).
	ObjectStoreAllowHTTP bool
	ObjectStoreEndpoints []string
	// ClusterIssuers are the cert-manager ClusterIssuers a RedisCluster's spec.tls.issuerRef
	// may name (names, or prefixes ending in "*"); none when empty.
	ClusterIssuers []string
	// RestoreMaxRecord is the largest RDB record a restore loads, in bytes (0: rdbload's default).
	RestoreMaxRecord int64
	// GuardNamespace is where the operator asks, with a dry run, whether the admission guard
	// on its token is in place (guard.Reporter); empty reports it as unknown.
	GuardNamespace string
}

// Defaults are the shipped settings (main.go's flag defaults).
func Defaults() Config {
	return Config{SyncPeriod: 10 * time.Hour, AppServiceWorkers: AppServiceWorkers, CloudManagerWorkers: 4, RedisClusterWorkers: 4, QPS: -1, Burst: 0}
}

// AppServiceWorkers is how many AppServices are reconciled at once by default. In a
// fleet-wide image change nearly every reconcile is a Deployment update that waits on a busy
// API server: measured with tests/bench at 5,000 AppServices, 16 workers were busy for the
// whole wave with the updates queued 4.7 s on average behind the user's patches, and 32 kept
// up with them (18 ms).
const AppServiceWorkers = 32

// CacheOptions is what the manager's cache holds: only the operator's own objects (see
// internal/caching), in the watched namespaces.
func CacheOptions(c Config) cache.Options {
	opts := cache.Options{SyncPeriod: &c.SyncPeriod}
	if len(c.WatchNamespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, n := range c.WatchNamespaces {
			opts.DefaultNamespaces[n] = cache.Config{}
		}
	}
	return caching.Options(opts)
}

// Setup registers the five controllers, the metadata cache of user-named Secrets and
// ConfigMaps they share, and the resource metrics collector.
func Setup(mgr ctrl.Manager, c Config) error {
	// One metadata cache of Secret and ConfigMap names wakes every controller whose
	// resources name one; the objects themselves are read through the API reader.
	references, err := caching.NewReferences(mgr, CacheOptions(c).DefaultNamespaces)
	if err != nil {
		return fmt.Errorf("while creating the cache of user-named Secrets and ConfigMaps: %w", err)
	}
	stores, err := objectstore.NewEndpointPolicy(c.ObjectStoreAllowHTTP, c.ObjectStoreEndpoints)
	if err != nil {
		return fmt.Errorf("while reading the object store flags: %w", err)
	}
	scheme := mgr.GetScheme()
	if err := (&appscontrollers.AppServiceReconciler{
		Client: mgr.GetClient(), Scheme: scheme, Recorder: mgr.GetEventRecorder("appservice-controller"),
	}).SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: c.AppServiceWorkers}); err != nil {
		return fmt.Errorf("while setting up the AppService controller: %w", err)
	}
	if err := (&appscontrollers.CloudManagerReconciler{
		Client: mgr.GetClient(), Scheme: scheme, Recorder: mgr.GetEventRecorder("cloudmanager-controller"),
		APIReader: mgr.GetAPIReader(), References: references,
	}).SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: c.CloudManagerWorkers}); err != nil {
		return fmt.Errorf("while setting up the CloudManager controller: %w", err)
	}
	clusters := &rediscontrollers.RedisClusterReconciler{
		Client: mgr.GetClient(), Scheme: scheme, Recorder: mgr.GetEventRecorder("rediscluster-controller"),
		APIReader: mgr.GetAPIReader(), References: references, Fence: c.Fence, ArchiveFence: c.ArchiveFence, OperatorNamespace: c.OperatorNamespace,
		WatchNamespaces: c.WatchNamespaces, StorePolicy: stores, ClusterIssuers: c.ClusterIssuers,
		RestoreMaxRecord: c.RestoreMaxRecord,
	}
	if err := clusters.SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: c.RedisClusterWorkers}); err != nil {
		return fmt.Errorf("while setting up the RedisCluster controller: %w", err)
	}
	// Backups copy for minutes: two workers, so one slow store does not hold up every other.
	if err := (&redisbackup.RedisBackupReconciler{
		Client: mgr.GetClient(), Scheme: scheme, Recorder: mgr.GetEventRecorder("redisbackup-controller"),
		APIReader: mgr.GetAPIReader(), Clusters: clusters.Connections(), StorePolicy: stores,
	}).SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return fmt.Errorf("while setting up the RedisBackup controller: %w", err)
	}
	if err := (&redisbackup.RedisBackupScheduleReconciler{
		Client: mgr.GetClient(), Scheme: scheme, Recorder: mgr.GetEventRecorder("redisbackupschedule-controller"),
		StorePolicy: stores,
	}).SetupWithManager(mgr, controller.Options{}); err != nil {
		return fmt.Errorf("while setting up the RedisBackupSchedule controller: %w", err)
	}
	if err := mgr.Add(&guard.Reporter{Client: mgr.GetClient(), Namespace: c.GuardNamespace, Interval: 5 * time.Minute,
		Log: mgr.GetLogger().WithName("guard")}); err != nil {
		return err
	}
	if c.MonitoringNamespace != "" {
		dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
		if err != nil {
			return err
		}
		if err := mgr.Add(&monitoring.Keeper{
			Client: mgr.GetClient(), Discovery: dc, Namespace: c.MonitoringNamespace, Rules: alerts.Alerts,
			Log: mgr.GetLogger().WithName("monitoring"),
		}); err != nil {
			return err
		}
	}
	// Resources by phase and condition, and replicas, from the cache at scrape time. A
	// collector of an earlier manager in this process (tests and benchmarks start several)
	// gives way: it would report that manager's cache.
	collector := &metrics.ResourceCollector{Reader: mgr.GetCache()}
	err = ctrlmetrics.Registry.Register(collector)
	if already := (prometheus.AlreadyRegisteredError{}); errors.As(err, &already) {
		ctrlmetrics.Registry.Unregister(already.ExistingCollector)
		err = ctrlmetrics.Registry.Register(collector)
	}
	if err != nil {
		return fmt.Errorf("while registering the resource metrics: %w", err)
	}
	return nil
}
