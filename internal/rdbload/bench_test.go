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
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/tests/testmem"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
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
// count) with windows of 16 to 8192 commands in flight, one run each.
func BenchmarkLoadWindow(b *testing.B) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		b.Skip(err)
	}
	keys := lastBenchKeys(b)
	data := newBenchData(b, cli, keys)
	dst := testredis.Start(b, b.TempDir(), goredis.Options{ReadTimeout: time.Minute})
	for _, window := range []int{16, 128, 512, 4096, 8192} {
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

// shardData is the data set of newBenchData cut into shards by slot: shard i holds the keys
// of slots ranges[i], as a file of SET commands and as the RDB of a node loaded from it.
type shardData struct {
	keys   int
	ranges []rdbload.SlotRange
	protos []string
	rdbs   []string
}

// newShardData writes the SET commands of keys small string keys, cut into shards shards by
// slot (equal ranges, as a new cluster's masters hold them), and saves each shard's RDB.
func newShardData(b *testing.B, cli string, keys, shards int) shardData {
	b.Helper()
	dir := b.TempDir()
	d := shardData{keys: keys}
	files := make([]*os.File, shards)
	writers := make([]*bufio.Writer, shards)
	for i := range shards {
		d.ranges = append(d.ranges, rdbload.SlotRange{From: i * rdbload.Slots / shards, To: (i+1)*rdbload.Slots/shards - 1})
		d.protos = append(d.protos, filepath.Join(dir, fmt.Sprintf("set-%d.proto", i)))
		d.rdbs = append(d.rdbs, filepath.Join(dir, fmt.Sprintf("dump-%d.rdb", i)))
		f, err := os.Create(d.protos[i])
		if err != nil {
			b.Fatal(err)
		}
		files[i], writers[i] = f, bufio.NewWriter(f)
	}
	for i := range keys {
		k, v := "key:"+strconv.Itoa(i), "value-"+strconv.Itoa(i)
		slot, shard := rdbload.KeySlot(k), 0
		for d.ranges[shard].To < slot {
			shard++
		}
		fmt.Fprintf(writers[shard], "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(v), v)
	}
	src := testredis.Start(b, dir, goredis.Options{ReadTimeout: time.Minute})
	for i := range shards {
		if err := writers[i].Flush(); err != nil {
			b.Fatal(err)
		}
		if err := files[i].Close(); err != nil {
			b.Fatal(err)
		}
		emptied(b, src)
		pipe(b, cli, src.Addr, d.protos[i])
		if err := src.Client.Save(b.Context()).Err(); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "dump.rdb"), d.rdbs[i]); err != nil {
			b.Fatal(err)
		}
	}
	return d
}

// sideBySide runs do(i) for i in 0..n-1 at once and returns the wall time of them all.
func sideBySide(b *testing.B, n int, do func(i int)) time.Duration {
	b.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { do(i) })
	}
	wg.Wait()
	return time.Since(start)
}

// ownCPU is the CPU time, user and system, this process and its reaped children used so far,
// in seconds.
func ownCPU() float64 {
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) != nil {
		return 0
	}
	d := func(t syscall.Timeval) float64 { return float64(t.Nano()) / 1e9 }
	return d(self.Utime) + d(self.Stime) + d(children.Utime) + d(children.Stime)
}

// redisCPU is the CPU time node used so far, user and system, in seconds.
func redisCPU(b *testing.B, c *goredis.Client) float64 {
	b.Helper()
	info, err := c.Info(b.Context(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for line := range strings.SplitSeq(info, "\r\n") {
		for _, field := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, field); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("%s%s: %v", field, v, err)
				}
				sum += f
			}
		}
	}
	return sum
}

// BenchmarkLoadShardsAgainstRedisCLI restores MWO_BENCH_RDB_SHARD_KEYS small string keys
// (default 1,000,000) cut by slot into 3 shards, into 3 empty cluster-mode nodes side by
// side, as a RedisCluster's restore loads its masters, four ways: Load of each shard's RDB
// (its slots given, as the controller does) as a user who may MSET (strings go as MSETs of a
// slot's keys), Load as a user who may SET but not MSET (strings go as SET), Load as a user
// who may RESTORE but not SET (as the operator's own: every key goes as RESTORE), and
// redis-cli --pipe of each shard's SET commands. MWO_BENCH_RDB_HELD_PER_SLOT sets
// rdbload.HeldBytesPerSlot. Three alternating runs of each; it
// reports the medians, the Loads' ratios to the pipe, the nodes' CPU time per key under
// each, the first node's time per command, and the process's peak RSS over the first run of
// each Load. MWO_BENCH_RDB_SHARD_WINDOWS (say "2048,8192") adds Loads with SET of other
// windows, side by side with the default.
func BenchmarkLoadShardsAgainstRedisCLI(b *testing.B) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		b.Skip(err)
	}
	const shards = 3
	keys := 1_000_000
	if v := os.Getenv("MWO_BENCH_RDB_SHARD_KEYS"); v != "" {
		if keys, err = strconv.Atoi(v); err != nil || keys <= 0 {
			b.Fatalf("MWO_BENCH_RDB_SHARD_KEYS=%q: want a key count", v)
		}
	}
	if v := os.Getenv("MWO_BENCH_RDB_HELD_PER_SLOT"); v != "" {
		if rdbload.HeldBytesPerSlot, err = strconv.Atoi(v); err != nil || rdbload.HeldBytesPerSlot <= 0 {
			b.Fatalf("MWO_BENCH_RDB_HELD_PER_SLOT=%q: want a byte count", v)
		}
	}
	data := newShardData(b, cli, keys, shards)
	nodes := make([]*testredis.Server, shards)
	for i := range nodes {
		nodes[i] = testredis.StartClusterNode(b, b.TempDir(), goredis.Options{ReadTimeout: time.Minute},
			"--user", "restorer", "on", ">pw", "~*", "&*", "+@all", "-set",
			"--user", "setter", "on", ">pw", "~*", "&*", "+@all", "-mset")
	}
	// run empties the nodes, runs load(i) into each side by side, checks every key arrived,
	// and returns the wall time, the nodes' CPU time, the loaders' (this process's and its
	// reaped children's: Load's or redis-cli's), and the first node's time per call of
	// each command (INFO commandstats: executing it, without reading and parsing it).
	run := func(load func(i int)) (time.Duration, float64, float64, map[string]float64) {
		var cpu float64
		for _, n := range nodes {
			emptied(b, n)
			if err := n.Client.ConfigResetStat(b.Context()).Err(); err != nil {
				b.Fatal(err)
			}
			cpu -= redisCPU(b, n.Client)
		}
		loader := -ownCPU()
		took := sideBySide(b, shards, load)
		loader += ownCPU()
		var total int64
		for _, n := range nodes {
			cpu += redisCPU(b, n.Client)
			size, err := n.Client.DBSize(b.Context()).Result()
			if err != nil {
				b.Fatal(err)
			}
			total += size
		}
		if total != int64(keys) {
			b.Fatalf("the nodes hold %d keys, want %d", total, keys)
		}
		return took, cpu, loader, commandUsec(b, nodes[0].Client)
	}
	loadAs := func(user string, window int) func(i int) {
		return func(i int) {
			f, err := os.Open(data.rdbs[i])
			if err != nil {
				b.Error(err)
				return
			}
			defer func() { _ = f.Close() }()
			node := rdbstream.Options{Addr: nodes[i].Addr}
			if user != "" {
				node.Username, node.Password = user, "pw"
			}
			if _, err := rdbload.Load(b.Context(), rdbload.Options{Node: node, Slots: data.ranges[i : i+1], Window: window}, f); err != nil {
				b.Error(err)
			}
		}
	}
	type method struct {
		name string
		load func(i int)
	}
	methods := []method{
		{"load-mset", loadAs("", 0)},
		{"load-set", loadAs("setter", 0)},
		{"load-restore", loadAs("restorer", 0)},
		{"pipe", func(i int) { pipe(b, cli, nodes[i].Addr, data.protos[i]) }},
	}
	// MWO_BENCH_RDB_SHARD_WINDOWS adds Loads with SET of other windows (commands in flight).
	if v := os.Getenv("MWO_BENCH_RDB_SHARD_WINDOWS"); v != "" {
		for w := range strings.SplitSeq(v, ",") {
			window, err := strconv.Atoi(w)
			if err != nil || window <= 0 {
				b.Fatalf("MWO_BENCH_RDB_SHARD_WINDOWS=%q: want comma-separated windows", v)
			}
			methods = append(methods, method{"load-set-window-" + w, loadAs("", window)})
		}
	}
	took := map[string][]time.Duration{}
	cpu := map[string][]float64{}
	loaderCPU := map[string][]float64{}
	usec := map[string][]float64{}
	var rss int64
	for b.Loop() {
		for r := range 3 {
			for _, m := range methods {
				resetPeakRSS()
				t, c, l, cmds := run(m.load)
				loaderCPU[m.name] = append(loaderCPU[m.name], l)
				if r == 0 && m.name != "pipe" {
					rss = max(rss, peakRSS())
				}
				took[m.name], cpu[m.name] = append(took[m.name], t), append(cpu[m.name], c)
				for name, us := range cmds {
					usec[m.name+"-"+name] = append(usec[m.name+"-"+name], us)
				}
			}
		}
	}
	for _, m := range methods {
		b.Logf("%d keys in %d shards side by side, %s: %v (nodes' CPU %.2v s, loaders' %.2v s)", keys, shards, m.name, took[m.name], cpu[m.name], loaderCPU[m.name])
		b.ReportMetric(median(took[m.name]).Seconds(), m.name+"-s")
		b.ReportMetric(medianOf(loaderCPU[m.name])*1e6/float64(keys), "loader-cpu-us/key-"+m.name)
		b.ReportMetric(medianOf(cpu[m.name])*1e6/float64(keys), "redis-cpu-us/key-"+m.name)
		if m.name != "pipe" {
			b.ReportMetric(median(took[m.name]).Seconds()/median(took["pipe"]).Seconds(), m.name+"/pipe")
		}
	}
	b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MB")
	for name, us := range usec {
		b.ReportMetric(medianOf(us), "redis-us/"+name) // e.g. redis-us/load-set-set: a SET of Load's, as the node timed it
	}
}

// commandUsec is the time per call of the commands node ran since its last CONFIG RESETSTAT
// that write keys (INFO commandstats' usec_per_call, by lower-case command name).
func commandUsec(b *testing.B, c *goredis.Client) map[string]float64 {
	b.Helper()
	stats, err := c.Info(b.Context(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	usec := map[string]float64{}
	for line := range strings.SplitSeq(stats, "\r\n") {
		name, fields, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":")
		if !ok || !slices.Contains([]string{"set", "restore", "pexpireat"}, name) {
			continue
		}
		for field := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(field, "usec_per_call="); ok {
				us, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatalf("%s: %v", line, err)
				}
				if us > 0 { // 0: only refused (Load's SET probe, without SET in the ACL)
					usec[name] = us
				}
			}
		}
	}
	return usec
}

// medianOf is the middle of v.
func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
