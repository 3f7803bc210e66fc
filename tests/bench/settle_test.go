package bench

import "testing"

func TestSettleTraceOf(t *testing.T) {
	rolled := map[string]float64{"a": 10, "b": 12, "c": 30, "d": 31}
	settled := map[string]float64{"a": 10.2, "b": 12, "c": 32.5, "d": 30.9} // d settled before its rollout was seen: 0
	got := settleTraceOf(rolled, settled)
	if got.RolledOut != 31 {
		t.Errorf("RolledOut %.1f, want 31 (the last Deployment)", got.RolledOut)
	}
	if got.LagMax != 2.5 || got.Over1s != 1 {
		t.Errorf("LagMax %.2f and %d over 1 s, want 2.5 and 1 (c)", got.LagMax, got.Over1s)
	}
	if got.LagP50 > 0.21 || got.LagP50 < 0 {
		t.Errorf("LagP50 %.2f, want at most 0.2", got.LagP50)
	}
	if none := settleTraceOf(map[string]float64{"a": 1}, nil); none.LagMax != 0 || none.RolledOut != 1 {
		t.Errorf("with no status settled: %+v, want RolledOut 1 and no lag", none)
	}
}
