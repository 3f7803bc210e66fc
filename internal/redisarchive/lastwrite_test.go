package redisarchive

import (
	"testing"
	"time"
)

// TestLastWrite: the receive time of a timeline's last command is read from its last
// segment that holds one (a segment of PINGs only holds none); zero for a timeline without
// commands.
func TestLastWrite(t *testing.T) {
	sink := &MemorySink{}
	put := func(start, end int64, times ...int64) {
		t.Helper()
		var body []byte
		for i, ms := range times {
			body = appendRecord(body, ms, start+int64(i+1)*14, []byte("*1\r\n$4\r\nPING\r\n"))
		}
		m := Segment{Cluster: "c", Shard: "shard-000", Timeline: 1, ReplID: "r", Start: start, End: end, Commands: len(times)}
		if len(times) > 0 {
			m.FirstTime, m.LastTime = times[0], times[len(times)-1]
		}
		data, _, err := EncodeSegment(m, body)
		if err != nil {
			t.Fatal(err)
		}
		if err := sink.Put(t.Context(), SegmentName("c", "shard-000", 1, start), data); err != nil {
			t.Fatal(err)
		}
	}
	if last, err := LastWrite(t.Context(), sink, "c", "shard-000", 1); err != nil || !last.IsZero() {
		t.Fatalf("an empty timeline's last write: %v, %v; want none", last, err)
	}
	put(0, 28, 1000, 2000)
	put(28, 56, 3000, 4500)
	put(56, 70) // no command: the stream's own bytes only
	last, err := LastWrite(t.Context(), sink, "c", "shard-000", 1)
	if err != nil || !last.Equal(time.UnixMilli(4500).UTC()) {
		t.Errorf("last write %v, %v; want %v", last, err, time.UnixMilli(4500).UTC())
	}
}
