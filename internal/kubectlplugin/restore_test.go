package kubectlplugin

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

func completedBackup(shards int) *redisv1alpha1.RedisBackup {
	b := &redisv1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "cache-nightly"},
		Spec: redisv1alpha1.RedisBackupSpec{Cluster: "cache", Destination: redisv1alpha1.ObjectStore{
			Endpoint: "https://s3.example.com", Bucket: "backups", Path: "redis", CredentialsSecret: "creds", CASecret: "ca"}},
		Status: redisv1alpha1.RedisBackupStatus{Phase: redisv1alpha1.BackupCompleted, Location: "s3://backups/redis/cache-nightly"}}
	b.Status.Shards = make([]redisv1alpha1.BackupShard, shards)
	return b
}

func TestRestoreCluster(t *testing.T) {
	source := &redisv1alpha1.RedisCluster{Spec: redisv1alpha1.RedisClusterSpec{Replicas: 12, ReplicasPerMaster: ptr.To[int32](2), Version: "7.2.4",
		Memory: &redisv1alpha1.MemorySpec{Policy: "allkeys-lru"}}}
	t.Run("in the backup's namespace, by name, shaped like the source", func(t *testing.T) {
		rc, err := RestoreCluster(completedBackup(4), source, "prod", "cache-restored")
		if err != nil {
			t.Fatal(err)
		}
		if rc.Namespace != "prod" || rc.Name != "cache-restored" || rc.Spec.Replicas != 12 || *rc.Spec.ReplicasPerMaster != 2 ||
			rc.Spec.Version != "7.2.4" || rc.Spec.Memory.Policy != "allkeys-lru" || rc.Spec.Restore.Backup != "cache-nightly" || rc.Spec.Restore.Source != nil {
			t.Errorf("got %+v", rc)
		}
		if rc.Kind != "RedisCluster" || rc.APIVersion != "redis.middleware-operator.io/v1alpha1" {
			t.Errorf("the printed object needs its kind: %s %s", rc.APIVersion, rc.Kind)
		}
	})
	t.Run("into another namespace, by folder, without the source", func(t *testing.T) {
		rc, err := RestoreCluster(completedBackup(3), nil, "staging", "cache")
		if err != nil {
			t.Fatal(err)
		}
		want := redisv1alpha1.ObjectStore{Endpoint: "https://s3.example.com", Bucket: "backups", Path: "redis/cache-nightly", CredentialsSecret: "creds", CASecret: "ca"}
		if rc.Spec.Replicas != 6 || *rc.Spec.ReplicasPerMaster != 1 || rc.Spec.Restore.Backup != "" || *rc.Spec.Restore.Source != want {
			t.Errorf("got %+v restore %+v", rc.Spec, rc.Spec.Restore.Source)
		}
	})
	for name, tc := range map[string]struct {
		backup *redisv1alpha1.RedisBackup
		want   string
	}{
		"not completed": {func() *redisv1alpha1.RedisBackup {
			b := completedBackup(3)
			b.Status.Phase = redisv1alpha1.BackupRunning
			return b
		}(), "is Running, not Completed"},
		"no shards": {completedBackup(0), "lists no shards"},
		"a location outside the bucket": {func() *redisv1alpha1.RedisBackup {
			b := completedBackup(3)
			b.Status.Location = "s3://other/x"
			return b
		}(), `"s3://other/x" is not a folder of s3://backups/`},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := RestoreCluster(tc.backup, nil, "staging", "x"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestChooseDestination(t *testing.T) {
	store := func(bucket string) redisv1alpha1.ObjectStore { return redisv1alpha1.ObjectStore{Bucket: bucket} }
	schedule := func(name, cluster, bucket string) redisv1alpha1.RedisBackupSchedule {
		return redisv1alpha1.RedisBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: redisv1alpha1.RedisBackupScheduleSpec{Cluster: cluster, Destination: store(bucket)}}
	}
	backup := func(name, cluster, bucket string, age time.Duration) redisv1alpha1.RedisBackup {
		return redisv1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: ago(age)},
			Spec: redisv1alpha1.RedisBackupSpec{Cluster: cluster, Destination: store(bucket)}}
	}
	backups := []redisv1alpha1.RedisBackup{backup("old", "cache", "b-old", 2*time.Hour), backup("new", "cache", "b-new", time.Hour),
		backup("other", "sessions", "b-other", time.Minute)}
	for name, tc := range map[string]struct {
		schedules  []redisv1alpha1.RedisBackupSchedule
		backups    []redisv1alpha1.RedisBackup
		bucket, by string
	}{
		"a schedule of the cluster first": {[]redisv1alpha1.RedisBackupSchedule{schedule("z", "cache", "b-z"), schedule("a", "cache", "b-a"),
			schedule("s", "sessions", "b-s")}, backups, "b-a", "RedisBackupSchedule/a"},
		"else its latest backup": {[]redisv1alpha1.RedisBackupSchedule{schedule("s", "sessions", "b-s")}, backups, "b-new", "RedisBackup/new"},
	} {
		t.Run(name, func(t *testing.T) {
			got, by, err := ChooseDestination(tc.schedules, tc.backups, "cache")
			if err != nil || got.Bucket != tc.bucket || by != tc.by {
				t.Errorf("got %s from %s (%v), want %s from %s", got.Bucket, by, err, tc.bucket, tc.by)
			}
		})
	}
	if _, _, err := ChooseDestination(nil, backups, "new-cluster"); !errors.Is(err, ErrNoDestination) {
		t.Errorf("without schedules or backups of the cluster: %v, want ErrNoDestination", err)
	}
}

func TestBackupName(t *testing.T) {
	if got := BackupName("cache", time.Date(2026, 11, 26, 3, 0, 5, 0, time.FixedZone("CET", 3600))); got != "cache-20261126-020005" {
		t.Errorf("BackupName = %q", got)
	}
}
