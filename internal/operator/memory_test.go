package operator

import "testing"

func TestDecideGC(t *testing.T) {
	for _, tc := range []struct {
		name   string
		env    map[string]string
		cgroup string
		want   GCSettings
	}{
		{"no limit, nothing set", nil, "max\n", GCSettings{Percent: GCPercent}},
		{"no cgroup file", nil, "", GCSettings{Percent: GCPercent}},
		{"the shipped 256Mi limit", nil, "268435456\n", GCSettings{Percent: GCPercent, Limit: 241591910}},
		{"cgroup v1 without a limit", nil, "9223372036854771712\n", GCSettings{Percent: GCPercent}},
		{"GOGC set by the user", map[string]string{"GOGC": "200"}, "268435456", GCSettings{Limit: 241591910}},
		{"GOGC=off set by the user", map[string]string{"GOGC": "off"}, "max", GCSettings{}},
		{"GOMEMLIMIT set by the user", map[string]string{"GOMEMLIMIT": "100MiB"}, "268435456", GCSettings{Percent: GCPercent}},
		{"an unreadable limit", nil, "lots", GCSettings{Percent: GCPercent}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DecideGC(func(k string) string { return tc.env[k] }, tc.cgroup)
			if got != tc.want {
				t.Errorf("DecideGC = %+v, want %+v", got, tc.want)
			}
		})
	}
}
