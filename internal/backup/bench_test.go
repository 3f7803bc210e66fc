package backup_test

import (
	"fmt"
	"io"
	"maps"
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

	"github.com/middleware-operator/middleware-operator/internal/backup"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// BenchmarkStreamShardsAgainstRedisCLI copies three nodes side by side, as a RedisBackup
// copies three shards: with StreamShard into the object store (HTTPS), with rdbstream.Fetch
// alone into io.Discard, and with `redis-cli --rdb` to files, in turn. Each node holds
// MWO_BENCH_SHARD_KEYS keys (default 333,334, a third of the make bench cluster's 1,000,000)
// of 100 bytes, uncompressed (38 MB). Nodes run diskless sync without the 5 s delay, so the
// figures are the transfers alone. It reports the medians, and the CPU seconds this process
// (the operator's side of a copy) used per StreamShard round and per Fetch round.
func BenchmarkStreamShardsAgainstRedisCLI(b *testing.B) {
	keys := 333_334
	if v, err := strconv.Atoi(os.Getenv("MWO_BENCH_SHARD_KEYS")); err == nil && v > 0 {
		keys = v
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		b.Skip(err)
	}
	_, store := startStore(b)
	var nodes []*testredis.Server
	for range 3 {
		n := testredis.Start(b, b.TempDir(), goredis.Options{ReadTimeout: time.Minute}, "--enable-debug-command", "yes", "--rdbcompression", "no")
		if err := n.Client.Do(b.Context(), "DEBUG", "POPULATE", keys, "key", 100).Err(); err != nil {
			b.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	dir := b.TempDir()
	var size int64
	ways := []struct {
		name string
		copy func(run, i int) error
	}{
		{"streamshard", func(run, i int) error {
			res, _, err := backup.StreamShard(b.Context(), rdbstream.Options{Addr: nodes[i].Addr}, store, fmt.Sprintf("r%d/shard-%d.rdb", run, i))
			size = res.Bytes
			return err
		}},
		{"fetch-discard", func(_, i int) error {
			_, err := rdbstream.Fetch(b.Context(), rdbstream.Options{Addr: nodes[i].Addr}, io.Discard)
			return err
		}},
		{"redis-cli", func(_, i int) error {
			host, port, _ := strings.Cut(nodes[i].Addr, ":")
			out := filepath.Join(dir, fmt.Sprintf("cli-%d.rdb", i))
			defer func() { _ = os.Remove(out) }()
			if o, err := exec.CommandContext(b.Context(), cli, "-h", host, "-p", port, "--rdb", out).CombinedOutput(); err != nil {
				return fmt.Errorf("redis-cli --rdb: %w: %s", err, o)
			}
			return nil
		}},
	}
	wall, cpu := map[string][]float64{}, map[string][]float64{}
	run := 0
	for b.Loop() {
		for _, w := range ways {
			used := selfCPU()
			start := time.Now()
			if err := sideBySide(len(nodes), func(i int) error { return w.copy(run, i) }); err != nil {
				b.Fatal(err)
			}
			wall[w.name] = append(wall[w.name], time.Since(start).Seconds())
			cpu[w.name] = append(cpu[w.name], selfCPU()-used)
		}
		b.Logf("run %d (%.1f MB a node): %s", run, float64(size)/1e6, figures(wall, cpu, run))
		run++
	}
	for _, w := range ways {
		b.ReportMetric(median(wall[w.name]), w.name+"-s")
	}
	b.ReportMetric(median(cpu["streamshard"]), "streamshard-cpu-s")
	b.ReportMetric(median(cpu["fetch-discard"]), "fetch-cpu-s")
}

// figures renders one run's seconds, wall and this process's CPU, per way of copying.
func figures(wall, cpu map[string][]float64, run int) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(wall)) {
		parts = append(parts, fmt.Sprintf("%s %.2f s (%.2f CPU s here)", name, wall[name][run], cpu[name][run]))
	}
	return strings.Join(parts, ", ")
}

// selfCPU is the user and system CPU seconds this process has used.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// sideBySide runs do for 0..n-1 at once and returns the first error.
func sideBySide(n int, do func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = do(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
