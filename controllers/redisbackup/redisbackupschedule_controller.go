package redisbackup

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// ScheduleLabel is set on the RedisBackups a schedule creates, to the schedule's name:
// retention only ever deletes backups that carry it.
const ScheduleLabel = "redis.middleware-operator.io/schedule"

// The schedule's condition and its reasons.
const (
	ConditionScheduled      = "Scheduled"
	ReasonScheduleInvalid   = "ScheduleInvalid"
	ReasonScheduled         = "Scheduled"
	ReasonScheduleWaiting   = "RunWaiting"
	ReasonBackupCreated     = "BackupCreated"
	ReasonBackupsRetired    = "BackupsRetired"
	ReasonScheduleSuspended = "Suspended"
)

// RedisBackupScheduleReconciler creates RedisBackups on a schedule and applies retention.
type RedisBackupScheduleReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder events.EventRecorder
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// StorePolicy says which object store endpoints schedules may name (any https:// one
	// when zero): a schedule whose endpoint it refuses creates no backup.
	StorePolicy objectstore.EndpointPolicy
}

// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisbackupschedules,verbs=list;watch
// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisbackupschedules/status,verbs=patch
// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisbackupschedules/finalizers,verbs=update
// +kubebuilder:rbac:groups=redis.middleware-operator.io,resources=redisbackups,verbs=create;delete

// Reconcile creates the due run's RedisBackup (named after the schedule and the run's time,
// so a repeated reconcile creates it once), deletes what retention does not keep, and
// looks again at the next run.
func (r *RedisBackupScheduleReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sch := &redisv1alpha1.RedisBackupSchedule{}
	if err := r.Get(ctx, req.NamespacedName, sch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sch.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	next := sch.DeepCopy()
	next.Status.ObservedGeneration = sch.Generation
	parsed, msg := parseSchedule(sch.Spec.Schedule)
	if msg != "" {
		// Until the spec changes (a new generation wakes the schedule).
		r.setScheduled(sch, next, metav1.ConditionFalse, ReasonScheduleInvalid, msg, corev1.EventTypeWarning)
		_, err := status.Patch(ctx, r.Client, sch, next, redisBackupScheduleStatus)
		return ctrl.Result{}, err
	}
	if err := backupstore.CheckEndpoint(r.StorePolicy, "spec.destination.endpoint", sch.Spec.Destination.Endpoint); err != nil {
		// Until the spec (a new generation) or the operator's flags (a restart) change.
		r.setScheduled(sch, next, metav1.ConditionFalse, backupstore.ReasonEndpointRefused, err.Error()+"; no backup is created until then", corev1.EventTypeWarning)
		_, err := status.Patch(ctx, r.Client, sch, next, redisBackupScheduleStatus)
		return ctrl.Result{}, err
	}
	list := &redisv1alpha1.RedisBackupList{}
	if err := r.List(ctx, list, client.InNamespace(sch.Namespace), client.MatchingLabels{ScheduleLabel: sch.Name}); err != nil {
		return ctrl.Result{}, err
	}
	look := scheduleLook{now: r.now(), schedule: parsed, since: sch.CreationTimestamp.Time, suspend: sch.Spec.Suspend, keep: sch.Spec.Keep}
	if t := sch.Status.LastScheduleTime; t != nil {
		look.since = t.Time
	}
	next.Status.LastCompletedBackup = ""
	var newest time.Time
	for _, b := range list.Items {
		sb := scheduledBackup{name: b.Name, phase: b.Status.Phase, created: b.CreationTimestamp.Time, deleting: !b.DeletionTimestamp.IsZero()}
		if b.Status.Phase == redisv1alpha1.BackupCompleted && b.Status.CompletedAt != nil {
			sb.completed = b.Status.CompletedAt.Time
			if sb.completed.After(newest) {
				newest, next.Status.LastCompletedBackup = sb.completed, b.Name
			}
		}
		look.backups = append(look.backups, sb)
	}
	d := planSchedule(look)
	log.FromContext(ctx).V(1).Info("schedule decision", "create", d.create, "delete", d.delete, "next", d.next, "waiting", d.waiting)
	if err := r.act(ctx, sch, next, d, list.Items); err != nil {
		return ctrl.Result{}, err
	}
	kept := slices.DeleteFunc(look.backups, func(b scheduledBackup) bool { return b.deleting || slices.Contains(d.delete, b.name) })
	next.Status.Backups = int32(len(kept)) //nolint:gosec // a namespace's backups
	if !d.create.IsZero() {
		next.Status.Backups++
	}
	next.Status.NextScheduleTime = nil
	if !d.next.IsZero() {
		next.Status.NextScheduleTime = &metav1.Time{Time: d.next}
	}
	if _, err := status.Patch(ctx, r.Client, sch, next, redisBackupScheduleStatus); err != nil {
		return ctrl.Result{}, err
	}
	if d.next.IsZero() {
		// Suspended: a spec change wakes it.
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: max(time.Until(d.next), time.Second)}, nil
}

// act creates the due backup and deletes the expired ones (of listed), and says so in the
// condition.
func (r *RedisBackupScheduleReconciler) act(ctx context.Context, sch, next *redisv1alpha1.RedisBackupSchedule, d scheduleDecision, listed []redisv1alpha1.RedisBackup) error {
	switch {
	case !d.create.IsZero():
		name := fmt.Sprintf("%s-%s", sch.Name, d.create.UTC().Format("20060102-150405"))
		b := &redisv1alpha1.RedisBackup{
			ObjectMeta: metav1.ObjectMeta{Namespace: sch.Namespace, Name: name, Labels: map[string]string{ScheduleLabel: sch.Name}},
			Spec:       redisv1alpha1.RedisBackupSpec{Cluster: sch.Spec.Cluster, Destination: sch.Spec.Destination, ReclaimPolicy: sch.Spec.ReclaimPolicy},
		}
		if err := controllerutil.SetControllerReference(sch, b, r.Scheme); err != nil {
			return err
		}
		if err := r.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
			r.setScheduled(sch, next, metav1.ConditionFalse, ReasonBackupFailed, fmt.Sprintf("cannot create RedisBackup %s: %v", name, err), corev1.EventTypeWarning)
			return err
		}
		scheduled := metav1.NewTime(d.create)
		next.Status.LastScheduleTime = &scheduled
		r.setScheduled(sch, next, metav1.ConditionTrue, ReasonBackupCreated, fmt.Sprintf("created RedisBackup %s for the run of %s", name, d.create.UTC().Format(time.RFC3339)), corev1.EventTypeNormal)
	case sch.Spec.Suspend:
		r.setScheduled(sch, next, metav1.ConditionFalse, ReasonScheduleSuspended, "spec.suspend is true: no backup is created until it is false", "")
	case d.waiting != "":
		r.setScheduled(sch, next, metav1.ConditionTrue, ReasonScheduleWaiting, d.waiting, "")
	default:
		r.setScheduled(sch, next, metav1.ConditionTrue, ReasonScheduled, "next run at "+d.next.UTC().Format(time.RFC3339), "")
	}
	deleted, err := r.retire(ctx, d.delete, listed)
	if len(deleted) > 0 {
		r.Recorder.Eventf(sch, nil, corev1.EventTypeNormal, ReasonBackupsRetired, "Retain", "deleted %d backups retention does not keep: %v", len(deleted), deleted)
	}
	return err
}

// retire deletes the backups named (of listed) and returns those this call deleted. Each
// delete is conditional on the version listed, so a backup the cache still showed after an
// earlier reconcile deleted it (gone, or changed by its deletion) is neither deleted nor
// reported twice.
func (r *RedisBackupScheduleReconciler) retire(ctx context.Context, names []string, listed []redisv1alpha1.RedisBackup) ([]string, error) {
	var deleted []string
	for _, b := range listed {
		if !slices.Contains(names, b.Name) {
			continue
		}
		err := r.Delete(ctx, &b, client.Preconditions{UID: &b.UID, ResourceVersion: &b.ResourceVersion})
		switch {
		case err == nil:
			deleted = append(deleted, b.Name)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		default:
			return deleted, fmt.Errorf("while deleting RedisBackup %s (retention): %w", b.Name, err)
		}
	}
	return deleted, nil
}

// setScheduled sets the Scheduled condition, with an event of kind (none when "") when its
// reason changes.
func (r *RedisBackupScheduleReconciler) setScheduled(sch, next *redisv1alpha1.RedisBackupSchedule, cond metav1.ConditionStatus, reason, message, kind string) {
	prev := meta.FindStatusCondition(sch.Status.Conditions, ConditionScheduled)
	if kind != "" && (reason == ReasonBackupCreated || prev == nil || prev.Reason != reason) {
		r.Recorder.Eventf(sch, nil, kind, reason, "Schedule", "%s", message)
	}
	status.Set(&next.Status.Conditions, sch.Generation, ConditionScheduled, cond, reason, message)
}

func (r *RedisBackupScheduleReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func redisBackupScheduleStatus(obj client.Object) any {
	return obj.(*redisv1alpha1.RedisBackupSchedule).Status
} //nolint:forcetypeassert // only schedules

// SetupWithManager watches schedules and the backups they own (a backup that completes may
// retire an older one).
func (r *RedisBackupScheduleReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&redisv1alpha1.RedisBackupSchedule{}).
		Owns(&redisv1alpha1.RedisBackup{}).
		WithOptions(opts).
		Named("redisbackupschedule").
		Complete(r)
}
