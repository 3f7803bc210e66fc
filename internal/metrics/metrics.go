// Package metrics defines the operator's own Prometheus metrics, all named
// middleware_operator_*: per-RedisCluster gauges and counters the RedisCluster reconciler
// sets from the snapshot it already took (no extra Redis or API call), and a collector that
// counts the custom resources by phase and condition and reports AppService and CloudManager
// replicas from the manager's cache at scrape time. Labels are bounded: kind, namespace,
// name, tier, phase, condition, action; never pod IPs, node IDs or keys. Specs lists them
// all; docs/metrics.md is generated from it (go run ./hack/metricsdoc).
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Spec describes one metric: its full name, type, help and labels.
type Spec struct {
	Name, Type, Help string
	Labels           []string
}

const prefix = "middleware_operator_"

var cluster = []string{"namespace", "name"}

// specs is every metric of the operator, in the order docs/metrics.md lists them.
var specs []Spec

func gauge(name, help string, labels ...string) *prometheus.GaugeVec {
	specs = append(specs, Spec{prefix + name, "gauge", help, labels})
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: prefix + name, Help: help}, labels)
}

func histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	specs = append(specs, Spec{prefix + name, "histogram", help, labels})
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: prefix + name, Help: help, Buckets: buckets}, labels)
}

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	specs = append(specs, Spec{prefix + name, "counter", help, labels})
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: prefix + name, Help: help}, labels)
}

// The RedisCluster metrics, one series per cluster (and per action or kind for counters).
var (
	RedisStateOK = gauge("rediscluster_state_ok",
		"1 when every answering node of the cluster reports cluster_state ok, else 0.", cluster...)
	RedisSlotsAssigned = gauge("rediscluster_slots_assigned",
		"Slots some node routes to some master.", cluster...)
	RedisSlotsOK = gauge("rediscluster_slots_ok",
		"Slots a client reaches through any node: every node routes the slot to the master that serves it.", cluster...)
	RedisSlotsPFail = gauge("rediscluster_slots_pfail",
		"Slots whose master some node suspects of failing (the highest cluster_slots_pfail of the nodes).", cluster...)
	RedisSlotsFail = gauge("rediscluster_slots_fail",
		"Slots whose master the cluster agrees has failed (the highest cluster_slots_fail of the nodes).", cluster...)
	RedisKnownNodes = gauge("rediscluster_known_nodes",
		"Node IDs in the cluster's tables, failed ones included.", cluster...)
	RedisMasters = gauge("rediscluster_masters",
		"Masters that serve slots.", cluster...)
	RedisReplicas = gauge("rediscluster_replicas",
		"Answering replicas.", cluster...)
	RedisMastersWithoutReplica = gauge("rediscluster_masters_without_replica",
		"Masters serving slots with no answering replica.", cluster...)
	RedisNodesSilent = gauge("rediscluster_nodes_silent",
		"Pods whose Redis node does not answer (Pending, starting, held by the start guard, or down).", cluster...)
	RedisLastCheck = gauge("rediscluster_last_check_timestamp_seconds",
		"When the operator last read every answering node's view (Unix time).", cluster...)
	RedisSlotsMoved = counter("rediscluster_slots_moved_total",
		"Slots the operator moved between masters (scale, rebalance, AssignReceive).", cluster...)
	RedisKeysMoved = counter("rediscluster_keys_moved_total",
		"Keys the operator migrated with those slots.", cluster...)
	RedisRecoveries = counter("rediscluster_recoveries_total",
		"Recoveries the operator ran, by action (the event reason: NodesReintroduced, FailoverForced, GhostForgotten, ...).",
		"namespace", "name", "action")
	RedisFailovers = counter("rediscluster_failovers_total",
		"Failovers the operator started, by kind: coordinated (upgrade), forced, takeover.", "namespace", "name", "kind")
	RedisMigrationSlotsLeft = gauge("rediscluster_migration_slots_left",
		"Slots the operation under way (scale, rebalance, AssignReceive) still has to move; 0 when none is under way.", cluster...)
	RedisFullestMasterMemory = gauge("rediscluster_fullest_master_memory_ratio",
		"Used memory of the fullest master as a share of its maxmemory (0 to 1; 0 without maxmemory).", cluster...)
	// RedisStatusConflicts counts RedisCluster status writes refused because the status was
	// computed from a stale object (the reconcile looks again instead of failing).
	RedisStatusConflicts = counter("rediscluster_status_conflicts_total",
		"RedisCluster status writes refused on a conflict (computed from a stale object; the operator looks again).")
	// RedisLooks counts the RedisCluster reconciles by how they read Redis: full (every
	// node's CLUSTER NODES, CLUSTER INFO and INFO, the planner and the status) or quiet
	// (every node's CLUSTER INFO only, found unchanged since a full look of a converged
	// cluster, so nothing else ran).
	RedisLooks = counter("rediscluster_looks_total",
		"RedisCluster looks by kind: full (a reconcile that read every node whole, planned and derived the status) or quiet (the prober's, or a reconcile's, CLUSTER INFO of a converged cluster found unchanged on every node; nothing else ran). A converged cluster gets a full look at least every minute (10 s with spec.autoscale or spec.archive).",
		"look")
	// StatusWrites counts the status writes of AppServices by what changed, so every write
	// can be accounted for (make bench prints them per wave).
	StatusWrites = counter("status_writes_total",
		"Status writes, by kind and by what changed: first (no status yet), degraded, availability, progress (a rollout under way, paced), settled (a rollout over), generation (a spec change with nothing to roll out), counts (replica counts only).",
		"kind", "change")
	// RedisBackupLastSuccess, RedisBackupLastDuration and RedisBackupLastBytes describe a
	// cluster's newest Completed RedisBackup; RedisBackupFailures counts the attempts that
	// failed.
	RedisBackupLastSuccess = gauge("rediscluster_backup_last_success_timestamp_seconds",
		"When the cluster's newest successful backup completed (Unix time).", cluster...)
	RedisBackupLastDuration = gauge("rediscluster_backup_last_duration_seconds",
		"How long the cluster's newest successful backup took, from the first shard's copy to the manifest.", cluster...)
	RedisBackupLastBytes = gauge("rediscluster_backup_last_bytes",
		"The size of the cluster's newest successful backup (the shards' RDB files).", cluster...)
	RedisBackupFailures = counter("rediscluster_backup_failures_total",
		"Backup attempts of the cluster that failed (a RedisBackup retries before it is Failed).", cluster...)
	// RedisStepSeconds times the one step each RedisCluster reconcile takes, by kind: no
	// step should hold a worker more than a few seconds.
	RedisStepSeconds = histogram("rediscluster_step_seconds",
		"How long the one step of a RedisCluster reconcile took, by kind (Form, Join, Rebalance, Recover, AddPassword, ...).",
		[]float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 4, 5, 7.5, 10, 30}, "kind")
)

// The memory metrics of a RedisCluster, one series per cluster, read from the INFO the
// snapshot already sends and from the pods (each node's figures are in the status, and the
// exporter sidecar serves them per pod).
var (
	RedisMemoryUsed = gauge("rediscluster_memory_used_bytes",
		"used_memory of the masters serving slots, added up.", cluster...)
	RedisMaxMemory = gauge("rediscluster_maxmemory_bytes",
		"maxmemory of the masters serving slots, added up (0: none has maxmemory).", cluster...)
	RedisFragmentation = gauge("rediscluster_memory_fragmentation_ratio_max",
		"The highest mem_fragmentation_ratio (RSS over used_memory) of the answering nodes.", cluster...)
	RedisEvictedKeys = counter("rediscluster_evicted_keys_total",
		"Keys the nodes evicted for maxmemory (the increases of each node's evicted_keys of INFO stats).", cluster...)
	RedisRejectedWrites = counter("rediscluster_rejected_writes_total",
		"Commands the nodes refused with an OOM error, maxmemory reached under noeviction (the increases of each node's errorstat_OOM).", cluster...)
	RedisContainerRestarts = counter("rediscluster_redis_restarts_total",
		"Restarts of the cluster's redis containers (the increases of their restartCount).", cluster...)
	RedisOOMKills = counter("rediscluster_oom_kills_total",
		"Restarts of the cluster's redis containers after the kernel killed them at their memory limit (lastState OOMKilled).", cluster...)
)

// The continuous archive of a RedisCluster (spec.archive), set at each reconcile from what
// its shards' followers report.
var (
	RedisArchiveShards = gauge("rediscluster_archive_shards",
		"Shards the cluster's continuous archive (spec.archive) follows.", cluster...)
	RedisArchiveShardsFollowing = gauge("rediscluster_archive_shards_following",
		"Shards whose follower is archiving now; fewer than rediscluster_archive_shards while one takes its base, reconnects or fails, and 0 while the cluster is paused.", cluster...)
	RedisArchiveLastWrite = gauge("rediscluster_archive_last_write_timestamp_seconds",
		"When the newest write in the shard's archive was received (Unix time): what a restore to latest reaches for that shard. A shard without writes keeps its last.",
		"namespace", "name", "shard")
	RedisArchiveGaps = counter("rediscluster_archive_gaps_total",
		"Times a shard's history could not be continued (event ArchiveGap) and a new timeline started from a new base: a restore cannot cross the gap.", cluster...)
	RedisArchiveLagBytes = gauge("rediscluster_archive_lag_bytes",
		"Bytes of the replication stream of the node a shard's archive follows that the store does not hold yet, at the operator's last look (its replication offset less the archived offset).",
		"namespace", "name", "shard")
	RedisArchiveLagSeconds = gauge("rediscluster_archive_lag_seconds",
		"How long the shard's archive has not held everything the node it follows had written (0 while it is within a few hundred bytes: PINGs not yet in a closed segment), at the operator's looks, about every 10 s.",
		"namespace", "name", "shard")
	RedisArchiveBytes = counter("rediscluster_archive_bytes_total",
		"Bytes of replication stream the archive stored, every shard and timeline together.", cluster...)
)

// archiveVecs are the series of spec.archive, dropped when it is removed.
var archiveVecs = []clusterVec{RedisArchiveShards, RedisArchiveShardsFollowing, RedisArchiveLastWrite, RedisArchiveGaps,
	RedisArchiveLagBytes, RedisArchiveLagSeconds, RedisArchiveBytes}

// ForgetRedisArchive drops the archive series of a cluster whose spec.archive was removed.
func ForgetRedisArchive(namespace, name string) {
	for _, v := range archiveVecs {
		v.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	}
}

// clusterVec is a metric vector with series per cluster.
type clusterVec interface {
	prometheus.Collector
	DeletePartialMatch(prometheus.Labels) int
}

// redisVecs are the per-cluster series, deleted with the cluster.
var redisVecs = []clusterVec{
	RedisStateOK, RedisSlotsAssigned, RedisSlotsOK, RedisSlotsPFail, RedisSlotsFail, RedisKnownNodes, RedisMasters,
	RedisReplicas, RedisMastersWithoutReplica, RedisNodesSilent, RedisLastCheck, RedisSlotsMoved, RedisKeysMoved,
	RedisRecoveries, RedisFailovers, RedisMigrationSlotsLeft,
	RedisBackupLastSuccess, RedisBackupLastDuration, RedisBackupLastBytes, RedisBackupFailures, RedisFullestMasterMemory,
	RedisMemoryUsed, RedisMaxMemory, RedisFragmentation, RedisEvictedKeys, RedisRejectedWrites,
	RedisContainerRestarts, RedisOOMKills,
	RedisArchiveShards, RedisArchiveShardsFollowing, RedisArchiveLastWrite, RedisArchiveGaps,
	RedisArchiveLagBytes, RedisArchiveLagSeconds, RedisArchiveBytes,
}

// ForgetRedisCluster drops every series of a deleted cluster.
func ForgetRedisCluster(namespace, name string) {
	for _, v := range redisVecs {
		v.DeletePartialMatch(prometheus.Labels{"namespace": namespace, "name": name})
	}
}

// Specs returns every metric the operator exposes, for documentation.
func Specs() []Spec { return specs }

func init() {
	for _, v := range redisVecs {
		ctrlmetrics.Registry.MustRegister(v)
	}
	ctrlmetrics.Registry.MustRegister(operatorCounters...)
}

// AdmissionGuard is what the operator's start-up check found of the admission guard on its
// own token (config/guard; internal/guard.Reporter).
var AdmissionGuard = gauge("admission_guard",
	"1 when the API server refuses this operator's token a service-account-token Secret (the admission guard of config/guard is in place), 0 when it does not, -1 when the check could not tell. Checked at start and every 5 minutes; while not active, again after 5 s, doubling up to 5 minutes.")

// operatorCounters are the series not per RedisCluster.
var operatorCounters = []prometheus.Collector{RedisStatusConflicts, RedisLooks, StatusWrites, RedisStepSeconds, AdmissionGuard}
