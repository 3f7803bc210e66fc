package redisarchive

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// archive writes segments of the given commands into sink: each segment a list of
// commands, each command received at its time in ms; offsets follow the commands' bytes,
// with pad bytes of PINGs counted (not stored) before each segment.
func archive(t *testing.T, sink Sink, pad int64, segments ...[]timed) []Segment {
	t.Helper()
	var out []Segment
	offset := int64(0)
	for _, cmds := range segments {
		m := Segment{Cluster: "c", Shard: "s", Timeline: 1, ReplID: strings.Repeat("a", 40), Start: offset}
		offset += pad
		var body []byte
		for _, c := range cmds {
			raw := rdbstream.Encode(c.args...)
			offset += int64(len(raw))
			body = appendRecord(body, c.ms, offset, raw)
			if m.Commands == 0 {
				m.FirstTime = c.ms
			}
			m.LastTime = c.ms
			m.Commands++
		}
		m.End = offset
		data, m, err := EncodeSegment(m, body)
		if err != nil {
			t.Fatal(err)
		}
		if err := sink.Put(context.Background(), SegmentName("c", "s", 1, m.Start), data); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

type timed struct {
	ms   int64
	args []string
}

func cmd(ms int64, args ...string) timed { return timed{ms, args} }

func TestSegmentRoundTripAndCorruption(t *testing.T) {
	sink := &MemorySink{}
	segs := archive(t, sink, 14, []timed{cmd(1, "SET", "a", "1"), cmd(2, "DEL", "a")})
	name := SegmentName("c", "s", 1, 0)
	data, _ := sink.Get(t.Context(), name)
	m, records, err := DecodeSegment(data)
	if err != nil || m != segs[0] || len(records) != 2 || string(records[1].Command) != string(rdbstream.Encode("DEL", "a")) || records[1].Offset != m.End {
		t.Fatalf("DecodeSegment = %+v, %d records, %v", m, len(records), err)
	}
	for _, at := range []int{0, len(segmentMagic) + 5, len(data) - 1} {
		bad := []byte(string(data))
		bad[at] ^= 1
		if _, _, err := DecodeSegment(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("a byte flipped at %d of %d: %v, want ErrCorrupt", at, len(data), err)
		}
	}
	if _, _, err := DecodeSegment(data[:len(data)-3]); !errors.Is(err, ErrCorrupt) {
		t.Errorf("a truncated segment: %v", err)
	}
}

// TestScanNamesAGap: a segment missing in the middle of a timeline is ErrGap naming the
// offsets no segment holds; from the start of a later segment on, the archive reads.
func TestScanNamesAGap(t *testing.T) {
	sink := &MemorySink{}
	segs := archive(t, sink, 14, []timed{cmd(1, "SET", "a", "1")}, []timed{cmd(2, "SET", "b", "2")}, []timed{cmd(3, "SET", "c", "3")})
	count := func(from int64) (int, error) {
		n := 0
		err := Scan(t.Context(), sink, "c", "s", 1, from, func(Command) error { n++; return nil })
		return n, err
	}
	if n, err := count(0); n != 3 || err != nil {
		t.Fatalf("the whole archive: %d commands, %v", n, err)
	}
	_ = sink.Delete(t.Context(), SegmentName("c", "s", 1, segs[1].Start))
	n, err := count(0)
	want := "no segment for offsets " + itoa(segs[1].Start+1) + ".." + itoa(segs[2].Start)
	if !errors.Is(err, ErrGap) || !strings.Contains(err.Error(), want) || n != 1 {
		t.Fatalf("with the middle segment gone: %d commands, %v; want ErrGap with %q", n, err, want)
	}
	if n, err := count(segs[2].Start); n != 1 || err != nil {
		t.Fatalf("from the last segment's start: %d commands, %v", n, err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestReplayAppliesATransactionWhole: the target time falls inside a MULTI..EXEC (decided
// at its MULTI), and the archive ends inside another: the first is applied whole, the
// second not at all (DISCARD), and the result says where the replay stopped.
func TestReplayAppliesATransactionWhole(t *testing.T) {
	srv := testredis.Start(t, t.TempDir(), goredis.Options{})
	sink := &MemorySink{}
	archive(t, sink, 0,
		[]timed{cmd(100, "SELECT", "0"), cmd(100, "SET", "a", "1"), cmd(200, "MULTI"), cmd(200, "SET", "b", "2")},
		[]timed{cmd(202, "EXEC"), cmd(300, "SET", "c", "3"), cmd(400, "MULTI"), cmd(400, "SET", "d", "4")})
	ctx := t.Context()
	opts := ReplayOptions{Target: rdbstream.Options{Addr: srv.Addr}, Cluster: "c", Shard: "s", Timeline: 1, Until: time.UnixMilli(201)}
	res, err := Replay(ctx, sink, opts)
	if err != nil || res.Complete || res.Reached != time.UnixMilli(202).UTC() || res.Commands != 5 {
		t.Fatalf("to 201 ms: %+v, %v", res, err)
	}
	if got := srv.Client.MGet(ctx, "a", "b", "c").Val(); got[0] != "1" || got[1] != "2" || got[2] != nil {
		t.Fatalf("to 201 ms: a, b, c = %v", got)
	}
	if err := srv.Client.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	opts.Until = time.Time{}
	res, err = Replay(ctx, sink, opts)
	if err != nil || res.Complete || res.Reached != time.UnixMilli(300).UTC() {
		t.Fatalf("to the end: %+v, %v", res, err)
	}
	if got := srv.Client.MGet(ctx, "a", "b", "c", "d").Val(); got[2] != "3" || got[3] != nil {
		t.Fatalf("to the end: a, b, c, d = %v", got)
	}
	if err := srv.Client.Set(ctx, "after", 1, 0).Err(); err != nil {
		t.Fatalf("the target was left inside a transaction: %v", err)
	}
}

// TestReplayStopsAtARefusal: an error answer stops the replay and names the command.
func TestReplayStopsAtARefusal(t *testing.T) {
	srv := testredis.Start(t, t.TempDir(), goredis.Options{})
	sink := &MemorySink{}
	archive(t, sink, 0, []timed{cmd(1, "SET", "a", "1"), cmd(2, "LPUSH", "a", "x"), cmd(3, "SET", "b", "2")})
	_, err := Replay(t.Context(), sink, ReplayOptions{Target: rdbstream.Options{Addr: srv.Addr}, Cluster: "c", Shard: "s", Timeline: 1})
	if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("Replay = %v, want the WRONGTYPE refusal", err)
	}
}

// TestDirSink: segments kept as files read back as they were, listed in offset order, and
// a half-written file (.tmp) is never listed.
func TestDirSink(t *testing.T) {
	sink := DirSink{Dir: t.TempDir()}
	segs := archive(t, sink, 0, []timed{cmd(1, "SET", "a", "1")}, []timed{cmd(2, "SET", "b", "2")})
	if err := os.WriteFile(filepath.Join(sink.Dir, "c", "archive", "s", "00000001", "99.seg.tmp"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	names, err := sink.List(t.Context(), TimelinePrefix("c", "s", 1))
	if err != nil || len(names) != 2 || names[1] != SegmentName("c", "s", 1, segs[1].Start) {
		t.Fatalf("List = %v, %v", names, err)
	}
	var got []string
	if err := Scan(t.Context(), sink, "c", "s", 1, 0, func(c Command) error { got = append(got, string(c.Args[1])); return nil }); err != nil || strings.Join(got, ",") != "a,b" {
		t.Fatalf("Scan = %v, %v", got, err)
	}
	if names, err := (DirSink{Dir: filepath.Join(sink.Dir, "none")}).List(t.Context(), ""); err != nil || len(names) != 0 {
		t.Fatalf("List of a missing directory = %v, %v", names, err)
	}
}
