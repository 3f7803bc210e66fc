package resources

import "strings"

// FullCoverageDirective is the redis.conf directive that decides whether a node refuses
// every key while some slot has no serving master ("yes") or keeps serving the slots that
// have one ("no").
const FullCoverageDirective = "cluster-require-full-coverage"

// RedisDefaultFullCoverage is cluster-require-full-coverage when the user's redis.conf does
// not set it: "no", so a shard that is down (its master and replicas lost, or a failover
// under way) stops only its own slots, and the other shards keep serving. The status,
// rediscluster_slots_ok and the RedisClusterSlotsNotCovered alert report the unserved slots
// either way.
const RedisDefaultFullCoverage = "no"

// redisUserFullCoverage is the user's cluster-require-full-coverage (yes or no) when their
// redis.conf sets one, else RedisDefaultFullCoverage.
func redisUserFullCoverage(userConf string) string {
	if value, set := confDirective(userConf, FullCoverageDirective); set {
		if value = strings.ToLower(value); value == "yes" || value == "no" {
			return value
		}
	}
	return RedisDefaultFullCoverage
}

// RedisFullCoverageOf is the cluster-require-full-coverage a generated redis.conf gives the
// nodes (its last such directive), "" when it sets none.
func RedisFullCoverageOf(conf string) string {
	value, _ := confDirective(conf, FullCoverageDirective)
	return strings.ToLower(value)
}
