package status

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestStaleGuard(t *testing.T) {
	var g StaleGuard
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	if g.Stale(a, "1") {
		t.Error("nothing written yet, but version 1 is stale")
	}
	g.Wrote(a, "1") // a status write replaced 1 (with 2)
	g.Wrote(a, "2") // and a second one in the same reconcile replaced 2 (with 3)
	for _, v := range []string{"1", "2"} {
		if !g.Stale(a, v) {
			t.Errorf("version %s was written over, but is not stale", v)
		}
	}
	if g.Stale(b, "1") {
		t.Error("another cluster's version counts as stale")
	}
	if g.Stale(a, "3") || g.Stale(a, "1") {
		t.Error("once the cache shows the written version, older ones must be forgotten (no unbounded memory) and not block")
	}
}

// TestStaleGuardForget: an object that is gone leaves nothing behind, although the cache
// never showed the version its last write made.
func TestStaleGuardForget(t *testing.T) {
	var g StaleGuard
	a := types.NamespacedName{Namespace: "ns", Name: "a"}
	g.Wrote(a, "7")
	g.Forget(a)
	if n := len(g.replaced); n != 0 {
		t.Fatalf("%d objects kept after Forget, want 0", n)
	}
	if g.Stale(a, "7") {
		t.Error("a forgotten object's version still counts as stale")
	}
}
