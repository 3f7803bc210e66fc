package redisbackup

import (
	"testing"
	"time"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
)

func TestPlanBackup(t *testing.T) {
	cases := map[string]struct {
		look   backupLook
		phase  redisv1alpha1.BackupPhase
		reason string
		copy   bool
		after  time.Duration // checked when set
	}{
		"an endpoint the operator refuses: failed at once": {
			look:  backupLook{endpointRefused: "spec.destination.endpoint http://x is plain HTTP", clusterReason: ReasonClusterNotFound},
			phase: redisv1alpha1.BackupFailed, reason: backupstore.ReasonEndpointRefused},
		"a store failing for the 6th time: a longer wait": {
			look: backupLook{storeProblem: "access denied", storeFailures: 6}, phase: redisv1alpha1.BackupPending, reason: ReasonStoreUnavailable, after: 160 * time.Second},
		"a new backup of a stable cluster copies": {look: backupLook{}, phase: redisv1alpha1.BackupRunning, reason: ReasonBackupStarted, copy: true},
		"a copy cut short by a restart starts again": {
			look: backupLook{phase: redisv1alpha1.BackupRunning, attempts: 1}, phase: redisv1alpha1.BackupRunning, reason: ReasonBackupStarted, copy: true},
		"a missing cluster: wait": {
			look:  backupLook{clusterReason: ReasonClusterNotFound, clusterProblem: "no such cluster"},
			phase: redisv1alpha1.BackupPending, reason: ReasonClusterNotFound},
		"a missing cluster for too long: failed": {
			look:  backupLook{clusterReason: ReasonClusterNotFound, waiting: backupWaitLimit},
			phase: redisv1alpha1.BackupFailed, reason: ReasonClusterNotFound},
		"a paused cluster: wait": {
			look:  backupLook{clusterReason: ReasonClusterPaused, clusterProblem: "paused", waiting: time.Minute},
			phase: redisv1alpha1.BackupPending, reason: ReasonClusterPaused},
		"a store that refuses: wait": {
			look: backupLook{storeProblem: "access denied"}, phase: redisv1alpha1.BackupPending, reason: ReasonStoreUnavailable},
		"slots being moved: wait": {
			look: backupLook{unstable: "slots are being moved"}, phase: redisv1alpha1.BackupPending, reason: ReasonClusterUnstable},
		"every attempt failed: failed": {
			look: backupLook{phase: redisv1alpha1.BackupPending, attempts: backupAttempts}, phase: redisv1alpha1.BackupFailed, reason: ReasonBackupFailed},
		"a completed backup never changes": {
			look: backupLook{phase: redisv1alpha1.BackupCompleted, unstable: "anything"}, phase: redisv1alpha1.BackupCompleted},
		"a failed backup never changes": {
			look: backupLook{phase: redisv1alpha1.BackupFailed}, phase: redisv1alpha1.BackupFailed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := planBackup(tc.look)
			if d.phase != tc.phase || d.reason != tc.reason || d.copy != tc.copy {
				t.Fatalf("decided phase %s reason %s copy %v (%s), want %s %s %v", d.phase, d.reason, d.copy, d.message, tc.phase, tc.reason, tc.copy)
			}
			if tc.after != 0 && d.after != tc.after {
				t.Errorf("looks again after %s, want %s", d.after, tc.after)
			}
			if d.phase == redisv1alpha1.BackupPending && (d.after == 0 || d.message == "") {
				t.Errorf("a wait must say why (%q) and when to look again (%s)", d.message, d.after)
			}
		})
	}
}
