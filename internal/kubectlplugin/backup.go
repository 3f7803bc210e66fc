package kubectlplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// BackupName is the name of a backup of cluster taken at now when the user gives none:
// cluster-YYYYMMDD-HHMMSS (UTC), as the schedules name theirs.
func BackupName(cluster string, now time.Time) string {
	return cluster + "-" + now.UTC().Format("20060102-150405")
}

// NewBackup is the RedisBackup of cluster named name, to dest.
func NewBackup(namespace, cluster, name string, dest redisv1alpha1.ObjectStore) *redisv1alpha1.RedisBackup {
	return &redisv1alpha1.RedisBackup{
		TypeMeta:   metav1.TypeMeta{APIVersion: redisv1alpha1.GroupVersion.String(), Kind: "RedisBackup"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       redisv1alpha1.RedisBackupSpec{Cluster: cluster, Destination: dest},
	}
}

// ErrNoDestination says that neither the flags nor the namespace's schedules and backups
// of the cluster give a destination.
var ErrNoDestination = errors.New("no destination: give --endpoint, --bucket and --credentials-secret (no RedisBackupSchedule or earlier RedisBackup of this cluster to copy one from)")

// ChooseDestination picks where a new backup of cluster goes when the flags give no
// destination: a RedisBackupSchedule's of the cluster (the first by name), else the latest
// RedisBackup's of the cluster. It returns the destination and what it was copied from.
func ChooseDestination(schedules []redisv1alpha1.RedisBackupSchedule, backups []redisv1alpha1.RedisBackup, cluster string) (redisv1alpha1.ObjectStore, string, error) {
	var schedule *redisv1alpha1.RedisBackupSchedule
	for i := range schedules {
		s := &schedules[i]
		if s.Spec.Cluster == cluster && (schedule == nil || s.Name < schedule.Name) {
			schedule = s
		}
	}
	if schedule != nil {
		return schedule.Spec.Destination, "RedisBackupSchedule/" + schedule.Name, nil
	}
	var latest *redisv1alpha1.RedisBackup
	for i := range backups {
		b := &backups[i]
		if b.Spec.Cluster == cluster && (latest == nil || latest.CreationTimestamp.Before(&b.CreationTimestamp)) {
			latest = b
		}
	}
	if latest != nil {
		return latest.Spec.Destination, "RedisBackup/" + latest.Name, nil
	}
	return redisv1alpha1.ObjectStore{}, "", ErrNoDestination
}

// WaitBackup polls the backup at key every interval until it is Completed (nil) or Failed
// (an error with its reason), or timeout passes; each new phase is written to progress.
func WaitBackup(ctx context.Context, c client.Client, key client.ObjectKey, interval, timeout time.Duration, progress io.Writer) (*redisv1alpha1.RedisBackup, error) {
	b := &redisv1alpha1.RedisBackup{}
	var seen redisv1alpha1.BackupPhase
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, b); err != nil {
			return false, fmt.Errorf("while reading RedisBackup %s: %w", key, err)
		}
		if b.Status.Phase != seen {
			seen = b.Status.Phase
			_, _ = fmt.Fprintf(progress, "RedisBackup %s: %s %s\n", key.Name, seen, b.Status.Reason)
		}
		switch b.Status.Phase {
		case redisv1alpha1.BackupCompleted:
			return true, nil
		case redisv1alpha1.BackupFailed:
			return false, fmt.Errorf("RedisBackup %s failed: %s", key.Name, b.Status.Reason)
		}
		return false, nil
	})
	if err != nil && wait.Interrupted(err) {
		return b, fmt.Errorf("RedisBackup %s is %s after %s, not Completed: %s", key.Name, orDash(string(b.Status.Phase)), timeout, b.Status.Reason)
	}
	return b, err
}
