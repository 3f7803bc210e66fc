package redisbackup

import (
	"fmt"
	"time"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
)

// Backup timing.
const (
	// backupWaitLimit is how long a RedisBackup waits for its cluster to be backed up (found,
	// unpaused, stable, with a reachable store) before it is Failed.
	backupWaitLimit = 10 * time.Minute
	// backupRetry is when a waiting backup looks again.
	backupRetry = 10 * time.Second
	// backupAttempts is how many copies a backup starts before it is Failed.
	backupAttempts = 3
)

// The reasons of a RedisBackup's Completed condition and events.
const (
	ReasonBackupCompleted  = "Completed"
	ReasonBackupFailed     = "BackupFailed"
	ReasonBackupStarted    = "BackupStarted"
	ReasonClusterNotFound  = "ClusterNotFound"
	ReasonClusterPaused    = "ClusterPaused"
	ReasonClusterUnstable  = "ClusterUnstable"
	ReasonStoreUnavailable = "StoreUnavailable"
)

// ConditionBackupCompleted is a RedisBackup's condition: True once the backup is in the
// bucket, False with the reason while it waits or after it failed.
const ConditionBackupCompleted = "Completed"

// backupLook is what one reconcile saw of a backup and its cluster, in the order the plan
// needs it: each field is only set when the ones before it allowed going on.
type backupLook struct {
	phase    redisv1alpha1.BackupPhase
	attempts int32
	// waiting is how long the backup has been waiting for its first copy to start.
	waiting time.Duration
	// cluster: "" when the cluster is found and unpaused, else why not (reason, message).
	clusterReason, clusterProblem string
	// endpointRefused says why the operator's flags refuse the destination's endpoint ("" when
	// they allow it): the backup fails, no request goes to the store.
	endpointRefused string
	// storeProblem says why the store cannot be used ("" when it can), and storeFailures how
	// many looks in a row found it so (this one included).
	storeProblem  string
	storeFailures int
	// unstable says why the cluster cannot be backed up now ("" when its slot map is stable).
	unstable string
}

// backupDecision is what to do: copy now, or set phase with the reason and look again after.
type backupDecision struct {
	copy     bool
	phase    redisv1alpha1.BackupPhase
	reason   string
	message  string
	after    time.Duration
	terminal bool
}

// planBackup decides a backup's next move from one look. It is pure. A backup whose
// endpoint the operator's flags refuse fails at once. A backup waits for what it needs (the
// cluster, its unpausing, a stable slot map, the store: with a back-off) for
// backupWaitLimit, then fails with what it waited for; a finished backup never changes.
func planBackup(l backupLook) backupDecision {
	if l.phase == redisv1alpha1.BackupCompleted || l.phase == redisv1alpha1.BackupFailed {
		return backupDecision{phase: l.phase, terminal: true}
	}
	wait := func(reason, message string) backupDecision {
		if l.waiting >= backupWaitLimit {
			return backupDecision{phase: redisv1alpha1.BackupFailed, reason: reason, terminal: true,
				message: fmt.Sprintf("gave up after waiting %s: %s", backupWaitLimit, message)}
		}
		return backupDecision{phase: redisv1alpha1.BackupPending, reason: reason, message: message, after: backupRetry}
	}
	switch {
	case l.endpointRefused != "":
		return backupDecision{phase: redisv1alpha1.BackupFailed, reason: backupstore.ReasonEndpointRefused, terminal: true, message: l.endpointRefused}
	case l.clusterReason != "":
		return wait(l.clusterReason, l.clusterProblem)
	case l.storeProblem != "":
		d := wait(ReasonStoreUnavailable, l.storeProblem)
		if !d.terminal {
			d.after = max(backupstore.Backoff(l.storeFailures), backupRetry)
		}
		return d
	case l.unstable != "":
		return wait(ReasonClusterUnstable, "waiting for a stable slot map: "+l.unstable)
	case l.attempts >= backupAttempts:
		return backupDecision{phase: redisv1alpha1.BackupFailed, reason: ReasonBackupFailed, terminal: true,
			message: fmt.Sprintf("%d attempts failed", l.attempts)}
	}
	return backupDecision{copy: true, phase: redisv1alpha1.BackupRunning, reason: ReasonBackupStarted}
}
