package resources

import (
	"fmt"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// RedisStrictMaxLag is min-replicas-max-lag under spec.writeSafety Strict, in seconds: a
// replica acknowledges the replication stream every second, so 2 s leaves one missed
// acknowledgement (a slow disk, a busy core) before the master refuses writes, and bounds
// how long a master cut off from its replicas goes on acknowledging them (Redis counts its
// good replicas once a second: up to about 3 s in all).
const RedisStrictMaxLag = 2

// RedisWriteSafety is the min-replicas-to-write and min-replicas-max-lag a cluster's nodes
// should run with.
type RedisWriteSafety struct {
	// MinReplicas is min-replicas-to-write (0: off), MaxLag min-replicas-max-lag in seconds.
	MinReplicas, MaxLag int
	// Managed is false when the operator leaves both as the nodes have them: writeSafety
	// Default with a user redis.conf that sets min-replicas-to-write.
	Managed bool
}

// RedisWriteSafetyOf is the write safety spec.writeSafety asks for, given the generated
// redis.conf conf (the user's redis.conf is in it): Strict always wins; Default turns
// min-replicas-to-write off unless the user's redis.conf sets it.
func RedisWriteSafetyOf(rc *redisv1alpha1.RedisCluster, conf string) RedisWriteSafety {
	userConf := userConfOf(conf)
	if rc.Spec.WriteSafety == redisv1alpha1.WriteSafetyStrict {
		return RedisWriteSafety{MinReplicas: 1, MaxLag: RedisStrictMaxLag, Managed: true}
	}
	if _, set := confDirective(userConf, "min-replicas-to-write"); set {
		return RedisWriteSafety{}
	}
	if _, set := confDirective(userConf, "min-slaves-to-write"); set {
		return RedisWriteSafety{}
	}
	return RedisWriteSafety{MaxLag: 10, Managed: true} // Redis's defaults: off, 10 s
}

// redisWriteSafetyConf is the managed redis.conf's write-safety directives: under Strict,
// min-replicas-to-write 1 and min-replicas-max-lag RedisStrictMaxLag on every node (a
// replica promoted by a failover keeps them), after the user's configuration so they win;
// nothing under Default.
func redisWriteSafetyConf(rc *redisv1alpha1.RedisCluster) string {
	if rc.Spec.WriteSafety != redisv1alpha1.WriteSafetyStrict {
		return ""
	}
	return fmt.Sprintf("min-replicas-to-write 1\nmin-replicas-max-lag %d\n", RedisStrictMaxLag)
}
