package resources

import (
	"fmt"
	"strconv"
	"strings"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// RedisMinMajor is the oldest Redis major version the operator supports: it sends CLUSTER
// ADDSLOTSRANGE (Redis 7.0) and ACL SETUSER (6.0), and starts nodes with
// --cluster-announce-ip (4.0). Only 7.0 and later are tested.
const RedisMinMajor = 7

// RedisVersionProblem says why rc names a Redis older than the oldest supported, with the
// field to change and how; "" when it does not. Both spec.version (the version the user
// declares, even when spec.pod[0].middlewareImage names the image) and the tag of the
// image in use are read; a value that is not a version (latest, a digest, a name of the
// user's own) is trusted.
func RedisVersionProblem(rc *redisv1alpha1.RedisCluster) string {
	candidates := []struct{ field, value string }{{"spec.version", rc.Spec.Version}}
	if img := RedisPodSpec(rc).MiddlewareImage; img != "" {
		candidates = append(candidates, struct{ field, value string }{"spec.pod[0].middlewareImage", imageTag(img)})
	}
	for _, c := range candidates {
		major, minor, ok := leadingVersion(c.value)
		if !ok || major >= RedisMinMajor {
			continue
		}
		return fmt.Sprintf("%s names Redis %d.%d (%q), but this operator needs Redis %d.0 or later "+
			"(it sends CLUSTER ADDSLOTSRANGE, which Redis %d.0 added): set %s to %d.0.15 or later, for example 7.2.5; "+
			"until then the operator creates no pods and keeps running ones on their template",
			c.field, major, minor, c.value, RedisMinMajor, RedisMinMajor, c.field, RedisMinMajor)
	}
	return ""
}

// imageTag is the tag of an image reference, "" when it has none or is pinned by digest.
func imageTag(image string) string {
	if strings.Contains(image, "@") {
		return ""
	}
	name := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(name, ":")
	if !ok {
		return ""
	}
	return tag
}

// leadingVersion reads major.minor from the start of a tag ("3.2.8", "6.2-alpine", "7"),
// false when the tag does not start with a number.
func leadingVersion(tag string) (major, minor int, ok bool) {
	parts := strings.SplitN(tag, ".", 3)
	major, ok = leadingInt(parts[0])
	if !ok {
		return 0, 0, false
	}
	if len(parts) > 1 {
		minor, _ = leadingInt(parts[1])
	}
	return major, minor, true
}

// leadingInt is the number s starts with.
func leadingInt(s string) (int, bool) {
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(s[:end])
	return n, err == nil
}

// RedisRDBVersion is the newest RDB format the cluster's Redis reads (10 for 7.0, 11 for
// 7.2, 12 for 7.4 and later), from spec.pod[0].middlewareImage's tag when it has one, else
// spec.version; 0 when the version is not a number (a tag like "latest"), so unknown.
func RedisRDBVersion(rc *redisv1alpha1.RedisCluster) int {
	version := rc.Spec.Version
	if tag := imageTag(RedisPodSpec(rc).MiddlewareImage); tag != "" {
		version = tag
	}
	major, minor, ok := leadingVersion(version)
	switch {
	case !ok || major < RedisMinMajor:
		return 0
	case major == 7 && minor < 2:
		return 10
	case major == 7 && minor < 4:
		return 11
	default:
		return 12
	}
}
