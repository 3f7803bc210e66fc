package kubectlplugin

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// RestoreCluster is the RedisCluster named to in namespace that restores backup: by the
// backup's name in the backup's own namespace, else by its folder in the object store (the
// namespace needs Secrets of the same names as the backup's credentials and CA). It has as
// many masters as the backup has shards; source, the backed-up cluster when it still
// exists, gives replicasPerMaster, version and memory (nil: the defaults).
func RestoreCluster(backup *redisv1alpha1.RedisBackup, source *redisv1alpha1.RedisCluster, namespace, to string) (*redisv1alpha1.RedisCluster, error) {
	if backup.Status.Phase != redisv1alpha1.BackupCompleted {
		return nil, fmt.Errorf("RedisBackup %s is %s, not Completed: only a completed backup restores", backup.Name, orDash(string(backup.Status.Phase)))
	}
	shards := int32(len(backup.Status.Shards))
	if shards == 0 {
		return nil, fmt.Errorf("RedisBackup %s lists no shards in its status", backup.Name)
	}
	rc := &redisv1alpha1.RedisCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: redisv1alpha1.GroupVersion.String(), Kind: "RedisCluster"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: to},
	}
	perMaster := int32(1)
	if source != nil {
		perMaster = ptr.Deref(source.Spec.ReplicasPerMaster, 1)
		rc.Spec.Version = source.Spec.Version
		rc.Spec.Memory = source.Spec.Memory.DeepCopy()
	}
	rc.Spec.Replicas = shards * (1 + perMaster)
	rc.Spec.ReplicasPerMaster = ptr.To(perMaster)
	if namespace == backup.Namespace {
		rc.Spec.Restore = &redisv1alpha1.RestoreSpec{Backup: backup.Name}
		return rc, nil
	}
	folder, err := LocationPath(backup.Status.Location, backup.Spec.Destination.Bucket)
	if err != nil {
		return nil, err
	}
	src := backup.Spec.Destination
	src.Path = folder
	rc.Spec.Restore = &redisv1alpha1.RestoreSpec{Source: &src}
	return rc, nil
}

// LocationPath is the folder of a backup's status.location (s3://bucket/folder) within
// bucket, as spec.restore.source.path names it.
func LocationPath(location, bucket string) (string, error) {
	prefix := "s3://" + bucket + "/"
	folder, ok := strings.CutPrefix(location, prefix)
	if !ok || folder == "" {
		return "", fmt.Errorf("the backup's location %q is not a folder of s3://%s/", location, bucket)
	}
	return strings.TrimSuffix(folder, "/"), nil
}
