package redis

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/archiver"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/caching"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/quietlook"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/credentials"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodetls"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/restore"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// RedisClusterReconciler runs Redis clusters.
type RedisClusterReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// NewAdmin opens a Redis admin; clusterconn.DefaultAdminFactory when nil.
	NewAdmin clusterconn.AdminFactory
	// APIReader reads the Secrets and ConfigMaps a user names (the manager's when nil).
	APIReader client.Reader
	// References is the metadata cache through which those are watched (caching.NewReferences
	// over all namespaces when nil).
	References cache.Cache
	// PasswordGrace is how long both passwords work during a rotation (credentials.DefaultGrace
	// when 0).
	PasswordGrace time.Duration
	// Fence, when set, is checked before every command that changes a cluster (and every
	// batch of slot moves); an error means this replica must not act, and the reconcile
	// ends without writing the status (operator.LeaseFence with leader election).
	Fence func(context.Context) error
	// ArchiveFence, when set, is checked before every write the archive makes to the object
	// store (a segment, a base, a deletion): the same question as Fence, asked as often as
	// segments close, so it reads the Lease only when the hold it last saw is about to end
	// (operator.LeaseFence.Cached).
	ArchiveFence func(context.Context) error
	// OperatorNamespace is the namespace the operator runs in: its pods may reach the Redis
	// client port through the NetworkPolicy (none when empty, as outside a cluster).
	OperatorNamespace string
	// NetworkPolicyAccess tells whether the operator may manage NetworkPolicies
	// (NewNetworkPolicyAccess through Client when nil).
	NetworkPolicyAccess AccessChecker
	// NetworkPolicyCacheAccess tells whether the operator may list and watch them, and so
	// read them from its cache (NewNetworkPolicyCacheAccess through Client when nil).
	NetworkPolicyCacheAccess AccessChecker
	accessOnce               sync.Once
	// WatchNamespaces are the namespaces the manager's cache lists; empty means every one.
	WatchNamespaces []string
	// StorePolicy says which object store endpoints restores and reloads may read from (any
	// https:// one when zero).
	StorePolicy objectstore.EndpointPolicy
	// ClusterIssuers are the cert-manager ClusterIssuers spec.tls.issuerRef may name
	// (nodetls.ClusterIssuerAllowed); none when empty.
	ClusterIssuers []string
	// RestoreMaxRecord is the largest RDB record (a key with its value) a restore or reload
	// loads, in bytes (rdbload.DefaultMaxRecord when 0).
	RestoreMaxRecord int64
	// stale keeps reconciles off cached objects older than the operator's last status write.
	stale status.StaleGuard
	// admins keeps each cluster's Redis connections from one reconcile to the next.
	admins clusterconn.Pool
	// quietMarks keeps what the last full look of each converged cluster left for the quiet
	// looks after it, beside the pooled Admin that read it (rediscluster_quiet.go).
	quietMarks quietlook.Marks
	// certsSeen remembers which node processes serve the current certificate, coverageSet
	// which run with the cluster-require-full-coverage of the generated redis.conf.
	certsSeen, coverageSet nodeValues
	// announced remembers which node processes were set to announce (StepAnnounce), by
	// cluster-preferred-endpoint-type.
	announced nodeValues
	// formed remembers which node processes each cluster was formed from, for their settling.
	formed formedClusters
	// userObjects reads the Secrets and ConfigMaps a user names once per version
	// (caching.Versioned over References and APIReader).
	userObjectsOnce sync.Once
	userObjects     *caching.Versioned
	// changes says which clusters' children may be out of date (see childChanges).
	changes childChanges
	// podsIndexed: SetupWithManager registered podClusterIndex in the manager's cache.
	podsIndexed bool
	// loads runs the shard loads of restores and reloads off the workers (backgroundLoads).
	loadsOnce sync.Once
	loads     *restore.Loads
	// aclVerdicts remembers what a node said of each cluster's new ACL rules (checkACLRules).
	aclVerdicts aclVerdicts
	// deletedPods remembers the pods replaced until the cache shows their deletion.
	deletedPods deletedPods
	// storeFailures remembers the failing reads of restores and reloads, for their back-off
	// and so that each failure is reported once.
	storeFailures backupstore.Failures
	// sources keeps the backups of restores and reloads as read (readSource).
	sources restore.Sources
	// archives runs the followers of the clusters with spec.archive (syncArchive).
	archives archiver.Registry
	// creds keeps the clusters' password Secrets and rotations (credKeeper).
	credsOnce sync.Once
	creds     *credentials.Keeper
	// certs keeps the clusters' TLS Secrets, CAs and Certificates (certKeeper).
	certsOnce sync.Once
	certs     *nodetls.Keeper
	// nodeCounts keeps the nodes' eviction, refused-write and restart counts from one look
	// to the next (report.RecordMetrics).
	nodeCounts report.NodeCounts
}

// forgetCluster drops everything the reconciler keeps of a cluster that is gone or going:
// its metric series, connections, what it saw of its nodes, its loads and verdicts.
func (r *RedisClusterReconciler) forgetCluster(key types.NamespacedName) {
	metrics.ForgetRedisCluster(key.Namespace, key.Name)
	r.admins.Forget(key)
	r.quietMarks.Forget(key)
	r.certsSeen.forget(key)
	r.certKeeper().Forget(key)
	r.coverageSet.forget(key)
	r.announced.forget(key)
	r.formed.forget(key)
	r.changes.forget(key)
	r.backgroundLoads().Forget(key)
	r.aclVerdicts.forget(key)
	r.storeFailures.Forget(key)
	r.sources.Forget(key)
	r.archives.Stop(key)
	r.nodeCounts.Forget(key)
	r.stale.Forget(key)
}

// certKeeper is the reconciler's nodetls.Keeper, made on first use from its fields.
func (r *RedisClusterReconciler) certKeeper() *nodetls.Keeper {
	r.certsOnce.Do(func() {
		api := client.Reader(r.Client) // Certificates are read past the cache
		if r.APIReader != nil {
			api = r.APIReader
		}
		r.certs = &nodetls.Keeper{Client: r.Client, Scheme: r.Scheme, Recorder: r.Recorder, APIReader: api,
			UserObject: r.userObject, ClusterIssuers: r.ClusterIssuers}
	})
	return r.certs
}

// credKeeper is the reconciler's credentials.Keeper, made on first use from its fields.
func (r *RedisClusterReconciler) credKeeper() *credentials.Keeper {
	r.credsOnce.Do(func() {
		r.creds = &credentials.Keeper{Client: r.Client, Scheme: r.Scheme, Recorder: r.Recorder, UserObject: r.userObject, Grace: r.PasswordGrace}
	})
	return r.creds
}

// backgroundLoads is the reconciler's restore.Loads, made on first use (a reconciler built
// without SetupWithManager, as in unit tests, has one too; its ends then wake nobody).
func (r *RedisClusterReconciler) backgroundLoads() *restore.Loads {
	r.loadsOnce.Do(func() { r.loads = restore.NewLoads() })
	return r.loads
}

// state is what one reconcile observes, the step it plans and what acting on it leaves
// for the status. Each field is written by one stage: observe fills the first group, plan
// sets step, act and observe's child writes set err.
type state struct {
	rc   *redisv1alpha1.RedisCluster // as read, never modified
	next *redisv1alpha1.RedisCluster // the status being built
	// silent are the nodes (by address) a quiet look just before found answering nothing
	// (its read timed out): the snapshot does not wait on them again.
	silent map[string]error
	// external are the hosts of the pods' external Services (spec.externalAccess).
	external externalHosts
	// creds is what this reconcile read of the passwords (credentials.Facts).
	creds credentials.Facts
	// certs is what this reconcile read and made of the nodes' certificate and its CA.
	certs nodetls.Facts
	sts   *appsv1.StatefulSet
	// volumes are the pods' claims and the size the spec asks of them (readClaims).
	volumes plan.Volumes
	// volumesRefusedNow: the API server refused a claim's growth in this reconcile
	// (growClaims), so the VolumeSize condition's time is now.
	volumesRefusedNow bool
	pods              []corev1.Pod // the cluster's pods, by ordinal
	// unsupported says why the spec's Redis version is refused ("" when it is not): no
	// child is created or changed then.
	unsupported string
	// recorded is the member record as read (pod -> node ID); recordExists whether its
	// ConfigMap exists.
	recorded     map[string]string
	recordExists bool
	// snap is the reconcile's one look at the nodes (nil Nodes until taken), health what
	// clients would see of it.
	snap   observe.Snapshot
	health health.Health
	// memory is the memory configuration the nodes should run with, coverage their
	// cluster-require-full-coverage ("" when not known), both from the generated redis.conf
	// (readConf).
	memory   resources.RedisMemory
	coverage string
	// writeSafety is the min-replicas setting the nodes should run with (readConf).
	writeSafety resources.RedisWriteSafety
	// step is the one step planned from the snapshot (zero when observing failed).
	step plan.Step
	// restore is the backup a restoring cluster loads (nil when it restores none, or is done);
	// reload the backup lost slots are reloaded from (nil when none is under way).
	restore, reload *restore.Source
	// loadsPending: a shard load of a restore or reload runs in the background; its end
	// wakes the cluster, so the next look can wait longer.
	loadsPending bool
	// aclRejected is the spec's new ACL rules as a running node refused them (nil: none, or
	// the pods run the spec's rules already): the StatefulSet keeps the rules it has.
	aclRejected *aclRulesInvalidError
	// aclUnchecked: the spec's ACL rules differ from the StatefulSet's and no node was asked
	// about them yet (StepCheckACLRules): the StatefulSet keeps the rules it has meanwhile.
	aclUnchecked bool
	// backupUnderWay names a backup of the cluster pending or running, with spec.autoscale
	// ("" when none): the autoscaler waits for it.
	backupUnderWay string
	// announce is what the nodes are to announce (spec.externalAccess), as the planner and
	// the status take it: nil when nothing is announced.
	announce *plan.Announce
	// reported are the events the status derivation calls for (report.Derive).
	reported []report.Event
	// held are the slots this reconcile's slot move held as too big to move.
	held  []layout.HeldSlot
	admin clusterconn.Admin
	err   error // the first error, reported in Degraded
}

// The RBAC markers make manager-role, which OLM and config/overlays/namespaced bind per
// namespace: namespaced resources only (a grant on a cluster-scoped one goes in
// config/rbac/cluster_role.yaml; tests/bundle checks it), each verb one the code uses.
// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisclusters,verbs=list;watch;patch
// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisclusters/status,verbs=patch
// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=list;watch;create;update
// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;watch;delete;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list;watch;create;update
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;create;update

// Reconcile observes once, plans one step, acts once and writes the status once. Observing
// reads the user's Secrets and the member record, keeps the children as the spec says (the
// StatefulSet never below the nodes still in the cluster), then takes one snapshot of the
// pods and every node. The plan (plan.NextStep) is a pure function of the spec and
// that snapshot; the step it returns is bounded in time, and the next reconcile starts from
// a fresh look. The status is derived from the same snapshot and step.
func (r *RedisClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rc, result, err := r.load(ctx, req)
	if rc == nil {
		return result, err
	}
	after, quiet, silent := r.quietLook(ctx, rc)
	if quiet {
		return ctrl.Result{RequeueAfter: after}, nil
	}
	s := &state{rc: rc, next: rc.DeepCopy(), silent: silent}
	s.err = r.prepare(ctx, s)
	r.takeSnapshot(ctx, s)
	if s.err == nil {
		s.step = plan.NextStep(r.plannerDesired(s), s.snap, s.health)
		s.err = r.act(ctx, s)
	}
	if errors.Is(s.err, ErrFenced) {
		// Another replica leads now: what this one saw is not its to report.
		return ctrl.Result{}, s.err
	}
	in := s.reportInput()
	s.reported = report.Derive(in)
	r.syncArchive(ctx, s)
	report.RecordMetrics(in, &r.nodeCounts)
	retryAfter, backingOff := restore.Backoff(s.err)
	wrote, err := status.Patch(ctx, r.Client, s.rc, s.next, redisClusterStatus)
	if wrote {
		r.stale.Wrote(req.NamespacedName, s.rc.ResourceVersion)
	}
	if err == nil {
		// A status change's events go with the status: after a conflict, the next look
		// derives the same change again and sends them then, once.
		r.emitReported(s)
	}
	switch {
	case apierrors.IsConflict(err):
		// The status was computed from a stale object; the next look recomputes it.
		metrics.RedisStatusConflicts.WithLabelValues().Inc()
		return ctrl.Result{RequeueAfter: plan.LookSoon}, nil
	case err != nil:
		return ctrl.Result{}, err
	case child.IsMissing(s.err):
		// Waiting for the user's object: the condition says which; look again.
		return ctrl.Result{RequeueAfter: plan.LookIdle}, nil
	case backingOff:
		// A load failed on the store or the backup's data: look again after its back-off.
		return ctrl.Result{RequeueAfter: retryAfter}, nil
	case s.err != nil:
		return ctrl.Result{}, s.err
	}
	return ctrl.Result{RequeueAfter: r.noteLook(s)}, nil
}

// load reads the RedisCluster and handles what comes before a reconcile proper: a stale
// cache, deletion, the finalizer. A nil cluster means the reconcile ends with result, err.
func (r *RedisClusterReconciler) load(ctx context.Context, req ctrl.Request) (*redisv1alpha1.RedisCluster, ctrl.Result, error) {
	rc := &redisv1alpha1.RedisCluster{}
	if err := r.Get(ctx, req.NamespacedName, rc); err != nil {
		if apierrors.IsNotFound(err) {
			r.forgetCluster(req.NamespacedName)
		}
		return nil, ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.stale.Stale(req.NamespacedName, rc.ResourceVersion) {
		return nil, ctrl.Result{RequeueAfter: status.StaleRetry}, nil
	}
	if !rc.DeletionTimestamp.IsZero() {
		r.forgetCluster(req.NamespacedName)
		return nil, ctrl.Result{}, r.finalize(ctx, rc)
	}
	if done, err := r.ensureFinalizer(ctx, rc); done || err != nil {
		// A finalizer change passes no event filter: look again from the written object.
		return nil, ctrl.Result{RequeueAfter: plan.LookSoon}, err
	}
	return rc, ctrl.Result{}, nil
}

// prepare reads what the snapshot needs (passwords, TLS, the member record) and, unless the
// cluster is paused, keeps the children. The first error stops it.
func (r *RedisClusterReconciler) prepare(ctx context.Context, s *state) error {
	steps := []func(context.Context, *state) error{r.readPassword, r.readACLUsers, r.readApplied, r.readUsers, r.readTLS, r.readMembers, r.readRestore, r.readReload}
	if !s.rc.Spec.Pause {
		s.unsupported = resources.RedisVersionProblem(s.rc)
	}
	ensuring := !s.rc.Spec.Pause && s.unsupported == "" && r.changes.due(s.rc, time.Now())
	if !s.rc.Spec.Pause {
		// Before the ConfigMap: it carries each node's external host for its next start.
		steps = append(steps, r.readExternalHosts)
	}
	switch {
	case s.unsupported != "":
		r.warnUnsupported(s)
		steps = append(steps, r.readStatefulSetIfAny)
	case ensuring:
		steps = append(steps, r.ensurePassword, r.ensureUsers, r.ensureACLUsers, r.ensureTLS, r.ensureConfigMap, r.ensureServices,
			r.ensurePodDisruptionBudget, r.ensureNetworkPolicy, r.readACLVerdict, r.ensureStatefulSet, r.ensureExternalServices)
	case !s.rc.Spec.Pause:
		steps = append(steps, r.readStatefulSet, r.readACLVerdict)
	}
	if !s.rc.Spec.Pause {
		steps = append(steps, r.readClaims)
	}
	err := runAll(ctx, s, steps)
	if ensuring {
		r.changes.done(s.rc, time.Now(), err != nil)
	}
	return err
}

// runAll runs steps in order, stopping at the first error.
func runAll(ctx context.Context, s *state, steps []func(context.Context, *state) error) error {
	for _, step := range steps {
		if err := step(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// lookAgain is when the next reconcile should look: when the step asks, and no later than
// a node that just started has settled (it turns Ready then, not a look later).
func (s *state) lookAgain() time.Duration {
	after := s.step.After
	if after == 0 || s.loadsPending {
		// With a load pending, its end wakes the cluster (shardLoads).
		after = plan.LookIdle
	}
	if settled := s.health.SettledIn; settled > 0 && settled < after {
		after = settled + 100*time.Millisecond
	}
	return after
}

// userObject reads a Secret or ConfigMap a user names through userObjects, made on first
// use over the references cache when there is one (always under a manager), else straight
// through the API reader; an object read from the API server is labelled
// caching.WatchLabel, so the references cache sees its changes from then on.
func (r *RedisClusterReconciler) userObject(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return r.userObjectCache().Get(ctx, key, obj, opts...)
}

// userObjectCache is the reconciler's caching.Versioned, made on first use.
func (r *RedisClusterReconciler) userObjectCache() *caching.Versioned {
	r.userObjectsOnce.Do(func() {
		var refs client.Reader
		if r.References != nil {
			refs = r.References
		}
		r.userObjects = &caching.Versioned{Refs: refs, API: r.APIReader, Writer: r.Client}
	})
	return r.userObjects
}

// referencing maps a Secret or ConfigMap to the clusters that name it in
// spec.passwordSecret, spec.tls.secretName, spec.acl.users[].passwordSecret or
// spec.pod[0].configmap. Any event of one drops the copy userObject kept of it (a changed
// one is read again anyway; a deleted one's content must not outlive it).
func (r *RedisClusterReconciler) referencing(ctx context.Context, obj *metav1.PartialObjectMetadata) []reconcile.Request {
	r.userObjectCache().Forget(obj.Kind, client.ObjectKeyFromObject(obj))
	list := &redisv1alpha1.RedisClusterList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	isSecret := obj.Kind == "Secret"
	for _, rc := range list.Items {
		named := isSecret && (rc.Spec.PasswordSecret == obj.GetName() || ((resources.RedisTLSUserSecret(&rc) || resources.RedisTLSIssued(&rc)) && resources.RedisTLSSecretName(&rc) == obj.GetName()) ||
			resources.RedisACLNamesSecret(&rc, obj.GetName()))
		if named || (!isSecret && resources.RedisPodSpec(&rc).Configmap == obj.GetName()) {
			key := types.NamespacedName{Namespace: rc.Namespace, Name: rc.Name}
			r.changes.touch(key)
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

func redisClusterStatus(obj client.Object) any { return obj.(*redisv1alpha1.RedisCluster).Status } //nolint:forcetypeassert // only RedisClusters

// SetupWithManager watches RedisClusters, the objects they own, and their pods. It does not
// watch NetworkPolicies (see NetworkPolicyVerbs).
func (r *RedisClusterReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.NewAdmin == nil {
		r.NewAdmin = clusterconn.DefaultAdminFactory
	}
	if r.NetworkPolicyAccess == nil {
		r.NetworkPolicyAccess = NewNetworkPolicyAccess(mgr.GetClient())
	}
	if err := caching.UserObjects(mgr, &r.APIReader, &r.References); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &corev1.Pod{}, podClusterIndex, podCluster); err != nil {
		return fmt.Errorf("while indexing pods by their RedisCluster: %w", err)
	}
	r.podsIndexed = true
	podToCluster := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		cluster := podCluster(obj)
		if len(cluster) == 0 {
			return nil
		}
		key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: cluster[0]}
		r.changes.touch(key)
		return []reconcile.Request{{NamespacedName: key}}
	})
	// The prober makes the quiet looks of converged clusters and wakes those it finds
	// changed (rediscluster_quiet.go); it runs on the leader only, as the controller does.
	changed := make(chan event.GenericEvent, 64)
	wake := func(ctx context.Context, cluster types.NamespacedName) {
		select {
		case changed <- event.GenericEvent{Object: &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.Name}}}:
		case <-ctx.Done():
		}
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { return r.quietMarks.Run(ctx, wake) })); err != nil {
		return fmt.Errorf("while adding the prober of converged clusters: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		// The operator's own status writes need no reconcile: spec, annotation and label
		// changes (and deletion, which bumps the generation) do.
		For(&redisv1alpha1.RedisCluster{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{},
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !e.ObjectNew.GetDeletionTimestamp().IsZero() }}))).
		Owns(&appsv1.StatefulSet{}, builder.WithPredicates(r.changes.ownerChanged())).
		Owns(&corev1.Service{}, builder.WithPredicates(r.changes.ownerChanged())).
		Owns(&corev1.ConfigMap{}, builder.WithPredicates(r.changes.ownerChanged())).
		Owns(&corev1.Secret{}, builder.WithPredicates(r.changes.ownerChanged())).
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(r.changes.ownerChanged())).
		Watches(&corev1.Pod{}, podToCluster).
		// A user's Secret or ConfigMap that appears (or changes) resumes its clusters at once.
		WatchesRawSource(source.Kind(r.References, caching.Metadata("Secret"), handler.TypedEnqueueRequestsFromMapFunc(r.referencing))).
		WatchesRawSource(source.Kind(r.References, caching.Metadata("ConfigMap"), handler.TypedEnqueueRequestsFromMapFunc(r.referencing))).
		// A shard load that ended in the background wakes its cluster.
		WatchesRawSource(source.Channel(r.backgroundLoads().Wake(), &handler.EnqueueRequestForObject{})).
		// So does a change the prober found.
		WatchesRawSource(source.Channel(changed, &handler.EnqueueRequestForObject{})).
		WithOptions(opts).
		Named("rediscluster").
		Complete(r)
}
