package rdbload_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/testmem"
	"github.com/middleware-operator/middleware-operator/internal/testredis"
)

// benchData is a data set of small string keys in two forms: a file of SET commands in the
// Redis protocol (for redis-cli --pipe) and the RDB of a node loaded from it.
type benchData struct {
	keys      int
	proto     string // the SET commands
	rdb       string // the RDB
	rdbBytes  int64
	protoSize int64
}

// newBenchData writes keys SET key:<i> value-<i> commands to a file, pipes them into a
// fresh node and saves its RDB.
func newBenchData(b *testing.B, cli string, keys int) benchData {
	b.Helper()
	dir := b.TempDir()
	d := benchData{keys: keys, proto: filepath.Join(dir, "set.proto"), rdb: filepath.Join(dir, "dump.rdb")}
	f, err := os.Create(d.proto)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	for i := range keys {
		k, v := "key:"+strconv.Itoa(i), "value-"+strconv.Itoa(i)
		fmt.Fprintf(w, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(v), v)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	src := testredis.Start(b, dir, goredis.Options{ReadTimeout: time.Minute})
	pipe(b, cli, src.Addr, d.proto)
	if err := src.Client.Save(b.Context()).Err(); err != nil {
		b.Fatal(err)
	}
	for path, size := range map[string]*int64{d.rdb: &d.rdbBytes, d.proto: &d.protoSize} {
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		*size = fi.Size()
	}
	return d
}

// pipe runs redis-cli --pipe with the commands of file against addr.
func pipe(b *testing.B, cli, addr, file string) {
	b.Helper()
	in, err := os.Open(file)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = in.Close() }()
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.CommandContext(b.Context(), cli, "-h", host, "-p", port, "--pipe")
	cmd.Stdin = in
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "errors: 0") {
		b.Fatalf("redis-cli --pipe: %v: %s", err, out)
	}
}

// loadFile runs Load of the file into addr and checks it restored every key.
func loadFile(b *testing.B, opts rdbload.Options, path string, keys int) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	res, err := rdbload.Load(b.Context(), opts, f)
	if err != nil || res.Restored != int64(keys) {
		b.Fatalf("%+v, %v", res, err)
	}
}

// emptied empties the node and returns its client.
func emptied(b *testing.B, node *testredis.Server) *goredis.Client {
	b.Helper()
	if err := node.Client.FlushAll(b.Context()).Err(); err != nil {
		b.Fatal(err)
	}
	return node.Client
}

// checkKeys fails unless the node holds keys keys.
func checkKeys(b *testing.B, c *goredis.Client, keys int) {
	b.Helper()
	if n, err := c.DBSize(b.Context()).Result(); err != nil || n != int64(keys) {
		b.Fatalf("DBSIZE %d (%v), want %d", n, err, keys)
	}
}

// median is the middle of ds.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// peakRSS returns the process's peak resident set since the last resetPeakRSS, in bytes
// (VmHWM), or -1 when the kernel does not say.
func peakRSS() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return -1
}

// resetPeakRSS sets the peak resident set to the current one (Linux 4.0+).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// BenchmarkLoadAgainstRedisCLI loads MWO_BENCH_RDB_LOAD_KEYS small string keys (default
// 100,000 and 1,000,000) into an empty redis-server with Load (from the RDB) and with
// redis-cli --pipe (from SET commands), three alternating runs each, and reports the
// medians; and the Go heap growth and the process's peak RSS during one Load.
func BenchmarkLoadAgainstRedisCLI(b *testing.B) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		b.Skip(err)
	}
	sizes := []int{100_000, 1_000_000}
	if v := os.Getenv("MWO_BENCH_RDB_LOAD_KEYS"); v != "" {
		sizes = nil
		for f := range strings.SplitSeq(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 {
				b.Fatalf("MWO_BENCH_RDB_LOAD_KEYS=%q: want comma-separated key counts", v)
			}
			sizes = append(sizes, n)
		}
	}
	for _, keys := range sizes {
		b.Run("keys="+strconv.Itoa(keys), func(b *testing.B) {
			data := newBenchData(b, cli, keys)
			dst := testredis.Start(b, b.TempDir(), goredis.Options{ReadTimeout: time.Minute})
			opts := rdbload.Options{Node: rdbstream.Options{Addr: dst.Addr}}
			var ours, theirs []time.Duration
			var heap, rss int64
			for b.Loop() {
				for run := range 3 {
					c := emptied(b, dst)
					start := time.Now()
					if run == 0 {
						resetPeakRSS()
						heap = testmem.HeapGrowth(func() { loadFile(b, opts, data.rdb, keys) })
						rss = peakRSS()
					} else {
						loadFile(b, opts, data.rdb, keys)
					}
					ours = append(ours, time.Since(start))
					checkKeys(b, c, keys)

					c = emptied(b, dst)
					start = time.Now()
					pipe(b, cli, dst.Addr, data.proto)
					theirs = append(theirs, time.Since(start))
					checkKeys(b, c, keys)
				}
			}
			b.Logf("%d keys: RDB %d bytes, protocol %d bytes; Load %v, redis-cli --pipe %v; heap growth %d KB, peak RSS %d MB",
				keys, data.rdbBytes, data.protoSize, ours, theirs, heap>>10, rss>>20)
			b.ReportMetric(median(ours).Seconds(), "load-s")
			b.ReportMetric(median(theirs).Seconds(), "redis-cli-pipe-s")
			b.ReportMetric(float64(keys)/median(ours).Seconds(), "load-keys/s")
			b.ReportMetric(float64(keys)/median(theirs).Seconds(), "pipe-keys/s")
			b.ReportMetric(float64(heap)/(1<<20), "heap-growth-MB")
			b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MB")
		})
	}
}

// lastBenchKeys is the last count of MWO_BENCH_RDB_LOAD_KEYS, 1,000,000 by default.
func lastBenchKeys(b *testing.B) int {
	v := os.Getenv("MWO_BENCH_RDB_LOAD_KEYS")
	if v == "" {
		return 1_000_000
	}
	if i := strings.LastIndexByte(v, ','); i >= 0 {
		v = v[i+1:]
	}
	keys, err := strconv.Atoi(v)
	if err != nil || keys <= 0 {
		b.Fatalf("MWO_BENCH_RDB_LOAD_KEYS=%q: want comma-separated key counts", v)
	}
	return keys
}

// BenchmarkLoadWindow times Load of 1,000,000 small keys (MWO_BENCH_RDB_LOAD_KEYS's last
// count) with windows of 16 to 4096 commands in flight, one run each.
func BenchmarkLoadWindow(b *testing.B) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		b.Skip(err)
	}
	keys := lastBenchKeys(b)
	data := newBenchData(b, cli, keys)
	dst := testredis.Start(b, b.TempDir(), goredis.Options{ReadTimeout: time.Minute})
	for _, window := range []int{16, 128, 512, 4096} {
		b.Run("window="+strconv.Itoa(window), func(b *testing.B) {
			var took time.Duration
			for b.Loop() {
				c := emptied(b, dst)
				start := time.Now()
				loadFile(b, rdbload.Options{Node: rdbstream.Options{Addr: dst.Addr}, Window: window}, data.rdb, keys)
				took += time.Since(start)
				checkKeys(b, c, keys)
			}
			b.ReportMetric(float64(keys)*float64(b.N)/took.Seconds(), "keys/s")
		})
	}
}

// BenchmarkReader times Reader alone over the RDB of 1,000,000 small keys (the last count of
// MWO_BENCH_RDB_LOAD_KEYS) held in memory: the parsing and framing Load adds to the node's
// own work.
func BenchmarkReader(b *testing.B) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		b.Skip(err)
	}
	keys := lastBenchKeys(b)
	data, err := os.ReadFile(newBenchData(b, cli, keys).rdb)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r := rdbload.NewReader(bytes.NewReader(data))
		n := 0
		for {
			_, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != keys {
			b.Fatalf("%d records, want %d", n, keys)
		}
	}
	b.ReportMetric(float64(keys)*float64(b.N)/b.Elapsed().Seconds(), "keys/s")
}
