package redis

import (
	"context"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// healthInterval is how often a formed cluster's nodes are read again: Redis topology
// changes (a failover, a crashed node) are not Kubernetes events.
const healthInterval = 30 * time.Second

// RedisClusterReconciler runs Redis clusters.
type RedisClusterReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// NewAdmin opens a Redis admin; DefaultAdminFactory when nil.
	NewAdmin AdminFactory
}

// state is what one reconcile learns and decides, passed from step to step.
type state struct {
	rc       *redisv1alpha1.RedisCluster // as read, never modified
	next     *redisv1alpha1.RedisCluster // the status being built
	password string
	sts      *appsv1.StatefulSet
	pods     []corev1.Pod // the cluster's pods, by ordinal
	members  []member     // each pod's Redis node, read by readTopology
	admin    Admin
	err      error // the first step error, reported in Degraded
	// opPhase and opReason name the lifecycle operation under way (Scaling, Upgrading).
	opPhase  redisv1alpha1.Phase
	opReason string
}

// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=services;configmaps;secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch;delete;deletecollection
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile runs the pipeline: finalizer, then (unless paused) password, configuration,
// Services, disruption budget and StatefulSet; once every pod runs, the Redis steps: form
// the cluster, heal moved nodes, fix open slots, add new nodes, give new masters slots,
// remove leaving nodes, replace outdated pods. Each topology step ends the reconcile when it
// changed something, so the next one starts from a fresh view. The status comes last,
// from what Redis reports.
func (r *RedisClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rc := &redisv1alpha1.RedisCluster{}
	if err := r.Get(ctx, req.NamespacedName, rc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !rc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, rc)
	}
	if done, err := r.ensureFinalizer(ctx, rc); done || err != nil {
		return ctrl.Result{}, err
	}
	s := &state{rc: rc, next: rc.DeepCopy()}
	defer func() {
		if s.admin != nil {
			_ = s.admin.Close()
		}
	}()
	result := r.run(ctx, s,
		r.readPassword,
		r.pauseGate,
		r.ensurePassword,
		r.ensureConfigMap,
		r.ensureServices,
		r.ensurePodDisruptionBudget,
		r.ensureStatefulSet,
		r.waitForPods,
		r.readTopology,
		r.formCluster,
		r.heal,
		r.fixOpenSlots,
		r.joinNewNodes,
		r.distributeSlots,
		r.removeLeavingNodes,
		r.upgradePods,
	)
	r.observe(ctx, s)
	if _, err := status.Patch(ctx, r.Client, s.rc, s.next, redisClusterStatus); err != nil {
		return ctrl.Result{}, err
	}
	if s.err != nil {
		return ctrl.Result{}, s.err
	}
	if result.RequeueAfter == 0 {
		result.RequeueAfter = healthInterval
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

func redisClusterStatus(obj client.Object) any { return obj.(*redisv1alpha1.RedisCluster).Status } //nolint:forcetypeassert // only RedisClusters

// SetupWithManager watches RedisClusters, the objects they own, and their pods.
func (r *RedisClusterReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.NewAdmin == nil {
		r.NewAdmin = DefaultAdminFactory
	}
	podToCluster := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		labels := obj.GetLabels()
		if labels[resources.LabelName] != resources.RedisClusterKind || labels[resources.LabelInstance] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: labels[resources.LabelInstance]}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&redisv1alpha1.RedisCluster{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&corev1.Pod{}, podToCluster).
		WithOptions(opts).
		Named("rediscluster").
		Complete(r)
}
