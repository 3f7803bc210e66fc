package nodetls

import "testing"

// TestClusterIssuerAllowed: names and prefixes of --cluster-issuers.
func TestClusterIssuerAllowed(t *testing.T) {
	for _, tc := range []struct {
		allowed []string
		name    string
		want    bool
	}{
		{nil, "any", false},
		{[]string{"redis-ca"}, "redis-ca", true},
		{[]string{"redis-ca"}, "redis-ca-2", false},
		{[]string{"tenant-a-*"}, "tenant-a-ca", true},
		{[]string{"tenant-a-*"}, "tenant-b-ca", false},
		{[]string{"x", "tenant-*"}, "tenant-", true},
		{[]string{"*"}, "anything", true},
	} {
		if got := ClusterIssuerAllowed(tc.allowed, tc.name); got != tc.want {
			t.Errorf("ClusterIssuerAllowed(%q, %q) = %v, want %v", tc.allowed, tc.name, got, tc.want)
		}
	}
}
