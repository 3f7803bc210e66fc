package resources

import (
	"strings"
	"testing"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

func TestRedisVersionProblem(t *testing.T) {
	cases := []struct {
		version, image string
		want           string // a part of the problem; "" for none
	}{
		{version: "3.2.8", want: `spec.version names Redis 3.2 ("3.2.8"), but this operator needs Redis 7.0 or later`},
		{version: "6.2-alpine", want: "Redis 6.2"},
		{version: "6", want: "Redis 6.0"},
		{version: "7.0.15"},
		{version: "7"},
		{version: "8.0.2"},
		{version: "latest"},
		{version: "bookworm"},
		{version: ""},
		{image: "registry.example.com:5000/redis:5.0.14", want: "spec.pod[0].middlewareImage names Redis 5.0"},
		{image: "registry.example.com:5000/redis:7.2.5", version: "7.2.5"},
		{image: "redis@sha256:0123456789abcdef", version: "7.0.15"},
		{image: "string", version: "3.2.8", want: "spec.version names Redis 3.2"}, // the seed's sample
		{image: "redis:7.2.5", version: "3.2.8", want: "set spec.version to 7.0.15 or later"},
		{image: "redis:6.2.14", version: "7.2.5", want: "spec.pod[0].middlewareImage names Redis 6.2"},
	}
	for _, tc := range cases {
		rc := &redisv1alpha1.RedisCluster{Spec: redisv1alpha1.RedisClusterSpec{Version: tc.version}}
		if tc.image != "" {
			rc.Spec.Pod = []redisv1alpha1.PodSpec{{MiddlewareImage: tc.image}}
		}
		got := RedisVersionProblem(rc)
		switch {
		case tc.want == "" && got != "":
			t.Errorf("version %q image %q: unexpected problem %q", tc.version, tc.image, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("version %q image %q: problem %q, want it to say %q", tc.version, tc.image, got, tc.want)
		case tc.want != "" && !strings.Contains(got, "set "):
			t.Errorf("version %q image %q: problem %q says no fix", tc.version, tc.image, got)
		}
	}
}
