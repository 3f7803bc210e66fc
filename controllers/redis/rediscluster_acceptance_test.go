package redis

import (
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/loading"
)

// TestLossAcceptedBySaysWhichAnnotation: the DataLossAccepted Warning names the annotation
// the user set, and never claims accept-data-loss when only a reload was asked for.
func TestLossAcceptedBySaysWhichAnnotation(t *testing.T) {
	cases := map[string]struct {
		annotations map[string]string
		reloading   string
		want, never string
	}{
		"accept-data-loss": {annotations: map[string]string{AcceptDataLossAnnotation: "true"}, want: AcceptDataLossAnnotation + " is set"},
		"only the reload annotation": {annotations: map[string]string{loading.RestoreLostShardsAnnotation: "nightly"},
			want: "RedisBackup nightly", never: AcceptDataLossAnnotation},
		"a reload recorded, its annotation read": {annotations: map[string]string{}, reloading: "nightly",
			want: loading.RestoreLostShardsAnnotation + " names RedisBackup nightly", never: AcceptDataLossAnnotation},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := lossAcceptedBy(tc.annotations, tc.reloading)
			if !strings.Contains(got, tc.want) || (tc.never != "" && strings.Contains(got, tc.never)) {
				t.Errorf("%q, want it to say %q and not %q", got, tc.want, tc.never)
			}
		})
	}
}
