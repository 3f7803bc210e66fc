package rdbstream_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// BenchmarkFetchAgainstRedisCLI times Fetch and `redis-cli --rdb` side by side on the same
// node, each writing the RDB to a file: MWO_BENCH_RDB_KEYS keys (default 1,000,000) of 100
// random-ish bytes, diskless and from disk. It reports each one's MB/s.
func BenchmarkFetchAgainstRedisCLI(b *testing.B) {
	keys := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("MWO_BENCH_RDB_KEYS")); err == nil && v > 0 {
		keys = v
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		b.Skip(err)
	}
	for _, diskless := range []string{"yes", "no"} {
		b.Run("diskless="+diskless, func(b *testing.B) {
			node := testredis.Start(b, b.TempDir(), goredis.Options{ReadTimeout: time.Minute}, "--enable-debug-command", "yes", "--repl-diskless-sync", diskless,
				"--rdbcompression", "no")
			if err := node.Client.Do(b.Context(), "DEBUG", "POPULATE", keys, "key", 100).Err(); err != nil {
				b.Fatal(err)
			}
			out := filepath.Join(b.TempDir(), "dump.rdb")
			var ours, theirs time.Duration
			var size int64
			for b.Loop() {
				f, err := os.Create(out)
				if err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				res, err := rdbstream.Fetch(b.Context(), rdbstream.Options{Addr: node.Addr}, f)
				_ = f.Close()
				if err != nil {
					b.Fatal(err)
				}
				ours += time.Since(start)
				size = res.Bytes
				host, port, _ := strings.Cut(node.Addr, ":")
				start = time.Now()
				if outp, err := exec.CommandContext(b.Context(), cli, "-h", host, "-p", port, "--rdb", out).CombinedOutput(); err != nil {
					b.Fatalf("redis-cli --rdb: %v: %s", err, outp)
				}
				theirs += time.Since(start)
			}
			n := float64(b.N)
			b.ReportMetric(float64(size)/1e6, "MB")
			b.ReportMetric(float64(size)*n/ours.Seconds()/1e6, "fetch-MB/s")
			b.ReportMetric(float64(size)*n/theirs.Seconds()/1e6, "redis-cli-MB/s")
		})
	}
}
