package apps

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/internal/caching"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// CloudManagerReconciler brings a CloudManager's tiers up in order (front, then identity,
// then the database), keeps each in the state the spec describes, deletes the owned objects
// the spec no longer names, and reports the progress in the CloudManager's status.
type CloudManagerReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// APIReader reads the Secret a user names (the manager's when nil).
	APIReader client.Reader
	// References is the metadata cache through which that Secret is watched
	// (caching.NewReferences over all namespaces when nil).
	References cache.Cache
	// userObjects reads that Secret once per version and labels it caching.WatchLabel, so
	// References sees its changes (made by SetupWithManager; APIReader alone without it).
	userObjects *caching.Versioned
	// stale keeps reconciles off cached CloudManagers older than the operator's last status
	// write: one would write again the status it has just written.
	stale status.StaleGuard
}

// safetyRequeue bounds how long a CloudManager that waits for a tier goes unreconciled. The
// watches on its children normally wake it much sooner.
const safetyRequeue = time.Minute

// missingSecretLook is how soon a CloudManager whose password Secret is missing or lacks its
// key looks again. The Secret watch sees only Secrets the operator has labelled, and a Secret
// that does not exist yet cannot be labelled, so no event announces its creation.
const missingSecretLook = 10 * time.Second

// cloudManagerTiers is what one reconcile saw: each tier's live object (nil when it does not
// exist yet), whether a tier waits for the one before it, and the tier whose step failed.
type cloudManagerTiers struct {
	front, identity            *appsv1.Deployment
	db                         *appsv1.StatefulSet
	identityWaiting, dbWaiting bool
	failed                     string // a resources.Component*, or "" for a step of no tier
}

// cloudManagerStep is one named step of the pipeline; tier is the component it enforces.
type cloudManagerStep struct {
	tier string
	run  func(context.Context, *appsv1api.CloudManager, *cloudManagerTiers) error
}

// The RBAC markers make manager-role, which OLM and config/overlays/namespaced bind per
// namespace: namespaced resources only (a grant on a cluster-scoped one goes in
// config/rbac/cluster_role.yaml; tests/bundle checks it), each verb one the code uses.
// +kubebuilder:rbac:groups=apps.middleware-operator.io,resources=cloudmanagers,verbs=list;watch
// +kubebuilder:rbac:groups=apps.middleware-operator.io,resources=cloudmanagers/status,verbs=patch
// +kubebuilder:rbac:groups=apps.middleware-operator.io,resources=cloudmanagers/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets,verbs=list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile validates the spec, deletes stale children, enforces the front, identity and
// database tiers in that order, then writes the status if it changed.
func (r *CloudManagerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cm := &appsv1api.CloudManager{}
	if err := r.Get(ctx, req.NamespacedName, cm); err != nil {
		if apierrors.IsNotFound(err) {
			r.stale.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cm.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // the garbage collector removes the children
	}
	if r.stale.Stale(req.NamespacedName, cm.ResourceVersion) {
		return ctrl.Result{RequeueAfter: status.StaleRetry}, nil
	}
	next := cm.DeepCopy()
	tiers := &cloudManagerTiers{}
	var err error
	for _, step := range []cloudManagerStep{
		{"", r.validate},
		{"", r.cleanup},
		{resources.ComponentFront, r.ensureFront},
		{resources.ComponentIdentity, r.ensureIdentity},
		{resources.ComponentDB, r.ensureDatabase},
	} {
		if err = step.run(ctx, next, tiers); err != nil {
			tiers.failed = step.tier
			break
		}
	}
	if child.StaleCache(err) {
		return ctrl.Result{}, err
	}
	setCloudManagerStatus(next, tiers, err)
	wrote, statusErr := status.PatchDerived(ctx, r.Client, cm, next, cloudManagerStatus)
	if statusErr != nil {
		return ctrl.Result{}, errors.Join(err, statusErr)
	}
	if wrote {
		r.stale.Wrote(req.NamespacedName, cm.ResourceVersion)
	}
	r.recordPhase(cm, next)
	return cloudManagerResult(next, err)
}

// validate checks what the CRD schema cannot fully check; the API server already rejects
// an invalid size, so this only guards objects stored before the schema said so.
func (r *CloudManagerReconciler) validate(_ context.Context, cm *appsv1api.CloudManager, _ *cloudManagerTiers) error {
	if _, err := resources.CloudManagerStorageSize(cm); err != nil {
		return reconcile.TerminalError(&invalidSpecError{err: err})
	}
	return nil
}

func (r *CloudManagerReconciler) ensureFront(ctx context.Context, cm *appsv1api.CloudManager, t *cloudManagerTiers) error {
	live, err := ensureChild(ctx, r, cm, resources.CloudManagerFrontDeployment(cm), child.MergeDeployment)
	t.front = live
	return err
}

// ensureIdentity creates the identity Deployment only once the front is ready; once it
// exists it is always enforced.
func (r *CloudManagerReconciler) ensureIdentity(ctx context.Context, cm *appsv1api.CloudManager, t *cloudManagerTiers) error {
	desired := resources.CloudManagerIdentityDeployment(cm)
	if !deploymentReady(t.front, resources.TierReplicas(cm.Spec.Front.Deployment.Replicas)) {
		if exists, err := r.exists(ctx, desired); err != nil || !exists {
			t.identityWaiting = err == nil
			return err
		}
	}
	live, err := ensureChild(ctx, r, cm, desired, child.MergeDeployment)
	t.identity = live
	return err
}

// ensureDatabase creates the database tier (root password Secret, headless Service,
// StatefulSet) only once identity is ready; once the StatefulSet exists it is always
// enforced.
func (r *CloudManagerReconciler) ensureDatabase(ctx context.Context, cm *appsv1api.CloudManager, t *cloudManagerTiers) error {
	desired := resources.CloudManagerStatefulSet(cm)
	if !deploymentReady(t.identity, resources.TierReplicas(cm.Spec.Identity.Deployment.Replicas)) {
		if exists, err := r.exists(ctx, desired); err != nil || !exists {
			t.dbWaiting = err == nil
			return err
		}
	}
	if err := r.ensurePassword(ctx, cm); err != nil {
		return err
	}
	if _, err := ensureChild(ctx, r, cm, resources.CloudManagerDBService(cm), child.MergeService); err != nil {
		return err
	}
	live, err := ensureChild(ctx, r, cm, desired, child.MergeStatefulSet)
	t.db = live
	return err
}

// ensurePassword makes the root password available to the database: it checks the Secret
// spec.db.rootPasswordSecretRef names, or keeps the owned Secret holding spec.db.rootPass,
// or a password generated once. A generated password is never replaced.
func (r *CloudManagerReconciler) ensurePassword(ctx context.Context, cm *appsv1api.CloudManager) error {
	if cm.Spec.DB.RootPasswordSecretRef != nil {
		return r.checkPasswordSecret(ctx, cm)
	}
	password, merge := []byte(cm.Spec.DB.RootPass), child.MergeFunc[*corev1.Secret](child.MergeSecret)
	if cm.Spec.DB.RootPass == "" {
		kept, err := child.KeptSecretValue(ctx, r.Client, cm,
			client.ObjectKey{Namespace: cm.Namespace, Name: resources.CloudManagerSecretName(cm)}, resources.SecretPasswordKey)
		if err != nil {
			return err
		}
		password, merge = kept, child.MergeSecretKeeping(resources.SecretPasswordKey)
		if password == nil {
			if password, err = child.NewPassword(); err != nil {
				return err
			}
		}
	}
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, cm, resources.CloudManagerSecret(cm, password), merge)
	child.RecordOutcome(r.Recorder, cm, cm.Status.Conditions, live, outcome, err)
	if err == nil && cm.Spec.DB.RootPass != "" && outcome != child.Unchanged {
		r.Recorder.Eventf(cm, live, corev1.EventTypeWarning, ReasonPlainTextPassword, "Reconcile",
			"spec.db.rootPass keeps the root password in plain text in the CloudManager; it was copied into Secret %s. "+
				"Store it in a Secret of your own and set spec.db.rootPasswordSecretRef instead", live.GetName())
	}
	return err
}

// checkPasswordSecret reports a Secret named by spec.db.rootPasswordSecretRef that is
// missing or lacks the key; the reconcile looks again after missingSecretLook.
func (r *CloudManagerReconciler) checkPasswordSecret(ctx context.Context, cm *appsv1api.CloudManager) error {
	name, key := resources.CloudManagerPasswordSource(cm)
	secret := &corev1.Secret{} // the user's: not in the cache, which holds only the operator's own
	get := r.APIReader.Get
	if r.userObjects != nil {
		get = r.userObjects.Get
	}
	if err := get(ctx, client.ObjectKey{Namespace: cm.Namespace, Name: name}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return &passwordSecretError{msg: fmt.Sprintf("Secret %q named by spec.db.rootPasswordSecretRef does not exist", name)}
		}
		return fmt.Errorf("while reading Secret %s: %w", name, err)
	}
	if len(secret.Data[key]) == 0 {
		return &passwordSecretError{msg: fmt.Sprintf("Secret %q named by spec.db.rootPasswordSecretRef has no key %q", name, key)}
	}
	return nil
}

// ensureChild enforces one child and records the outcome as an event.
func ensureChild[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, r *CloudManagerReconciler, cm *appsv1api.CloudManager, desired PT, merge child.MergeFunc[PT]) (PT, error) {
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, cm, desired, merge)
	child.RecordOutcome(r.Recorder, cm, cm.Status.Conditions, live, outcome, err)
	if err != nil {
		return nil, err
	}
	return live, nil
}

// exists reports whether an object of obj's kind and name exists; obj is left unchanged.
func (r *CloudManagerReconciler) exists(ctx context.Context, obj client.Object) (bool, error) {
	probe, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return false, fmt.Errorf("%T is not a client.Object", obj)
	}
	if err := r.Get(ctx, client.ObjectKeyFromObject(obj), probe); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("while reading %s %s: %w", child.KindOf(obj), obj.GetName(), err)
	}
	log.FromContext(ctx).V(1).Info("enforcing a tier created earlier although the tier before it is not ready", "kind", child.KindOf(obj), "name", obj.GetName())
	return true, nil
}

// recordPhase emits an event when the phase changed.
func (r *CloudManagerReconciler) recordPhase(before, after *appsv1api.CloudManager) {
	if before.Status.Phase == after.Status.Phase {
		return
	}
	eventType := corev1.EventTypeNormal
	if after.Status.Phase == appsv1api.CloudManagerDegraded {
		eventType = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(after, nil, eventType, string(after.Status.Phase), "Reconcile", "Phase %s: %s",
		after.Status.Phase, readyMessage(after))
}

// cloudManagerResult maps the outcome of a reconcile to the controller's result: errors are
// retried with backoff (a TerminalError is not), a missing password Secret is looked for
// again after missingSecretLook, and a stack that is not Ready yet waits for its children's watches, with
// RequeueAfter only as a safety net.
func cloudManagerResult(cm *appsv1api.CloudManager, err error) (ctrl.Result, error) {
	var secretErr *passwordSecretError
	switch {
	case errors.As(err, &secretErr):
		return ctrl.Result{RequeueAfter: missingSecretLook}, nil
	case err != nil:
		return ctrl.Result{}, err
	case cm.Status.Phase != appsv1api.CloudManagerReady:
		return ctrl.Result{RequeueAfter: safetyRequeue}, nil
	}
	return ctrl.Result{}, nil
}

func cloudManagerStatus(obj client.Object) any { return obj.(*appsv1api.CloudManager).Status } //nolint:forcetypeassert // only CloudManagers

// passwordSecretIndex indexes CloudManagers by the Secret spec.db.rootPasswordSecretRef names.
const passwordSecretIndex = "cloudmanager.spec.db.rootPasswordSecretRef.name"

// SetupWithManager registers the reconciler with the manager: it watches CloudManagers, the
// Deployments, StatefulSets, Services and Secrets they control, and the Secrets they read the
// root password from. It also registers the field indexes the cleanup and the Secret watch
// use.
func (r *CloudManagerReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if err := caching.UserObjects(mgr, &r.APIReader, &r.References); err != nil {
		return err
	}
	r.userObjects = &caching.Versioned{Refs: r.References, API: r.APIReader, Writer: r.Client}
	ctx := context.Background()
	for _, obj := range ownedKinds() {
		if err := mgr.GetFieldIndexer().IndexField(ctx, obj, cloudManagerOwnerIndex, controllingCloudManager); err != nil {
			return fmt.Errorf("while indexing %T by their CloudManager: %w", obj, err)
		}
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &appsv1api.CloudManager{}, passwordSecretIndex, func(obj client.Object) []string {
		if ref := obj.(*appsv1api.CloudManager).Spec.DB.RootPasswordSecretRef; ref != nil { //nolint:forcetypeassert // indexes CloudManagers only
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("while indexing CloudManagers by their password Secret: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&appsv1api.CloudManager{}).
		Owns(&appsv1.Deployment{}).
		Owns(&appsv1.StatefulSet{}).
		Owns(&corev1.Service{}).
		Owns(&corev1.Secret{}).
		WatchesRawSource(source.Kind(r.References, caching.Metadata("Secret"), handler.TypedEnqueueRequestsFromMapFunc(r.cloudManagersReading))).
		WithOptions(opts).
		Named("cloudmanager").
		Complete(r)
}

// cloudManagersReading maps a Secret to the CloudManagers whose rootPasswordSecretRef names it.
func (r *CloudManagerReconciler) cloudManagersReading(ctx context.Context, secret *metav1.PartialObjectMetadata) []reconcile.Request {
	list := &appsv1api.CloudManagerList{}
	if err := r.List(ctx, list, client.InNamespace(secret.GetNamespace()), client.MatchingFields{passwordSecretIndex: secret.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "while listing the CloudManagers that read a Secret", "secret", secret.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return reqs
}
