package redisarchive_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/internal/redisarchive"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// countingSink counts what it is given and keeps nothing, so that the heap measured is the
// follower's own.
type countingSink struct {
	mu              sync.Mutex
	bytes, segments int64
}

func (c *countingSink) Put(_ context.Context, _ string, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bytes += int64(len(data))
	c.segments++
	return nil
}
func (*countingSink) Get(context.Context, string) ([]byte, error)    { return nil, nil }
func (*countingSink) List(context.Context, string) ([]string, error) { return nil, nil }

// benchmarkWriter runs redis-benchmark against addr, an independent writer in its own
// process, and returns its requests per second.
func benchmarkWriter(b *testing.B, addr string, args ...string) float64 {
	b.Helper()
	host, port, _ := strings.Cut(addr, ":")
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		b.Skip(err)
	}
	out, err := exec.Command(bin, append([]string{"-h", host, "-p", port, "-t", "set", "-r", "1000000", "--csv"}, args...)...).Output()
	if err != nil {
		b.Fatalf("redis-benchmark: %v\n%s", err, out)
	}
	// "test","rps",...
	for line := range strings.SplitSeq(string(out), "\n") {
		if f := strings.Split(line, ","); len(f) > 1 && strings.Trim(f[0], `"`) == "SET" {
			rps, err := strconv.ParseFloat(strings.Trim(f[1], `"`), 64)
			if err == nil {
				return rps
			}
		}
	}
	b.Fatalf("no SET rate in redis-benchmark's output:\n%s", out)
	return 0
}

// BenchmarkFollowMemory archives what redis-benchmark writes (1 KiB values, pipelined)
// with the default segments (16 MiB, 500 ms) and reports the archive's throughput, the
// process's CPU time per MiB archived, and the heap at its peak, sampled every 5 ms above
// what the process held before: live (as of the last GC: what the follower holds) and in
// use (garbage not yet collected included).
func BenchmarkFollowMemory(b *testing.B) {
	src := testredis.Start(b, b.TempDir(), goredis.Options{}, "--repl-backlog-size", "64mb")
	_, base := base(b, src)
	sink := &countingSink{}
	f := follow(b, redisarchive.Options{Conn: rdbstream.Options{Addr: src.Addr}, From: redisarchive.Position{ReplID: base.ReplID, Offset: base.Offset},
		Sink: sink, SegmentAge: redisarchive.DefaultSegmentAge})
	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	runtime.GC()
	metrics.Read(samples)
	liveBefore, inuseBefore := samples[0].Value.Uint64(), samples[1].Value.Uint64()
	var live, inuse uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		s := slices.Clone(samples)
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			metrics.Read(s)
			live, inuse = max(live, s[0].Value.Uint64()), max(inuse, s[1].Value.Uint64())
		}
	}()
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	start := time.Now()
	b.ResetTimer()
	for range b.N {
		benchmarkWriter(b, src.Addr, "-n", "100000", "-d", "1024", "-P", "32", "-c", "4")
	}
	f.caughtUp(b, src.Client)
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	close(done)
	<-sampled
	took := time.Since(start)
	mib := float64(f.Progress().Received-base.Offset) / (1 << 20)
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	b.ReportMetric(mib/took.Seconds(), "MiB/s")
	b.ReportMetric(float64(cpu.Milliseconds())/mib, "cpu-ms/MiB")
	b.ReportMetric(float64(live-min(live, liveBefore))/(1<<20), "peak-live-heap-MiB")
	b.ReportMetric(float64(inuse-min(inuse, inuseBefore))/(1<<20), "peak-heap-inuse-MiB")
	b.ReportMetric(float64(sink.segments), "segments")
}

// BenchmarkFollowWriterThroughput runs an independent writer (redis-benchmark, 8
// connections, without and with pipelining) three times each with nothing following the
// master, with a follower, and with a real replica (redis-server --replicaof), in turn, and
// reports the medians and the slowdowns. The machine's cores are shared by the master, the
// writer, the follower (or replica) and whatever else runs: the follower's share of the
// slowdown is what it costs beyond a replica, which every shard already feeds.
func BenchmarkFollowWriterThroughput(b *testing.B) {
	for _, pipeline := range []string{"1", "16"} {
		b.Run("pipeline "+pipeline, func(b *testing.B) {
			src := testredis.Start(b, b.TempDir(), goredis.Options{}, "--repl-backlog-size", "64mb")
			host, port, _ := strings.Cut(src.Addr, ":")
			base(b, src) // the master's backlog, which a follower continues from
			var alone, follower, replica []float64
			write := func() float64 { return benchmarkWriter(b, src.Addr, "-n", "100000", "-c", "8", "-P", pipeline) }
			for range b.N {
				for range 3 {
					alone = append(alone, write())

					f := follow(b, redisarchive.Options{Conn: rdbstream.Options{Addr: src.Addr},
						From: redisarchive.Position{ReplID: replID(b, src.Client), Offset: replOffset(b, src.Client)},
						Sink: &countingSink{}, SegmentAge: redisarchive.DefaultSegmentAge})
					if err := testredis.WaitFor(b.Context(), func() bool { return f.Progress().Connections == 1 }); err != nil {
						b.Fatal(err)
					}
					follower = append(follower, write())
					f.caughtUp(b, src.Client)
					f.stop(b)

					r := testredis.Start(b, b.TempDir(), goredis.Options{}, "--replicaof", host, port)
					if err := testredis.WaitFor(b.Context(), func() bool {
						return strings.Contains(r.Client.Info(b.Context(), "replication").Val(), "master_link_status:up")
					}); err != nil {
						b.Fatal(err)
					}
					replica = append(replica, write())
					_ = r.Client.Shutdown(b.Context()).Err()
				}
			}
			ma, mf, mr := median(alone), median(follower), median(replica)
			b.Logf("SET rps alone %v, with a follower %v, with a replica %v", alone, follower, replica)
			b.ReportMetric(ma, "rps-alone")
			b.ReportMetric(mf, "rps-follower")
			b.ReportMetric(mr, "rps-replica")
			b.ReportMetric(100*(ma-mf)/ma, "follower-slowdown-%")
			b.ReportMetric(100*(ma-mr)/ma, "replica-slowdown-%")
		})
	}
}

func replID(b *testing.B, c *goredis.Client) string {
	info := c.Info(context.Background(), "replication").Val()
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "master_replid:"); ok {
			return v
		}
	}
	b.Fatal("no master_replid")
	return ""
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// timingSink records when each segment was accepted, with the keys of the SETs in it.
type timingSink struct {
	mu       sync.Mutex
	archived map[string]time.Time
}

func (s *timingSink) Put(_ context.Context, _ string, data []byte) error {
	now := time.Now()
	_, records, err := redisarchive.DecodeSegment(data)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range records {
		// *3 $3 SET $n key ...: the key is the fifth line.
		if lines := strings.SplitN(string(r.Command), "\r\n", 6); len(lines) > 4 && strings.EqualFold(lines[2], "set") {
			s.archived[lines[4]] = now
		}
	}
	return nil
}
func (*timingSink) Get(context.Context, string) ([]byte, error)    { return nil, nil }
func (*timingSink) List(context.Context, string) ([]string, error) { return nil, nil }

// BenchmarkFollowRecoveryPoint measures, for every write of a steady writer (one SET at a
// time, acknowledged), the time from its acknowledgement to the closing of the segment that
// holds it: what a crash of everything at the ack could lose. Reported for segment ages of
// 1 s and 500 ms: the p50, p99 and the maximum.
func BenchmarkFollowRecoveryPoint(b *testing.B) {
	for _, age := range []time.Duration{time.Second, 500 * time.Millisecond} {
		b.Run("segment age "+age.String(), func(b *testing.B) {
			src := testredis.Start(b, b.TempDir(), goredis.Options{})
			_, base := base(b, src)
			sink := &timingSink{archived: map[string]time.Time{}}
			f := follow(b, redisarchive.Options{Conn: rdbstream.Options{Addr: src.Addr}, From: redisarchive.Position{ReplID: base.ReplID, Offset: base.Offset},
				Sink: sink, SegmentAge: age})
			var lags []time.Duration
			for n := range b.N {
				w := startWriter(src.Client, fmt.Sprint("r", n))
				time.Sleep(3 * time.Second)
				acks := w.end(b)
				f.caughtUp(b, src.Client)
				sink.mu.Lock()
				for i, ack := range acks {
					at, ok := sink.archived[fmt.Sprintf("r%d:%d", n, i)]
					if !ok {
						b.Fatalf("r%d:%d never archived", n, i)
					}
					lags = append(lags, at.Sub(ack))
				}
				sink.mu.Unlock()
			}
			slices.Sort(lags)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(lags[len(lags)/2]), "p50-ms")
			b.ReportMetric(ms(lags[len(lags)*99/100]), "p99-ms")
			b.ReportMetric(ms(lags[len(lags)-1]), "max-ms")
			b.ReportMetric(float64(len(lags))/float64(b.N), "writes")
		})
	}
}

// BenchmarkReplayAgainstRedisCLI replays an archive of 200,000 SETs (what redis-benchmark
// wrote) onto a fresh server, and sends the same commands to another fresh server with
// redis-cli --pipe, and reports both rates.
func BenchmarkReplayAgainstRedisCLI(b *testing.B) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		b.Skip(err)
	}
	src := testredis.Start(b, b.TempDir(), goredis.Options{}, "--repl-backlog-size", "64mb")
	_, base := base(b, src)
	sink := &redisarchive.MemorySink{}
	f := follow(b, redisarchive.Options{Conn: rdbstream.Options{Addr: src.Addr}, From: redisarchive.Position{ReplID: base.ReplID, Offset: base.Offset}, Sink: sink})
	benchmarkWriter(b, src.Addr, "-n", "200000", "-d", "100", "-P", "32", "-c", "4")
	f.caughtUp(b, src.Client)
	f.stop(b)
	var pipe strings.Builder
	commands := 0
	if err := redisarchive.Scan(b.Context(), sink, cluster, shard, 1, base.Offset, func(c redisarchive.Command) error {
		if c.Name == "ping" || c.Name == "replconf" {
			return nil
		}
		fmt.Fprintf(&pipe, "*%d\r\n", len(c.Args))
		for _, a := range c.Args {
			fmt.Fprintf(&pipe, "$%d\r\n%s\r\n", len(a), a)
		}
		commands++
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	input := filepath.Join(b.TempDir(), "commands.resp")
	if err := os.WriteFile(input, []byte(pipe.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	var replayTook, cliTook time.Duration
	b.ResetTimer()
	for range b.N {
		dst := testredis.Start(b, b.TempDir(), goredis.Options{})
		start := time.Now()
		res, err := redisarchive.Replay(b.Context(), sink, redisarchive.ReplayOptions{Target: rdbstream.Options{Addr: dst.Addr},
			Cluster: cluster, Shard: shard, Timeline: 1, From: base.Offset})
		replayTook += time.Since(start)
		if err != nil || res.Commands != commands {
			b.Fatalf("Replay: %+v, %v; want %d commands", res, err, commands)
		}

		other := testredis.Start(b, b.TempDir(), goredis.Options{})
		host, port, _ := strings.Cut(other.Addr, ":")
		in, err := os.Open(input)
		if err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command(cli, "-h", host, "-p", port, "--pipe")
		cmd.Stdin = in
		start = time.Now()
		out, err := cmd.CombinedOutput()
		cliTook += time.Since(start)
		_ = in.Close()
		if err != nil {
			b.Fatalf("redis-cli --pipe: %v\n%s", err, out)
		}
		if a, c := dst.Client.DBSize(b.Context()).Val(), other.Client.DBSize(b.Context()).Val(); a != c {
			b.Fatalf("replay left %d keys, redis-cli --pipe %d", a, c)
		}
	}
	b.ReportMetric(float64(commands*b.N)/replayTook.Seconds(), "replay-cmds/s")
	b.ReportMetric(float64(commands*b.N)/cliTook.Seconds(), "redis-cli-pipe-cmds/s")
}
