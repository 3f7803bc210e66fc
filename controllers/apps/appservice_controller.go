package apps

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/metrics"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// AppServiceReconciler keeps an AppService's Deployment and Service in the state its spec
// describes and mirrors the Deployment's progress into the AppService's status.
type AppServiceReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// StatusPace holds back the first status of a new AppService while its first rollout
	// is under way (see status.Pacer); SetupWithManager sets one of StatusInterval when nil;
	// nil writes that first status at once. Later rollouts are not paced but held: see
	// statusWait.
	StatusPace *status.Pacer
	// APIReader reads the AppService's pods, which the cache does not hold, when a rollout
	// stands still (see PodCheckAfter); SetupWithManager sets the manager's when nil.
	APIReader client.Reader
	// PodCheckAfter, when above 0, replaces PodCheckAfter (tests shorten it).
	PodCheckAfter time.Duration
	// podChecks bounds the pod LISTs (PodChecksPerSecond); SetupWithManager sets one when nil.
	podChecks *podCheckTurns
	// echoes tells the Deployment watch which update is the echo of this reconciler's own.
	echoes child.Echoes
	// stale keeps reconciles off cached AppServices older than the operator's last status
	// write: one would write again the status it has just written.
	stale status.StaleGuard
}

// StatusInterval is how long a new AppService's first rollout goes before its first status
// is written; a rollout that completes within it writes only its completion: measured with
// tests/bench, each step the Deployment reported was a write of its own, and those writes
// competed with the next Deployments' updates on the API server.
const StatusInterval = 5 * time.Second

// The RBAC markers make manager-role, which OLM and config/overlays/namespaced bind per
// namespace: namespaced resources only (a grant on a cluster-scoped one goes in
// config/rbac/cluster_role.yaml; tests/bundle checks it), each verb one the code uses.
// +kubebuilder:rbac:groups=apps.middleware-operator.io,resources=appservices,verbs=list;watch
// +kubebuilder:rbac:groups=apps.middleware-operator.io,resources=appservices/status,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile enforces the Deployment, then the Service, reads the pods of a rollout that
// stands still (see PodCheckAfter), then writes the status if it changed.
func (r *AppServiceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := &appsv1api.AppService{}
	if err := r.Get(ctx, req.NamespacedName, app); err != nil {
		if apierrors.IsNotFound(err) && r.StatusPace != nil {
			r.StatusPace.Forget(req.NamespacedName)
		}
		if apierrors.IsNotFound(err) && r.podChecks != nil {
			r.podChecks.Drop(req.NamespacedName)
		}
		if apierrors.IsNotFound(err) {
			r.stale.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !app.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the garbage collector removes the children
	}
	if r.stale.Stale(req.NamespacedName, app.ResourceVersion) {
		return ctrl.Result{RequeueAfter: status.StaleRetry}, nil
	}
	next := app.DeepCopy()
	var changes child.Outcomes
	deployment, err := r.ensureDeployment(ctx, next, &changes)
	if err == nil {
		err = r.ensureService(ctx, next, &changes)
	}
	if app.Generation != app.Status.ObservedGeneration {
		// The children follow the user's own spec change: the status's observedGeneration
		// and conditions say so, an event would only repeat it (an API write per AppService
		// of a fleet-wide update). Updates that revert an edit of a child are still events.
		changes.Forget(child.Updated)
	}
	changes.Record(r.Recorder, app)
	if child.StaleCache(err) {
		return ctrl.Result{}, err
	}
	failing, recheck := r.failingPods(ctx, app, deployment)
	setAppServiceStatus(next, deployment, failing, err)
	wait, hold := r.statusWait(req.NamespacedName, app, next)
	if hold || wait > 0 {
		// err is nil: an error is Degraded, which is written at once.
		return lookAgain(sooner(wait, recheck)), nil
	}
	wrote, statusErr := status.PatchDerived(ctx, r.Client, app, next, appServiceStatus)
	if statusErr != nil {
		return ctrl.Result{}, errors.Join(err, statusErr)
	}
	if wrote {
		r.stale.Wrote(req.NamespacedName, app.ResourceVersion)
		metrics.StatusWrites.WithLabelValues("AppService", statusChange(app.Status, next.Status)).Inc()
		warnRolloutProblem(r.Recorder, app, next)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return lookAgain(recheck), nil
}

// lookAgain is a reconcile's result that looks at the rollout again after wait (none when
// 0), behind spec changes (RolloutNewsPriority).
func lookAgain(wait time.Duration) ctrl.Result {
	if wait == 0 {
		return ctrl.Result{}
	}
	return ctrl.Result{RequeueAfter: wait, Priority: ptr.To(RolloutNewsPriority)}
}

// sooner is the shorter of two waits, 0 standing for none.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// statusWait says when the new status is written. At once when nothing changed (nothing is
// written then), when the rollout is over or failing, or when availability changed. A
// rollout under way with nothing wrong is held (hold) until the Deployment reports its end
// or a problem, whose events (see deploymentNews) start the reconcile that writes it: the
// Deployment's own status shows the progress, and a write per step competed with the
// rollouts of a fleet-wide update for the API server (tests/bench). Only a new AppService,
// with no status yet, shows its first rollout after wait (StatusPace).
func (r *AppServiceReconciler) statusWait(key types.NamespacedName, app, next *appsv1api.AppService) (wait time.Duration, hold bool) {
	if equality.Semantic.DeepEqual(app.Status, next.Status) {
		return 0, false
	}
	quiet := rollingOutQuietly(app.Status, next.Status)
	if quiet && len(app.Status.Conditions) > 0 {
		return 0, true
	}
	if r.StatusPace == nil {
		return 0, false
	}
	return r.StatusPace.Wait(key, quiet), false
}

func (r *AppServiceReconciler) ensureDeployment(ctx context.Context, app *appsv1api.AppService, changes *child.Outcomes) (*appsv1.Deployment, error) {
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, app, resources.AppServiceDeployment(app), child.MergeDeployment)
	changes.Note(r.Recorder, app, app.Status.Conditions, live, outcome, err)
	if outcome == child.Updated {
		r.echoes.Wrote(live)
	}
	return live, err
}

func (r *AppServiceReconciler) ensureService(ctx context.Context, app *appsv1api.AppService, changes *child.Outcomes) error {
	if len(app.Spec.Ports) == 0 { // nothing to expose: no Service (a Service needs a port)
		return r.deleteService(ctx, app)
	}
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, app, resources.AppServiceService(app), child.MergeService)
	changes.Note(r.Recorder, app, app.Status.Conditions, live, outcome, err)
	return err
}

// deleteService deletes the AppService's Service, if it has one, once no port is left.
func (r *AppServiceReconciler) deleteService(ctx context.Context, app *appsv1api.AppService) error {
	svc := &corev1.Service{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: app.Namespace, Name: app.Name}, svc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(svc, app) {
		return nil
	}
	if err := r.Delete(ctx, svc, client.Preconditions{UID: &svc.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("while deleting Service %s, which no port needs any more: %w", svc.Name, err)
	}
	return nil
}

func appServiceStatus(obj client.Object) any { return obj.(*appsv1api.AppService).Status } //nolint:forcetypeassert // only AppServices

// SetupWithManager registers the reconciler with the manager, watching AppServices and the
// Deployments and Services they control.
func (r *AppServiceReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.StatusPace == nil {
		r.StatusPace = status.NewPacer(StatusInterval)
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.podChecks == nil {
		r.podChecks = newPodChecks()
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&appsv1api.AppService{}, builder.WithPredicates(specChanged)).
		Watches(&appsv1.Deployment{},
			behindSpecChanges{handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &appsv1api.AppService{}, handler.OnlyControllerOwner())},
			builder.WithPredicates(deploymentChanged(&r.echoes))).
		Owns(&corev1.Service{}).
		WithOptions(opts).
		Named("appservice").
		Complete(r)
}
