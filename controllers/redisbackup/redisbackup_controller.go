package redisbackup

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// BackupFinalizer makes the operator delete a RedisBackup's files with it (reclaimPolicy
// Delete).
const BackupFinalizer = "redis.middleware-operator.io/delete-backup-files"

// RedisBackupReconciler takes RedisBackups: one RDB per shard, streamed from an in-sync
// replica to the object store, and a manifest with the slot map.
type RedisBackupReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// APIReader reads the store's Secrets and the cluster to back up (SetupWithManager sets
	// the manager's when nil).
	APIReader client.Reader
	// Clusters holds the RedisCluster reconciler's connections to each cluster (login and
	// TLS included), which a backup uses: a backup waits until it has looked at the cluster
	// (RedisClusterReconciler.Connections).
	Clusters ClusterConnections
	// StorePolicy says which object store endpoints backups may name (any https:// one when
	// zero).
	StorePolicy objectstore.EndpointPolicy
	// storeFailures counts each backup's failed looks at its store, for their back-off.
	storeFailures backupstore.Failures
	// newest is the completion time of each cluster's newest Completed backup seen, whose
	// figures the backup series show.
	newestMu sync.Mutex
	newest   map[types.NamespacedName]time.Time
}

// ClusterConnections is what a backup needs of the RedisCluster controller: the connection
// it keeps to a cluster, once it has looked at it.
type ClusterConnections interface {
	Lookup(cluster types.NamespacedName) (clusterconn.Conn, bool)
}

// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisbackups,verbs=list;watch;patch
// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisbackups/status,verbs=patch
// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisclusters,verbs=get

// Reconcile moves a backup on by one decision: wait (with the reason), copy every shard, or
// nothing once it is Completed or Failed. A copy under way when the operator stops is
// started again (its status says Running); the objects it overwrites were never recorded.
func (r *RedisBackupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &redisv1alpha1.RedisBackup{}
	if err := r.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		r.storeFailures.Forget(req.NamespacedName)
		return ctrl.Result{}, r.finalize(ctx, b)
	}
	if done, err := r.ensureFinalizer(ctx, b); done || err != nil {
		return ctrl.Result{RequeueAfter: time.Second}, err
	}
	started := time.Now()
	look, run := r.look(ctx, b)
	d := planBackup(look)
	log.FromContext(ctx).V(1).Info("backup decision", "phase", d.phase, "reason", d.reason, "message", d.message, "copy", d.copy,
		"looked", time.Since(started).Round(time.Millisecond).String())
	if d.terminal {
		r.storeFailures.Forget(req.NamespacedName)
	}
	if d.terminal && d.phase == b.Status.Phase {
		// After an operator restart every backup is reconciled once: the Completed ones
		// rebuild the newest-backup series, so RedisClusterBackupTooOld keeps its input.
		if b.Status.Phase == redisv1alpha1.BackupCompleted {
			r.recordBackupMetrics(b, &b.Status)
		}
		return ctrl.Result{}, nil
	}
	next := b.DeepCopy()
	if d.copy {
		return r.copyAndRecord(ctx, b, next, run, time.Since(started))
	}
	r.setPhase(b, next, d.phase, d.reason, d.message)
	if d.phase == redisv1alpha1.BackupFailed {
		metrics.RedisBackupFailures.WithLabelValues(b.Namespace, b.Spec.Cluster).Inc()
	}
	if _, err := status.Patch(ctx, r.Client, b, next, redisBackupStatus); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: d.after}, nil
}

// backupRun is what a copy needs beyond the backup: the cluster, its connection and
// snapshot, the store.
type backupRun struct {
	rc     *redisv1alpha1.RedisCluster
	conn   clusterconn.Conn
	store  *objectstore.Client
	slots  health.SlotMap
	source []health.ShardSource
}

// look reads the cluster, checks the store with one request and takes a snapshot of the
// nodes, stopping at the first thing missing.
func (r *RedisBackupReconciler) look(ctx context.Context, b *redisv1alpha1.RedisBackup) (backupLook, backupRun) {
	l := backupLook{phase: b.Status.Phase, attempts: b.Status.Attempts, waiting: time.Since(b.CreationTimestamp.Time)}
	var run backupRun
	if l.phase == redisv1alpha1.BackupCompleted || l.phase == redisv1alpha1.BackupFailed {
		return l, run
	}
	if err := backupstore.CheckEndpoint(r.StorePolicy, "spec.destination.endpoint", b.Spec.Destination.Endpoint); err != nil {
		l.endpointRefused = err.Error()
		return l, run
	}
	// The cluster as the API server has it, not as the cache may still show it: a pause
	// written just before the backup was created must hold (a look per backup attempt).
	rc := &redisv1alpha1.RedisCluster{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.Cluster}, rc); err != nil {
		l.clusterReason, l.clusterProblem = ReasonClusterNotFound, fmt.Sprintf("while reading RedisCluster %s: %v", b.Spec.Cluster, err)
		if apierrors.IsNotFound(err) {
			l.clusterProblem = fmt.Sprintf("RedisCluster %s does not exist in namespace %s: check spec.cluster", b.Spec.Cluster, b.Namespace)
		}
		return l, run
	}
	run.rc = rc
	if rc.Spec.Pause {
		l.clusterReason, l.clusterProblem = ReasonClusterPaused, fmt.Sprintf("RedisCluster %s is paused (spec.pause): the operator takes no backup "+
			"of a cluster it does not look after; set spec.pause to false", rc.Name)
		return l, run
	}
	store, err := r.stores().Open(ctx, "spec.destination.endpoint", b.Namespace, b.Spec.Destination, backupstore.Folder(b))
	if err == nil {
		err = store.Check(ctx)
	}
	failing := backupstore.FailureKey{Object: client.ObjectKeyFromObject(b), What: "store"}
	if err != nil {
		log.FromContext(ctx).Info("the backup's object store cannot be used", "error", objectstore.Detail(err))
		l.storeProblem = err.Error()
		r.storeFailures.Fail(failing, l.storeProblem, time.Now())
		l.storeFailures = r.storeFailures.Count(failing)
		return l, run
	}
	r.storeFailures.Succeeded(failing)
	run.store = store
	conn, ok := r.Clusters.Lookup(client.ObjectKeyFromObject(rc))
	if !ok {
		l.unstable = "the operator has not connected to the cluster yet"
		return l, run
	}
	run.conn = conn
	run.slots, run.source, err = r.sources(ctx, rc, conn)
	if err != nil {
		l.unstable = err.Error()
	}
	return l, run
}

// sources takes a snapshot of the cluster's nodes and picks the node of each shard to copy.
func (r *RedisBackupReconciler) sources(ctx context.Context, rc *redisv1alpha1.RedisCluster, conn clusterconn.Conn) (health.SlotMap, []health.ShardSource, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(rc.Namespace), client.UnsafeDisableDeepCopy,
		client.MatchingLabels(objectlabels.SelectorLabels(objectlabels.RedisClusterKind, rc.Name))); err != nil {
		return nil, nil, fmt.Errorf("while listing the pods of %s: %w", rc.Name, err)
	}
	sorted := pods.Items
	clusterconn.SortByOrdinal(sorted)
	snap := observe.Snapshot{Nodes: clusterconn.PodObservations(rc, sorted, nil), Masters: resources.RedisMasters(rc),
		ReplicasPerMaster: resources.RedisReplicasPerMaster(rc), NodeTimeout: clusterconn.NodeTimeout, Now: time.Now()}
	conn.Admin.Observe(ctx, snap.Nodes)
	slots, err := health.StableSlotMap(snap, health.Assess(snap))
	if err != nil {
		return nil, nil, err
	}
	return slots, health.BackupSources(snap, slots), nil
}

// copyAndRecord records the attempt (phase Running), copies every shard and the manifest,
// and records the outcome.
func (r *RedisBackupReconciler) copyAndRecord(ctx context.Context, b, next *redisv1alpha1.RedisBackup, run backupRun, looked time.Duration) (ctrl.Result, error) {
	begun := time.Now()
	next.Status.Attempts++
	now := metav1.Now()
	next.Status.StartedAt = &now
	next.Status.Location = backupstore.Location(b.Spec.Destination, backupstore.Folder(b))
	r.setPhase(b, next, redisv1alpha1.BackupRunning, ReasonBackupStarted,
		fmt.Sprintf("attempt %d: copying %d shards to %s", next.Status.Attempts, len(run.source), next.Status.Location))
	if _, err := status.Patch(ctx, r.Client, b, next, redisBackupStatus); err != nil {
		return ctrl.Result{}, err
	}
	running := next.DeepCopy()
	done, err := r.copy(ctx, run)
	if err != nil {
		metrics.RedisBackupFailures.WithLabelValues(b.Namespace, b.Spec.Cluster).Inc()
		log.FromContext(ctx).Info("backup attempt failed", "attempt", next.Status.Attempts, "error", objectstore.Detail(err))
		phase, after := redisv1alpha1.BackupPending, backupstore.Backoff(int(next.Status.Attempts)+1)
		message := fmt.Sprintf("attempt %d of %d failed: %v", next.Status.Attempts, backupAttempts, err)
		if next.Status.Attempts >= backupAttempts {
			phase, after = redisv1alpha1.BackupFailed, 0
		}
		r.setPhase(running, next, phase, ReasonBackupFailed, message)
		_, perr := status.Patch(ctx, r.Client, running, next, redisBackupStatus)
		return ctrl.Result{RequeueAfter: after}, perr
	}
	done.apply(&next.Status)
	r.setPhase(running, next, redisv1alpha1.BackupCompleted, ReasonBackupCompleted,
		fmt.Sprintf("%d keys in %d shards, %d bytes, in %s", next.Status.Keys, len(next.Status.Shards), next.Status.Bytes,
			next.Status.CompletedAt.Sub(next.Status.StartedAt.Time).Round(time.Millisecond)))
	r.recordBackupMetrics(b, &next.Status)
	_, err = status.Patch(ctx, r.Client, running, next, redisBackupStatus)
	log.FromContext(ctx).Info("backup completed", "keys", next.Status.Keys, "bytes", next.Status.Bytes,
		"look", looked.Round(time.Millisecond).String(), "total", (looked + time.Since(begun)).Round(time.Millisecond).String(),
		"shards", done.shards.Round(time.Millisecond).String(), "check", done.check.Round(time.Millisecond).String())
	return ctrl.Result{}, err
}

// setPhase sets the phase, the reason and the Completed condition, with an event when the
// phase or the reason changes (a Warning for a failure or a store that cannot be used).
func (r *RedisBackupReconciler) setPhase(b, next *redisv1alpha1.RedisBackup, phase redisv1alpha1.BackupPhase, reason, message string) {
	changed := b.Status.Phase != phase || b.Status.Reason != message
	next.Status.Phase, next.Status.Reason, next.Status.ObservedGeneration = phase, message, b.Generation
	cond := metav1.ConditionFalse
	if phase == redisv1alpha1.BackupCompleted {
		cond = metav1.ConditionTrue
	}
	status.Set(&next.Status.Conditions, b.Generation, ConditionBackupCompleted, cond, reason, message)
	if !changed {
		return
	}
	kind := corev1.EventTypeNormal
	if phase == redisv1alpha1.BackupFailed || reason == ReasonBackupFailed || reason == ReasonStoreUnavailable || reason == backupstore.ReasonEndpointRefused {
		kind = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(b, nil, kind, reason, "Backup", "%s", message)
}

// recordBackupMetrics sets the cluster's newest successful backup series from st, unless
// a newer Completed backup of the cluster was recorded.
func (r *RedisBackupReconciler) recordBackupMetrics(b *redisv1alpha1.RedisBackup, st *redisv1alpha1.RedisBackupStatus) {
	if st.CompletedAt == nil || st.StartedAt == nil {
		return
	}
	cluster := types.NamespacedName{Namespace: b.Namespace, Name: b.Spec.Cluster}
	r.newestMu.Lock()
	defer r.newestMu.Unlock()
	if r.newest[cluster].After(st.CompletedAt.Time) {
		return
	}
	if r.newest == nil {
		r.newest = map[types.NamespacedName]time.Time{}
	}
	r.newest[cluster] = st.CompletedAt.Time
	labels := []string{b.Namespace, b.Spec.Cluster}
	metrics.RedisBackupLastSuccess.WithLabelValues(labels...).Set(float64(st.CompletedAt.Unix()))
	metrics.RedisBackupLastDuration.WithLabelValues(labels...).Set(st.CompletedAt.Sub(st.StartedAt.Time).Seconds())
	metrics.RedisBackupLastBytes.WithLabelValues(labels...).Set(float64(st.Bytes))
}

// ensureFinalizer adds BackupFinalizer when the backup's files go with it, and removes it
// otherwise. done means it wrote.
func (r *RedisBackupReconciler) ensureFinalizer(ctx context.Context, b *redisv1alpha1.RedisBackup) (bool, error) {
	want := b.Spec.ReclaimPolicy == redisv1alpha1.ReclaimDelete
	if want == controllerutil.ContainsFinalizer(b, BackupFinalizer) {
		return false, nil
	}
	patched := b.DeepCopy()
	if want {
		controllerutil.AddFinalizer(patched, BackupFinalizer)
	} else {
		controllerutil.RemoveFinalizer(patched, BackupFinalizer)
	}
	return true, r.Patch(ctx, patched, client.MergeFrom(b))
}

// finalize deletes the backup's files when BackupFinalizer is there, then removes it. A
// store that cannot be reached keeps the RedisBackup (and says so in an event) until it can.
func (r *RedisBackupReconciler) finalize(ctx context.Context, b *redisv1alpha1.RedisBackup) error {
	if !controllerutil.ContainsFinalizer(b, BackupFinalizer) {
		return nil
	}
	if err := r.deleteFiles(ctx, b); err != nil {
		reason := ReasonStoreUnavailable
		if errors.Is(err, backupstore.ErrEndpointRefused) {
			reason = backupstore.ReasonEndpointRefused
			// No try can succeed until the spec or the flags change: no retry, one event.
			err = reconcile.TerminalError(err)
		}
		r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, reason, "Delete",
			"cannot delete the backup's files (reclaimPolicy Delete): %v; to keep them and delete the RedisBackup anyway, remove the finalizer %s", err, BackupFinalizer)
		return err
	}
	patched := b.DeepCopy()
	controllerutil.RemoveFinalizer(patched, BackupFinalizer)
	return client.IgnoreNotFound(r.Patch(ctx, patched, client.MergeFrom(b)))
}

// deleteFiles deletes every object of the backup's folder.
func (r *RedisBackupReconciler) deleteFiles(ctx context.Context, b *redisv1alpha1.RedisBackup) error {
	store, err := r.stores().Open(ctx, "spec.destination.endpoint", b.Namespace, b.Spec.Destination, backupstore.Folder(b))
	if err != nil {
		return err
	}
	objs, err := store.List(ctx, "")
	if err != nil {
		return err
	}
	var errs []error
	for _, o := range objs {
		errs = append(errs, store.Delete(ctx, o.Name))
	}
	return errors.Join(errs...)
}

// stores opens the backups' object stores.
func (r *RedisBackupReconciler) stores() backupstore.Opener {
	return backupstore.Opener{Reader: r.APIReader, Policy: r.StorePolicy}
}

func redisBackupStatus(obj client.Object) any { return obj.(*redisv1alpha1.RedisBackup).Status } //nolint:forcetypeassert // only RedisBackups

// SetupWithManager watches RedisBackups (their spec and deletion, not their status).
func (r *RedisBackupReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&redisv1alpha1.RedisBackup{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !e.ObjectNew.GetDeletionTimestamp().IsZero() }}))).
		WithOptions(opts).
		Named("redisbackup").
		Complete(r)
}
