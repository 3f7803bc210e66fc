package redistest

import "testing"

// TestKeySlot checks KeySlot against what redis-server 7.0 answered to CLUSTER KEYSLOT for
// each key (an empty hash tag counts as no tag).
func TestKeySlot(t *testing.T) {
	for key, want := range map[string]int{
		"foo": 12182, "bar": 5061, "w:0": 405, "w:12345": 8391, "{user1000}.following": 3443, "{}x": 10595, "": 0,
	} {
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, want %d", key, got, want)
		}
	}
}
