package rdbload

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// repeat is an input of a prefix, then unit over and over up to n bytes in all: a large
// RDB that is never held in memory.
type repeat struct {
	prefix, unit []byte
	at, n        int64
}

func (r *repeat) Read(p []byte) (int, error) {
	if r.at >= r.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.n-r.at)]
	k := 0
	for k < len(p) {
		var c int
		if pre := int64(len(r.prefix)); r.at < pre {
			c = copy(p[k:], r.prefix[r.at:])
		} else {
			c = copy(p[k:], r.unit[(r.at-pre)%int64(len(r.unit)):])
		}
		k += c
		r.at += int64(c)
	}
	return k, nil
}

// header is the front of an RDB of version 12.
var header = []byte("REDIS0012")

// u32 is a 32-bit RDB length.
func u32(n uint32) enc { return binary.BigEndian.AppendUint32(enc{0x80}, n) }

// TestHugeClaims: a length or count claiming more than the record limit, or an LZF string
// claiming more than LZF can expand, fails at the claim, naming it, whatever follows; bytes
// that do arrive are held only up to the limit; a claim beyond the input's end costs only the
// bytes that are there.
func TestHugeClaims(t *testing.T) {
	mib := bytes.Repeat([]byte{'x'}, 1<<20)
	cases := map[string]struct {
		input     io.Reader
		maxRecord int64
		err       error
		text      string
		maxAlloc  uint64 // bytes allocated while reading
		maxRead   int64  // bytes consumed
	}{
		"a key length claim of 4 GiB, and 80 MiB behind it": {
			input: &repeat{prefix: append(enc(header).b(typeString), u32(0xFFFFFFFF)...), unit: mib, n: 80 << 20},
			err:   ErrTooLarge, text: "key length claim 4294967295 exceeds the 32 MiB limit", maxAlloc: 256 << 10, maxRead: 32,
		},
		"a string value claiming 4 GiB": {
			input: &repeat{prefix: append(enc(header).b(typeString).s("k"), u32(0xFFFFFFFF)...), unit: mib, n: 80 << 20},
			err:   ErrTooLarge, text: "a length claim of 4294967295 bytes in the value exceeds the 32 MiB limit", maxAlloc: 256 << 10, maxRead: 32,
		},
		"a string value of 512 MiB": {
			input: &repeat{prefix: enc(header).b(typeString).s("k").n(512 << 20), unit: mib, n: 600 << 20},
			err:   ErrTooLarge, text: "a length claim of 536870912 bytes", maxAlloc: 256 << 10, maxRead: 32,
		},
		"a list of 512 elements of 1 MiB (512 MiB)": {
			input: &repeat{prefix: enc(header).b(typeList).s("k").n(512), unit: append(enc{}.n(1<<20), mib...), n: 600 << 20},
			err:   ErrTooLarge, text: "exceeds the 32 MiB limit", maxAlloc: 5 * DefaultMaxRecord / 2, maxRead: DefaultMaxRecord + 2<<20,
		},
		"a sorted set of 2^40 empty members, NaN scores, over a 1 MiB limit": {
			input: &repeat{prefix: enc(header).b(typeZSet).s("k").n(1 << 40), unit: []byte{0, 253}, n: 80 << 20}, maxRecord: 1 << 20,
			err: ErrTooLarge, text: "over the 1 MiB limit", maxAlloc: 5 << 19, maxRead: 2 << 20,
		},
		"a function library claiming 4 GiB": {
			input: &repeat{prefix: append(enc(header).b(opFunction2), u32(0xFFFFFFFF)...), unit: mib, n: 80 << 20},
			err:   ErrTooLarge, text: "function library length claim 4294967295", maxAlloc: 256 << 10, maxRead: 32,
		},
		"an LZF key of 500 MiB from 3 bytes": {
			input: bytes.NewReader(append(enc(header).b(typeString, 0xC3).n(3), u32(500<<20).b(0, 'a', 0xE0)...)),
			err:   ErrCorrupt, text: "compression bomb", maxAlloc: 256 << 10, maxRead: 32,
		},
		"an LZF key of 100 MiB from 2 MiB": {
			input: &repeat{prefix: append(enc(header).b(typeString, 0xC3).n(2<<20), u32(100<<20)...), unit: mib, n: 80 << 20},
			err:   ErrTooLarge, text: "key length claim 104857600", maxAlloc: 256 << 10, maxRead: 32,
		},
		"an LZF value claiming 4 GiB uncompressed": {
			input: bytes.NewReader(append(enc(header).b(typeString).s("k").b(0xC3).n(1<<20), u32(0xFFFFFFFF)...)),
			err:   ErrCorrupt, text: "more than Redis's largest string", maxAlloc: 256 << 10, maxRead: 32,
		},
		"a key claiming 1 MiB, 10 bytes there": {
			input: bytes.NewReader(enc(header).b(typeString).n(1 << 20).b([]byte("0123456789")...)),
			err:   ErrCorrupt, text: "truncated", maxAlloc: 256 << 10, maxRead: 1 << 20,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := NewReader(tc.input)
			r.SetMaxRecord(tc.maxRecord)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := r.Next()
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("%v (%d bytes read, %d KiB allocated)", err, r.BytesRead(), alloc>>10)
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("error %v, want %v with %q", err, tc.err, tc.text)
			}
			if alloc > tc.maxAlloc || r.BytesRead() > tc.maxRead {
				t.Fatalf("%d bytes allocated, %d read; want at most %d and %d", alloc, r.BytesRead(), tc.maxAlloc, tc.maxRead)
			}
		})
	}
}

// TestBigRecordsOneAtATime: two gated readers hold one record larger than 1 MiB at a time;
// the second waits until the first reads on, and a cancelled wait fails with its context's
// error.
func TestBigRecordsOneAtATime(t *testing.T) {
	data := file(MaxVersion, enc{}.b(typeString).s("big").s(strings.Repeat("v", 2<<20)).b(typeString).s("small").s("v"))
	gated := func(ctx context.Context) *Reader {
		r := NewReader(bytes.NewReader(data))
		r.gated(ctx)
		t.Cleanup(r.release)
		return r
	}
	first := gated(t.Context())
	if _, err := first.Next(); err != nil {
		t.Fatal(err)
	}
	second := gated(t.Context())
	got := make(chan error, 1)
	go func() {
		_, err := second.Next()
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("a second large record was read while the first was held (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	if rec, err := first.Next(); err != nil || string(rec.Key) != "small" {
		t.Fatalf("%v, want the small key", err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the second large record, once the first is gone: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := gated(ctx).Next(); !errors.Is(err, context.Canceled) {
		t.Fatalf("a wait cancelled: %v, want context.Canceled", err)
	}
}

// rssCases are the inputs TestPeakRSS reads, each in a process of its own: the outcome it
// must end in, and the most its peak RSS may rise while reading it. long ones are left out
// under -short.
var rssCases = map[string]struct {
	input func() io.Reader
	err   error
	bound int64
	long  bool
}{
	"a key length claim of 4 GiB with 4 GiB behind it": {
		input: func() io.Reader {
			return &repeat{prefix: append(enc(header).b(typeString), u32(0xFFFFFFFF)...), unit: bytes.Repeat([]byte{'k'}, 1<<20), n: 4 << 30}
		},
		err: ErrTooLarge, bound: 8 << 20,
	},
	"a string value of 512 MiB": {
		input: func() io.Reader {
			return &repeat{prefix: enc(header).b(typeString).s("k").n(512 << 20), unit: bytes.Repeat([]byte{'v'}, 1<<20), n: 513 << 20}
		},
		err: ErrTooLarge, bound: 8 << 20,
	},
	"a list of 512 MiB in elements of 1 MiB": {
		input: func() io.Reader {
			unit := append(enc{}.n(1<<20), bytes.Repeat([]byte{'v'}, 1<<20)...)
			return &repeat{prefix: enc(header).b(typeList).s("k").n(512), unit: unit, n: 513 << 20}
		},
		err: ErrTooLarge, bound: 3 * DefaultMaxRecord, long: true,
	},
	"a string value of DefaultMaxRecord, the largest record": {
		input: func() io.Reader {
			// The key, the type, the value's length, then the version and checksum.
			v := DefaultMaxRecord - 1 - 1 - 5 - trailerLen
			return io.MultiReader(bytes.NewReader(enc(header).b(typeString).s("k").n(uint64(v))),
				&repeat{unit: bytes.Repeat([]byte{'v'}, 1<<20), n: int64(v)},
				bytes.NewReader(append([]byte{opEOF}, make([]byte, 8)...))) // no checksum (rdbchecksum no)
		},
		bound: 3 * DefaultMaxRecord, long: true,
	},
}

// rssCaseEnv names the case a child process of TestPeakRSS reads.
const rssCaseEnv = "MWO_RDBLOAD_RSS_CASE"

// TestPeakRSS reads each of rssCases in a child process with the operator's GOGC (25), and
// checks its outcome and how far its peak RSS (VmHWM) rose above the RSS before reading: a
// claim costs nothing, a 512 MiB value is refused, and the largest record admitted costs
// about twice its size.
func TestPeakRSS(t *testing.T) {
	if name := os.Getenv(rssCaseEnv); name != "" {
		readRSSCase(name)
		return
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc/self/status: ", err)
	}
	for name, tc := range rssCases {
		t.Run(name, func(t *testing.T) {
			if tc.long && testing.Short() {
				t.Skip("reads DefaultMaxRecord (32 MiB); left out under -short")
			}
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run", "^TestPeakRSS$")
			cmd.Env = append(os.Environ(), rssCaseEnv+"="+name, "GOGC=25")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			var before, peak int64
			var outcome string
			for line := range strings.SplitSeq(string(out), "\n") {
				if rest, ok := strings.CutPrefix(line, "rss "); ok {
					f := strings.SplitN(rest, " ", 3)
					before, _ = strconv.ParseInt(f[0], 10, 64)
					peak, _ = strconv.ParseInt(f[1], 10, 64)
					outcome = f[2]
				}
			}
			t.Logf("%s; RSS %d MiB before, peak %d MiB (+%d MiB)", outcome, before>>20, peak>>20, (peak-before)>>20)
			want := "<nil>"
			if tc.err != nil {
				want = tc.err.Error()
			}
			if !strings.Contains(outcome, want) || peak == 0 {
				t.Fatalf("outcome %q, want %q", outcome, want)
			}
			if peak-before > tc.bound {
				t.Fatalf("the peak RSS rose by %d MiB, more than %d", (peak-before)>>20, tc.bound>>20)
			}
		})
	}
}

// readRSSCase reads rssCases[name] to its end and prints "rss <RSS before> <peak RSS>
// <outcome>".
func readRSSCase(name string) {
	input := rssCases[name].input()
	runtime.GC()
	before := procStatus("VmRSS:")
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // VmHWM := VmRSS
	r := NewReader(input)
	var err error
	for err == nil {
		_, err = r.Next()
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	fmt.Printf("rss %d %d %v\n", before, procStatus("VmHWM:"), err)
}

// procStatus is a field of /proc/self/status in bytes, 0 when unknown.
func procStatus(field string) int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
