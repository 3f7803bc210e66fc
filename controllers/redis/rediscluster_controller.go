package redis

import (
	"context"
	"crypto/tls"
	"errors"
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
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/caching"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	redisadmin "github.com/middleware-operator/middleware-operator/internal/redis"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// healthInterval is how often a formed cluster's nodes are read again: Redis topology
// changes (a failover, a crashed node) are not Kubernetes events.
const healthInterval = 10 * time.Second

// RedisClusterReconciler runs Redis clusters.
type RedisClusterReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// NewAdmin opens a Redis admin; DefaultAdminFactory when nil.
	NewAdmin AdminFactory
	// APIReader reads the Secrets and ConfigMaps a user names (the manager's when nil).
	APIReader client.Reader
	// References is the metadata cache through which those are watched (caching.NewReferences
	// over all namespaces when nil).
	References cache.Cache
	// PasswordGrace is how long both passwords work during a rotation (DefaultPasswordGrace
	// when 0).
	PasswordGrace time.Duration
	// Fence, when set, is checked before every command that changes a cluster (and every
	// batch of slot moves); an error means this replica must not act, and the reconcile
	// ends without writing the status (operator.LeaseFence with leader election).
	Fence func(context.Context) error
	// OperatorNamespace is the namespace the operator runs in: its pods may reach the Redis
	// client port through the NetworkPolicy (none when empty, as outside a cluster).
	OperatorNamespace string
	// NetworkPolicyAccess tells whether the operator may manage NetworkPolicies
	// (NewNetworkPolicyAccess through Client when nil).
	NetworkPolicyAccess AccessChecker
	accessOnce          sync.Once
	// stale keeps reconciles off cached objects older than the operator's last status write.
	stale status.StaleGuard
}

// state is what one reconcile learns and decides, passed from step to step.
type state struct {
	rc       *redisv1alpha1.RedisCluster // as read, never modified
	next     *redisv1alpha1.RedisCluster // the status being built
	password string
	// users holds the users Secret's passwords (with ACL users), by key.
	users map[string]string
	// operatorPasswords are the passwords of resources.RedisOperatorUser (with ACL users)
	// nodes may accept now: the first is the one every node accepts, which the operator
	// authenticates with; a second is the one a rotation of it retires.
	operatorPasswords []string
	// tls is the configuration of TLS connections to the nodes, nil without spec.tls;
	// tlsCert the certificate (DER) of the TLS Secret, which every node should serve.
	tls     *tls.Config
	tlsCert []byte
	// tlsSecret is the TLS Secret as read this reconcile (nil: none), once tlsSecretRead.
	tlsSecret     *corev1.Secret
	tlsSecretRead bool
	sts           *appsv1.StatefulSet
	pods          []corev1.Pod // the cluster's pods, by ordinal
	// recorded is the member record as read (pod -> node ID); recordExists whether its
	// ConfigMap exists.
	recorded     map[string]string
	recordExists bool
	// snap is the reconcile's one look at the nodes, health what clients would see of it,
	// members the pods whose node answered, in ordinal order.
	observed bool
	snap     redisadmin.Snapshot
	health   redisadmin.Health
	members  []member
	admin    Admin
	err      error // the first step error, reported in Degraded
	// opPhase and opReason name the operation under way (Scaling, Upgrading, Healing);
	// waiting says what the operator waits for; lost says why the cluster is lost.
	opPhase  redisv1alpha1.Phase
	opReason string
	waiting  string
	lost     string
	// rotation is rotationCurrent when the nodes run the Secret's password, what a password
	// rotation under way waits for, or "" when the step did not run.
	rotation string
}

// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisclusters,verbs=list;watch;patch
// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisclusters/status,verbs=patch
// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=list;watch;create;update
// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch;create;update
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;watch;delete;deletecollection
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list;watch;create;update
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;create;update;delete
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=selfsubjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile runs the pipeline: finalizer, then (unless paused) password, configuration,
// Services, disruption budget, NetworkPolicy and StatefulSet, and a password rotation when the password
// Secret changed; then it observes once (every pod's node read
// once into a snapshot), records the members, and decides from that snapshot: refuse to
// replace a lost cluster, form a new one, run the next recovery, fix open slots, and (while
// every member answers) join new nodes, move slots, remove leaving nodes, replace outdated
// pods. Each acting step does one bounded thing and ends the reconcile, so the next one
// starts from a fresh look. The status comes last, derived from the same snapshot.
func (r *RedisClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rc := &redisv1alpha1.RedisCluster{}
	if err := r.Get(ctx, req.NamespacedName, rc); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.ForgetRedisCluster(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.stale.Stale(req.NamespacedName, rc.ResourceVersion) {
		return ctrl.Result{RequeueAfter: status.StaleRetry}, nil
	}
	if !rc.DeletionTimestamp.IsZero() {
		metrics.ForgetRedisCluster(req.Namespace, req.Name)
		return ctrl.Result{}, r.finalize(ctx, rc)
	}
	if done, err := r.ensureFinalizer(ctx, rc); done || err != nil {
		// A finalizer change passes no event filter: look again from the written object.
		return ctrl.Result{RequeueAfter: waitInterval}, err
	}
	s := &state{rc: rc, next: rc.DeepCopy()}
	defer func() {
		if s.admin != nil {
			_ = s.admin.Close()
		}
	}()
	result := r.run(ctx, s,
		r.readPassword,
		r.readUsers,
		r.readTLS,
		r.readMembers,
		r.pauseGate,
		r.ensurePassword,
		r.ensureUsers,
		r.ensureTLS,
		r.ensureConfigMap,
		r.ensureServices,
		r.ensurePodDisruptionBudget,
		r.ensureNetworkPolicy,
		r.ensureStatefulSet,
		r.rotatePasswords,
		r.reloadCertificates,
		r.observeNodes,
		r.recordMembers,
		r.guardLostCluster,
		r.guardLostShards,
		r.formCluster,
		r.recover,
		r.fixOpenSlots,
		r.waitForMembers,
		r.joinNewNodes,
		r.balanceSlots,
		r.removeLeavingNodes,
		r.upgradePods,
	)
	if s.err != nil && errors.Is(s.err, ErrFenced) {
		// Another replica leads now: what this one saw is not its to report.
		return ctrl.Result{}, s.err
	}
	r.observe(ctx, s)
	recordMetrics(s)
	wrote, err := status.Patch(ctx, r.Client, s.rc, s.next, redisClusterStatus)
	if wrote {
		r.stale.Wrote(req.NamespacedName, s.rc.ResourceVersion)
	}
	if err != nil {
		if apierrors.IsConflict(err) {
			// The status was computed from a stale object; the next look recomputes it.
			metrics.RedisStatusConflicts.WithLabelValues().Inc()
			return ctrl.Result{RequeueAfter: waitInterval}, nil
		}
		return ctrl.Result{}, err
	}
	if s.err != nil {
		return ctrl.Result{}, s.err
	}
	if result.RequeueAfter == 0 {
		result.RequeueAfter = healthInterval
	}
	if settled := s.health.SettledIn; settled > 0 && settled < result.RequeueAfter {
		// A node that just started turns Ready as soon as it has settled, not a health
		// interval later.
		result.RequeueAfter = settled + 100*time.Millisecond
	}
	return result, nil
}

// step is one stage of the pipeline; a non-nil result or an error stops the pipeline.
type step func(ctx context.Context, s *state) (*ctrl.Result, error)

func (r *RedisClusterReconciler) run(ctx context.Context, s *state, steps ...step) ctrl.Result {
	for _, st := range steps {
		res, err := st(ctx, s)
		if err != nil {
			s.err = err
			return ctrl.Result{}
		}
		if res != nil {
			return *res
		}
	}
	return ctrl.Result{}
}

// referencing maps a Secret or ConfigMap to the clusters that name it in
// spec.passwordSecret, spec.tls.secretName or spec.pod[0].configmap.
func (r *RedisClusterReconciler) referencing(ctx context.Context, obj *metav1.PartialObjectMetadata) []reconcile.Request {
	list := &redisv1alpha1.RedisClusterList{}
	if err := r.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	isSecret := obj.Kind == "Secret"
	for _, rc := range list.Items {
		named := isSecret && (rc.Spec.PasswordSecret == obj.GetName() || (resources.RedisTLSUserSecret(&rc) && rc.Spec.TLS.SecretName == obj.GetName()))
		if named || (!isSecret && resources.RedisPodSpec(&rc).Configmap == obj.GetName()) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: rc.Namespace, Name: rc.Name}})
		}
	}
	return out
}

func redisClusterStatus(obj client.Object) any { return obj.(*redisv1alpha1.RedisCluster).Status } //nolint:forcetypeassert // only RedisClusters

// SetupWithManager watches RedisClusters, the objects they own, and their pods. It does not
// watch NetworkPolicies (see NetworkPolicyVerbs).
func (r *RedisClusterReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.NewAdmin == nil {
		r.NewAdmin = DefaultAdminFactory
	}
	if r.NetworkPolicyAccess == nil {
		r.NetworkPolicyAccess = NewNetworkPolicyAccess(mgr.GetClient())
	}
	if err := caching.UserObjects(mgr, &r.APIReader, &r.References); err != nil {
		return err
	}
	podToCluster := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		labels := obj.GetLabels()
		if labels[resources.LabelName] != resources.RedisClusterKind || labels[resources.LabelInstance] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: labels[resources.LabelInstance]}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		// The operator's own status writes need no reconcile: spec, annotation and label
		// changes (and deletion, which bumps the generation) do.
		For(&redisv1alpha1.RedisCluster{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{},
			predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return !e.ObjectNew.GetDeletionTimestamp().IsZero() }}))).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&corev1.Pod{}, podToCluster).
		// A user's Secret or ConfigMap that appears (or changes) resumes its clusters at once.
		WatchesRawSource(source.Kind(r.References, caching.Metadata("Secret"), handler.TypedEnqueueRequestsFromMapFunc(r.referencing))).
		WatchesRawSource(source.Kind(r.References, caching.Metadata("ConfigMap"), handler.TypedEnqueueRequestsFromMapFunc(r.referencing))).
		WithOptions(opts).
		Named("rediscluster").
		Complete(r)
}
