package resources

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// DefaultMaxMemoryPercent is maxmemory as a share of the redis container's memory limit
// when spec.memory says nothing else. A node whose data is rewritten while it forks for an
// RDB snapshot or an AOF rewrite holds up to twice its used memory (the child keeps the
// old pages, the parent copies each one it writes to): measured at 2.0 to 2.15 times
// used_memory with a writer overwriting random keys (docs/rediscluster.md, Memory). With
// RSS about 8% above used_memory, 45% keeps that worst case under the limit with room for
// replication and client buffers.
const DefaultMaxMemoryPercent = 45

// userConfHeader starts the user's part of the generated redis.conf (RedisConf).
const userConfHeader = "# from spec.pod[0].configmap\n"

// RedisMemory is the memory configuration the nodes of a cluster run with.
type RedisMemory struct {
	// MaxMemory is maxmemory in bytes, 0 for none.
	MaxMemory int64
	// Policy is maxmemory-policy.
	Policy string
	// Source says where MaxMemory comes from.
	Source redisv1alpha1.MaxMemorySource
	// Known is false when the user's maxmemory could not be read (the planner leaves the
	// nodes' maxmemory alone then).
	Known bool
}

// RedisMemoryLimit is the memory limit of the redis container, 0 when it has none.
func RedisMemoryLimit(rc *redisv1alpha1.RedisCluster) int64 {
	limit, ok := RedisPodSpec(rc).Resources.Limits[corev1.ResourceMemory]
	if !ok {
		return 0
	}
	return limit.Value()
}

// RedisMemoryFromSpec is the memory configuration spec.memory and the memory limit ask for,
// before the user's redis.conf is taken into account.
func RedisMemoryFromSpec(rc *redisv1alpha1.RedisCluster) RedisMemory {
	m := RedisMemory{Policy: string(redisv1alpha1.MaxMemoryPolicyNoEviction), Source: redisv1alpha1.MaxMemoryNone, Known: true}
	spec := rc.Spec.Memory
	if spec == nil {
		spec = &redisv1alpha1.MemorySpec{}
	}
	if spec.Policy != "" {
		m.Policy = string(spec.Policy)
	}
	switch limit := RedisMemoryLimit(rc); {
	case spec.MaxMemory != nil:
		m.MaxMemory, m.Source = spec.MaxMemory.Value(), redisv1alpha1.MaxMemoryFromSpec
	case limit > 0:
		percent := int64(DefaultMaxMemoryPercent)
		if spec.MaxMemoryPercent != nil {
			percent = int64(*spec.MaxMemoryPercent)
		}
		m.MaxMemory, m.Source = limit*percent/100, redisv1alpha1.MaxMemoryFromLimit
	}
	return m
}

// redisMemoryConf is the managed redis.conf's memory directives: maxmemory and
// maxmemory-policy unless the user's redis.conf sets them (the user's line wins), and
// oom-score-adj, so that when the container's memory limit is hit anyway the kernel kills
// a fork child (an RDB snapshot or AOF rewrite, retried later) before the server.
func redisMemoryConf(rc *redisv1alpha1.RedisCluster, userConf string) string {
	m := RedisMemoryFromSpec(rc)
	var b strings.Builder
	if _, set := confDirective(userConf, "maxmemory"); !set && m.MaxMemory > 0 {
		fmt.Fprintf(&b, "maxmemory %d\n", m.MaxMemory)
	}
	if _, set := confDirective(userConf, "maxmemory-policy"); !set {
		fmt.Fprintf(&b, "maxmemory-policy %s\n", m.Policy)
	}
	if _, set := confDirective(userConf, "oom-score-adj"); !set {
		b.WriteString("oom-score-adj yes\n")
	}
	return b.String()
}

// RedisMemoryOf is the memory configuration of rc's nodes given the generated redis.conf
// (the redisConfigMap's, which holds the user's redis.conf first): the user's maxmemory and
// maxmemory-policy win over spec.memory.
func RedisMemoryOf(rc *redisv1alpha1.RedisCluster, conf string) RedisMemory {
	m := RedisMemoryFromSpec(rc)
	userConf := userConfOf(conf)
	if policy, set := confDirective(userConf, "maxmemory-policy"); set {
		m.Policy = strings.ToLower(policy)
	}
	if value, set := confDirective(userConf, "maxmemory"); set {
		bytes, err := RedisMemoryBytes(value)
		m.MaxMemory, m.Source, m.Known = bytes, redisv1alpha1.MaxMemoryFromUserConfig, err == nil
	}
	return m
}

// userConfOf is the user's part of a generated redis.conf ("" when it has none).
func userConfOf(conf string) string {
	rest, ok := strings.CutPrefix(conf, userConfHeader)
	if !ok {
		return ""
	}
	userConf, _, _ := strings.Cut(rest, managedConfHeader)
	return userConf
}

// confDirective is the value of the last line of conf that sets directive (Redis keeps the
// last), and whether one does.
func confDirective(conf, directive string) (string, bool) {
	value, set := "", false
	for line := range strings.Lines(conf) {
		fields := strings.Fields(line)
		if len(fields) >= 2 && strings.EqualFold(fields[0], directive) {
			value, set = strings.Trim(fields[1], `"'`), true
		}
	}
	return value, set
}

// RedisMemoryBytes reads a redis.conf memory value as Redis does: a number with an
// optional unit k, kb, m, mb, g or gb (k = 1000, kb = 1024, ...), case-insensitive.
func RedisMemoryBytes(value string) (int64, error) {
	v := strings.ToLower(value)
	units := []struct {
		suffix string
		mult   int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1000}, {"m", 1000 * 1000}, {"g", 1000 * 1000 * 1000}, {"b", 1}}
	mult := int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("maxmemory %q is not a memory size (a number of bytes with an optional unit kb, mb or gb, for example 700mb)", value)
	}
	return n * mult, nil
}
