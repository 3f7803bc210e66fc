package redis_test

import (
	"testing"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// TestRedisClusterArchiveSpecsAreChecked: a restore from an archive with a target that is
// no time, with a backup beside it, or naming no cluster is refused with a message that
// names the field and the fix; an RFC 3339 target with a fraction and an offset is accepted.
func TestRedisClusterArchiveSpecsAreChecked(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	archive := func(target string) *redisv1alpha1.ArchiveRestoreSpec {
		return &redisv1alpha1.ArchiveRestoreSpec{Source: storeSpec("archive"), Cluster: "cache", TargetTime: target}
	}
	cases := map[string]admissionCase{
		"a target with a fraction and an offset (accepted)": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Restore = &redisv1alpha1.RestoreSpec{Archive: archive("2026-11-28T23:15:00.250+01:00")}
			},
		},
		"a target that is no time": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Restore = &redisv1alpha1.RestoreSpec{Archive: archive("yesterday")}
			},
			want: []string{"spec.restore.archive.targetTime must be latest or an RFC 3339 time"},
		},
		"a target without a zone": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Restore = &redisv1alpha1.RestoreSpec{Archive: archive("2026-11-28T23:15:00")}
			},
			want: []string{"spec.restore.archive.targetTime must be latest or an RFC 3339 time"},
		},
		"an archive and a backup": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Restore = &redisv1alpha1.RestoreSpec{Archive: archive("latest"), Backup: "nightly"}
			},
			want: []string{"spec.restore.archive restores from the archive's own base snapshots", "remove spec.restore.backup"},
		},
		"an archive of no cluster": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				a := archive("latest")
				a.Cluster = "Cache!"
				rc.Spec.Restore = &redisv1alpha1.RestoreSpec{Archive: a}
			},
			want: []string{"spec.restore.archive.cluster must be the archived RedisCluster's name"},
		},
	}
	checkAdmission(t, ns, "archive", cases)
}
