package backupstore

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

func TestBackoff(t *testing.T) {
	cases := map[int]time.Duration{
		-1: 0, 0: 0,
		1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second, 4: 40 * time.Second,
		6: 160 * time.Second, 7: 5 * time.Minute, 8: 5 * time.Minute, 1000: 5 * time.Minute,
	}
	for failures, want := range cases {
		if got := Backoff(failures); got != want {
			t.Errorf("Backoff(%d) = %s, want %s", failures, got, want)
		}
	}
}

// TestFailuresBackOffAndReportOnce: a step failing the same way is held back for its
// back-off and reported once; another message is reported again; success starts over.
func TestFailuresBackOffAndReportOnce(t *testing.T) {
	var f Failures
	k := FailureKey{Object: types.NamespacedName{Namespace: "ns", Name: "c"}, What: "restore shard 1"}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	steps := []struct {
		at       time.Duration // since now
		message  string
		wait     time.Duration
		distinct bool
	}{
		{0, "checksum", 5 * time.Second, true},
		{5 * time.Second, "checksum", 10 * time.Second, false},
		{15 * time.Second, "checksum", 20 * time.Second, false},
		{35 * time.Second, "access denied", 40 * time.Second, true},
	}
	for i, s := range steps {
		if left, _ := f.Waiting(k, now.Add(s.at)); left != 0 {
			t.Fatalf("step %d: still waiting %s when the back-off is over", i, left)
		}
		wait, distinct := f.Fail(k, s.message, now.Add(s.at))
		if wait != s.wait || distinct != s.distinct {
			t.Errorf("step %d: wait %s distinct %t, want %s %t", i, wait, distinct, s.wait, s.distinct)
		}
		if left, msg := f.Waiting(k, now.Add(s.at+time.Second)); left != s.wait-time.Second || msg != s.message {
			t.Errorf("step %d: a second later waiting %s (%q), want %s (%q)", i, left, msg, s.wait-time.Second, s.message)
		}
	}
	f.Succeeded(k)
	if _, distinct := f.Fail(k, "checksum", now.Add(time.Hour)); !distinct || f.Count(k) != 1 {
		t.Errorf("after a success a failure is distinct %t with count %d, want true and 1", distinct, f.Count(k))
	}
	f.Forget(k.Object)
	if left, _ := f.Waiting(k, now.Add(time.Hour)); left != 0 || f.Count(k) != 0 {
		t.Errorf("a forgotten object still waits %s", left)
	}
}
