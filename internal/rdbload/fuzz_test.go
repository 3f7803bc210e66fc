package rdbload

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/middleware-operator/middleware-operator/tests/fuzzcorpus"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
)

// readOutcome reads every record of r and sums them up as text (kind, key, payload's
// CRC-64, expiry, slot), with the error that ended the reading (nil at io.EOF) and the bytes
// read. It checks what a record must be whatever the input: a key's payload is framed with
// a CRC-64 that matches, and no record is larger than the Reader's limit.
func readOutcome(t *testing.T, r io.Reader) (string, int64, error) {
	rd := NewReader(r)
	var out strings.Builder
	for {
		rec, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out.String(), rd.BytesRead(), nil
		}
		if err != nil {
			return out.String(), rd.BytesRead(), err
		}
		if int64(len(rec.Key)+len(rec.Payload)) > DefaultMaxRecord {
			t.Fatalf("a record of %d bytes, over the %d limit", len(rec.Key)+len(rec.Payload), DefaultMaxRecord)
		}
		if rec.Kind == KindKey {
			p := rec.Payload
			if len(p) < 11 || binary.LittleEndian.Uint64(p[len(p)-8:]) != rdbstream.CRC64(0, p[:len(p)-8]) {
				t.Fatalf("key %q: a payload of %d bytes without its checksum", rec.Key, len(p))
			}
		}
		fmt.Fprintf(&out, "%d %q %x %d %d\n", rec.Kind, rec.Key, rdbstream.CRC64(0, rec.Payload), rec.ExpireAtMs, rec.Slot)
	}
}

// allocBound is the most the Reader may allocate for an input of n bytes: its read buffer
// and a few small ones, and what the bytes themselves make (a key and a payload growing by
// doubling, an LZF key expanding up to lzfMaxRatio times): never what a length claims.
func allocBound(n int) uint64 { return 512<<10 + uint64(lzfMaxRatio+16)*uint64(n) }

// FuzzReader reads any input as an RDB: it must end in io.EOF or in an error matching
// ErrCorrupt, ErrUnsupported or ErrTooLarge (the input itself never fails), never panic,
// allocate no more than allocBound of the input's length, and read the same records and the
// same error whether the input comes all at once or one byte per read. The seed corpus
// (testdata/fuzz/FuzzReader, written by TestWriteFuzzSeeds) holds the RDBs redis-server 7.0
// and 7.4 wrote, every value type and opcode, and crafted claims: lengths of 4 GiB and 2^62,
// counts of 2^48, LZF bombs, truncations.
func FuzzReader(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		recs, read, err := readOutcome(t, bytes.NewReader(data))
		runtime.ReadMemStats(&after)
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > allocBound(len(data)) {
			t.Fatalf("reading %d bytes allocated %d bytes, more than %d (error: %v)", len(data), alloc, allocBound(len(data)), err)
		}
		switch {
		case err == nil:
			if read != int64(len(data)) {
				t.Fatalf("the end after %d of %d bytes", read, len(data))
			}
		case !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrTooLarge):
			t.Fatalf("an error that names no cause: %v", err)
		case !strings.Contains(err.Error(), "at byte "):
			t.Fatalf("an error without its place: %v", err)
		}
		recs1, read1, err1 := readOutcome(t, iotest.OneByteReader(bytes.NewReader(data)))
		if recs1 != recs || fmt.Sprint(err1) != fmt.Sprint(err) || read1 != read {
			t.Fatalf("all at once: %d bytes, %v\n%s\none byte at a time: %d bytes, %v\n%s", read, err, recs, read1, err1, recs1)
		}
	})
}

// fuzzSeeds are the crafted inputs of FuzzReader's corpus, by name.
func fuzzSeeds() map[string][]byte {
	id := string(bytes.Repeat([]byte{1}, streamIDLen))
	str := func(k, v string) enc { return enc{}.b(typeString).s(k).s(v) }
	every := enc{}.b(opAux).s("redis-ver").s("7.4.1").b(opAux).s("ctime").b(0xC2, 0, 0xF1, 0x53, 0x65).
		b(opFunction2).s("#!lua name=lib\nredis.register_function('f', function() return 1 end)").
		b(opSelectDB).n(0).b(opResizeDB).n(12).n(1).b(opSlotInfo).n(1).n(12).n(1).
		b(opExpireTimeMs).ms(1700000000123).b(str("s", "v")...).
		b(opExpireTime, 1, 2, 3, 4).b(opIdle).n(7).b(opFreq, 3).b(str("int", "")...).b(typeString).s("i").b(0xC0, 7).
		b(typeString).s("lzf").b(0xC3).n(6).n(9).b(2, 'a', 'b', 'c', 4<<5, 2).
		b(typeList).s("l").n(2).s("a").s("b").b(typeSet).s("set").n(1).s("m").
		b(typeZSet).s("z").n(2).s("m").b(1, '1').s("n").b(253).b(typeZSet2).s("z2").n(1).s("m").ms(0).
		b(typeHash).s("h").n(1).s("f").s("v").b(typeListQuicklist2).s("q").n(2).n(1).s("plain").n(2).s("packed").
		b(typeHashListpackEx).s("hx").ms(1).s("lp").b(typeHashMetadata).s("hm").ms(1).n(1).n(0).s("f").s("v").
		b(typeStreamListpacks3).s("st").n(1).s(id).s("lp").n(3).n(1).n(2).n(1).n(0).n(0).n(0).n(3).
		n(1).s("g").n(1).n(2).n(1).n(1).b([]byte(id)...).ms(5).n(1).n(1).s("c").ms(1).ms(2).n(1).b([]byte(id)...)
	huge := func(n uint64) enc { return enc{}.b(0x80).b(binary.BigEndian.AppendUint32(nil, uint32(n))...) }
	return map[string][]byte{
		"every-type":              file(MaxVersion, every),
		"empty":                   file(10, nil),
		"no-checksum":             append(file(10, enc{}.b(str("k", "v")...))[:len(file(10, enc{}.b(str("k", "v")...)))-8], make([]byte, 8)...),
		"key-claim-4GiB":          file(MaxVersion, enc{}.b(typeString).b(huge(0xFFFFFFFF)...).s("v")),
		"key-claim-2^62":          file(MaxVersion, enc{}.b(typeString).b(0x81).b(binary.BigEndian.AppendUint64(nil, 1<<62)...).s("v")),
		"value-claim-4GiB":        file(MaxVersion, enc{}.b(typeString).s("k").b(huge(0xFFFFFFFF)...)),
		"value-claim-512MiB":      file(MaxVersion, enc{}.b(typeString).s("k").n(512<<20).s("xyz")),
		"function-claim-4GiB":     file(MaxVersion, enc{}.b(opFunction2).b(huge(0xFFFFFFFF)...)),
		"aux-claim-4GiB":          file(MaxVersion, enc{}.b(opAux).b(huge(0xFFFFFFFF)...)),
		"list-count-2^48":         file(MaxVersion, enc{}.b(typeList).s("k").n(1<<48).s("a")),
		"set-count-2^32":          file(MaxVersion, enc{}.b(typeSet).s("k").b(huge(0xFFFFFFFF)...).s("a")),
		"zset-count-2^40-nan":     file(MaxVersion, enc{}.b(typeZSet).s("k").n(1<<40).s("").b(253).s("").b(254)),
		"hash-count-4G":           file(MaxVersion, enc{}.b(typeHash).s("k").b(huge(0xFFFFFFFF)...).s("f").s("v")),
		"quicklist-count-4G":      file(MaxVersion, enc{}.b(typeListQuicklist2).s("k").b(huge(0xFFFFFFFF)...).n(2).s("lp")),
		"stream-counts-4G":        file(MaxVersion, enc{}.b(typeStreamListpacks3).s("k").b(huge(0xFFFFFFFF)...).s(id).s("lp")),
		"stream-pending-ids-2^48": file(MaxVersion, enc{}.b(typeStreamListpacks).s("k").n(0).n(0).n(0).n(0).n(1).s("g").n(0).n(0).n(0).n(1).s("c").ms(0).n(1<<48)),
		"ziplist-claim-4GiB":      file(MaxVersion, enc{}.b(typeHashZiplist).s("k").b(huge(0xFFFFFFFF)...)),
		"lzf-key-bomb":            file(MaxVersion, enc{}.b(typeString).b(0xC3).n(3).b(huge(500<<20)...).b(0, 'a', 0xE0).s("v")),
		"lzf-value-bomb":          file(MaxVersion, enc{}.b(typeString).s("k").b(0xC3).n(3).b(huge(0xFFFFFFFF)...).b(0, 'a', 0xE0)),
		"lzf-key-overrun":         file(MaxVersion, enc{}.b(typeString).b(0xC3).n(6).n(4).b(2, 'a', 'b', 'c', 4<<5, 2).s("v")),
		"lzf-key-compressed-4GiB": file(MaxVersion, enc{}.b(typeString).b(0xC3).b(huge(0xFFFFFFFF)...).n(3).b(2, 'a', 'b', 'c')),
		"truncated-in-key":        file(MaxVersion, enc{}.b(typeString).n(1000).s("short"))[:30],
		"bad-length-byte":         file(MaxVersion, enc{}.b(typeString).b(0x82)),
		"database-1":              file(MaxVersion, enc{}.b(opSelectDB).n(1).b(str("k", "v")...)),
		"module-value":            file(MaxVersion, enc{}.b(typeModule2).s("k").n(1)),
		"trailing-bytes":          append(file(10, enc{}.b(str("k", "v")...)), 0),
	}
}

// TestWriteFuzzSeeds writes FuzzReader's seed corpus, testdata/fuzz/FuzzReader, when
// MWO_RDBLOAD_FUZZSEEDS=1: fuzzSeeds, the real RDBs of testdata whole, and their first half.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("MWO_RDBLOAD_FUZZSEEDS") != "1" {
		t.Skip("MWO_RDBLOAD_FUZZSEEDS=1 writes the fuzz seed corpus")
	}
	seeds := fuzzSeeds()
	for _, v := range []string{"7.0.15", "7.4.1"} {
		data, err := os.ReadFile(filepath.Join("testdata", "redis-"+v+".rdb"))
		if err != nil {
			t.Fatal(err)
		}
		seeds["redis-"+v] = data
		seeds["redis-"+v+"-half"] = data[:len(data)/2]
	}
	if err := fuzzcorpus.Write("FuzzReader", seeds); err != nil {
		t.Fatal(err)
	}
}
