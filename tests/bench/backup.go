package bench

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/redispods"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// BackupFigures is what RunBackup measured for one number of keys. Times are in seconds,
// one entry per run.
type BackupFigures struct {
	// Keys is the number of keys (100-byte values) in the 3-master, 6-node cluster; Bytes
	// the backup's size (the three RDB files).
	Keys  int
	Bytes int64
	// Formed is how long the source cluster took from its creation to Ready, empty.
	Formed float64
	// Backup is each RedisBackup's status.startedAt to status.completedAt (every shard
	// streamed to the store, the slot map read again, the manifest written), in whole
	// seconds as the status keeps them; BackupSeen from its creation to the bench seeing it
	// Completed (polled every 100 ms), the figure compared.
	Backup, BackupSeen []float64
	// RDB is `redis-cli --rdb` of the same three source nodes, run side by side, to files.
	RDB []float64
	// Pipe is loading the keys into an empty cluster with `redis-cli --pipe`, one per
	// master side by side; PipeShard the slowest master's pipe of each run.
	Pipe []float64
	// Restore is a restoring cluster's creation to Ready with its restore completed;
	// RestoreLoad the part from the first restored key seen on a master to the last shard
	// loaded; RestoreShards each shard's load in the last run (first key to all keys).
	Restore, RestoreLoad, RestoreShards []float64
	// The operator process's resident set: IdleRSS before the first backup, and the peak
	// (VmHWM, reset before each run) over the backups and over the restores. HeapPeak* are
	// the largest go_memstats_heap_inuse_bytes sampled every 250 ms during them.
	IdleRSS, BackupPeakRSS, RestorePeakRSS, BackupPeakHeap, RestorePeakHeap uint64
	// BackupCPU and RDBCPU are the CPU seconds each side used, per run: the operator, the
	// object store, the source's redis-servers (with their snapshot forks) and redis-cli.
	BackupCPU, RDBCPU []map[string]float64
	// Limits, in MB/s: a loopback TCP copy, a file written and fsynced on this disk, and
	// three objects of a shard's size put into the store side by side from memory.
	Loopback, Disk, StorePut float64
}

// backupNS is the namespace the backup bench works in.
const backupNS = "backup"

// RunBackup starts a fresh local cluster with real redis-server pods and an object store,
// runs the operator's binary, loads keys into a 3-master RedisCluster with redis-cli
// --pipe, then alternates runs RedisBackups with `redis-cli --rdb` of the same nodes, and
// runs restores into new clusters alternating with --pipe loads into empty ones.
func RunBackup(ctx context.Context, keys, runs int, logf func(string, ...any)) (BackupFigures, error) {
	f := BackupFigures{Keys: keys}
	rb, err := startRedisBench(ctx)
	if err != nil {
		return f, err
	}
	defer rb.stop()
	env := rb.env
	store, err := localcluster.StartObjectStore(ctx, localcluster.ObjectStoreOptions{Dir: env.Cluster.Dir + "/objectstore"})
	if err != nil {
		return f, err
	}
	defer store.Stop()
	b := &backupBench{env: env, op: rb.op, kubelet: rb.kubelet, store: store, logf: logf, work: env.Cluster.Dir + "/bench"}
	if err := b.setup(ctx); err != nil {
		return f, err
	}
	if err := b.measureLimits(ctx, &f); err != nil {
		return f, err
	}

	start := time.Now()
	source, err := b.emptyCluster(ctx, "source")
	if err != nil {
		return f, err
	}
	f.Formed = time.Since(start).Seconds()
	logf("an empty 6-node RedisCluster Ready %.1f s after its creation", f.Formed)
	if err := b.writeData(keys, source); err != nil {
		return f, err
	}
	if err := b.pipe(ctx, source, &f); err != nil {
		return f, err
	}
	time.Sleep(10 * time.Second) // replicas catch up; the operator settles
	if f.IdleRSS, _, _, err = rb.op.memory(); err != nil {
		return f, err
	}
	for i := range runs {
		if err := b.backup(ctx, fmt.Sprintf("b-%d", i), &f); err != nil {
			return f, err
		}
		if err := b.redisCLIRDB(ctx, source, &f); err != nil {
			return f, err
		}
	}
	for i := range runs {
		if i > 0 {
			empty, err := b.emptyCluster(ctx, fmt.Sprintf("pipe-%d", i))
			if err != nil {
				return f, err
			}
			if err := b.pipe(ctx, empty, &f); err != nil {
				return f, err
			}
			if err := b.deleteCluster(ctx, empty); err != nil {
				return f, err
			}
		}
		if err := b.restore(ctx, fmt.Sprintf("restored-%d", i), "b-0", &f); err != nil {
			return f, err
		}
	}
	return f, nil
}

// backupBench is the state of one RunBackup.
type backupBench struct {
	env     *testenv.Env
	op      *process
	kubelet *redispods.Kubelet
	store   *localcluster.ObjectStore
	logf    func(string, ...any)
	// work holds the pipe files and redis-cli's RDB files.
	work string
	// pipes are the protocol files of the keys, one per master of the source, in the order
	// of the masters' first slot.
	pipes []string
	// slotFile is the index in pipes of each slot's master.
	slotFile [rdbload.Slots]int
}

// setup creates the namespace, the store's Secrets and the work directory.
func (b *backupBench) setup(ctx context.Context) error {
	if err := namespace(ctx, b.env.Client, backupNS); err != nil {
		return err
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Namespace: backupNS, Name: "store"}, Data: map[string][]byte{
			backupstore.StoreAccessKeyIDKey: []byte(b.store.AccessKey), backupstore.StoreSecretAccessKeyKey: []byte(b.store.SecretKey)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: backupNS, Name: "store-ca"}, Data: map[string][]byte{backupstore.StoreCAKey: b.store.CA}},
	} {
		if err := b.env.Client.Create(ctx, s); err != nil {
			return err
		}
	}
	return os.MkdirAll(b.work, 0o755)
}

// emptyCluster creates a RedisCluster of 3 masters and 3 replicas and waits until it is Ready.
func (b *backupBench) emptyCluster(ctx context.Context, name string) (*redisv1alpha1.RedisCluster, error) {
	rc := redistest.NewCluster(backupNS, name, 6)
	rc.Spec.Finalizers = "foreground"
	if err := b.env.Client.Create(ctx, rc); err != nil {
		return nil, err
	}
	return b.waitReady(ctx, client.ObjectKeyFromObject(rc), false)
}

// waitReady waits up to 20 minutes until the cluster at key is Running and Ready (and, with
// restored, its restore completed).
func (b *backupBench) waitReady(ctx context.Context, key client.ObjectKey, restored bool) (*redisv1alpha1.RedisCluster, error) {
	rc := &redisv1alpha1.RedisCluster{}
	// Every 250 ms: each GET of the cluster costs the API server CPU on the cores a restore
	// loads on.
	_, err := waitForEvery(ctx, time.Now(), key.Name+" Ready", 250*time.Millisecond, func(ctx context.Context) (bool, error) {
		if err := b.env.Client.Get(ctx, key, rc); err != nil {
			return false, err
		}
		return isReady(rc) && (!restored || rc.Status.Restore != nil && rc.Status.Restore.CompletedAt != nil), nil
	})
	return rc, err
}

// deleteCluster deletes rc (its volumes with it) and waits until it is gone.
func (b *backupBench) deleteCluster(ctx context.Context, rc *redisv1alpha1.RedisCluster) error {
	if err := b.env.Client.Delete(ctx, rc); err != nil {
		return err
	}
	_, err := waitFor(ctx, time.Now(), rc.Name+" deleted", func(ctx context.Context) (bool, error) {
		err := b.env.Client.Get(ctx, client.ObjectKeyFromObject(rc), &redisv1alpha1.RedisCluster{})
		return err != nil, client.IgnoreNotFound(err)
	})
	return err
}

// masters are the instances (ip:port) of rc's masters in the order of their first slot,
// and the slots of each.
func masters(rc *redisv1alpha1.RedisCluster) (addrs []string, slots [][]int) {
	nodes := slices.Clone(rc.Status.Nodes)
	nodes = slices.DeleteFunc(nodes, func(n redisv1alpha1.RedisNode) bool { return n.Type != "master" || n.Slots == "" })
	slices.SortFunc(nodes, func(a, c redisv1alpha1.RedisNode) int {
		return redistest.Slots(a.Slots)[0] - redistest.Slots(c.Slots)[0]
	})
	for _, n := range nodes {
		addrs = append(addrs, n.Instance)
		slots = append(slots, redistest.Slots(n.Slots))
	}
	return addrs, slots
}

// writeData writes the keys key:<i>, each with 100 random printable bytes, as Redis protocol
// (SET commands), one file per master of rc by the slot of each key.
func (b *backupBench) writeData(keys int, rc *redisv1alpha1.RedisCluster) error {
	addrs, slots := masters(rc)
	for i, s := range slots {
		for _, slot := range s {
			b.slotFile[slot] = i
		}
	}
	files := make([]*bufio.Writer, len(addrs))
	var closers []*os.File
	for i := range addrs {
		path := filepath.Join(b.work, fmt.Sprintf("shard-%d.resp", i))
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		closers = append(closers, f)
		files[i] = bufio.NewWriterSize(f, 1<<20)
		b.pipes = append(b.pipes, path)
	}
	r := rand.New(rand.NewPCG(28, 1))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/"
	value := make([]byte, 100)
	for i := range keys {
		key := fmt.Sprintf("key:%08d", i)
		for j := range value {
			value[j] = alphabet[r.IntN(len(alphabet))]
		}
		fmt.Fprintf(files[b.slotFile[rdbload.KeySlot(key)]], "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(value), value)
	}
	for i, w := range files {
		if err := w.Flush(); err != nil {
			return err
		}
		if err := closers[i].Close(); err != nil {
			return err
		}
	}
	return nil
}

// pipe loads the keys into rc (empty, with the source's slot map) with `redis-cli --pipe`,
// one per master side by side, and checks that the masters hold them all.
func (b *backupBench) pipe(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *BackupFigures) error {
	addrs, _ := masters(rc)
	if len(addrs) != len(b.pipes) {
		return fmt.Errorf("%s has %d masters, the data %d files", rc.Name, len(addrs), len(b.pipes))
	}
	pw, err := b.password(ctx, rc.Name)
	if err != nil {
		return err
	}
	cpu := b.cpu(ctx, rc.Name)
	start := time.Now()
	each, err := sideBySide(ctx, len(addrs), func(ctx context.Context, i int) error {
		in, err := os.Open(b.pipes[i])
		if err != nil {
			return err
		}
		defer func() { _ = in.Close() }()
		host, port, _ := strings.Cut(addrs[i], ":")
		cmd := exec.CommandContext(ctx, "redis-cli", "-h", host, "-p", port, "-a", pw, "--no-auth-warning", "--pipe")
		cmd.Stdin = in
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("redis-cli --pipe into %s: %w: %s", addrs[i], err, out)
		}
		if !strings.Contains(string(out), "errors: 0") {
			return fmt.Errorf("redis-cli --pipe into %s reports errors: %s", addrs[i], out)
		}
		return nil
	})
	if err != nil {
		return err
	}
	wall := time.Since(start).Seconds()
	used := cpuSince(cpu, b.cpu(ctx, rc.Name))
	n, err := b.masterKeys(ctx, rc, pw)
	if err != nil {
		return err
	}
	if n != int64(f.Keys) {
		return fmt.Errorf("%s holds %d keys after redis-cli --pipe, want %d", rc.Name, n, f.Keys)
	}
	f.Pipe = append(f.Pipe, wall)
	b.logf("redis-cli --pipe: %d keys into %s in %.2f s (masters side by side: %s); CPU s: %s", f.Keys, rc.Name, wall, seconds(each), cpuLine(used))
	return nil
}

// sideBySide runs do for 0..n-1 at once and returns how long each took.
func sideBySide(ctx context.Context, n int, do func(ctx context.Context, i int) error) ([]float64, error) {
	took := make([]float64, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			start := time.Now()
			errs[i] = do(ctx, i)
			took[i] = time.Since(start).Seconds()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return took, err
		}
	}
	return took, nil
}

// password is the generated password of the cluster name.
func (b *backupBench) password(ctx context.Context, name string) (string, error) {
	return clusterPassword(ctx, b.env.Client, redistest.NewCluster(backupNS, name, 6))
}

// masterKeys is the sum of DBSIZE over rc's masters.
func (b *backupBench) masterKeys(ctx context.Context, rc *redisv1alpha1.RedisCluster, pw string) (int64, error) {
	addrs, _ := masters(rc)
	var total int64
	for _, a := range addrs {
		n, err := dbsize(ctx, a, pw)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

func dbsize(ctx context.Context, addr, pw string) (int64, error) {
	c := goredis.NewClient(&goredis.Options{Addr: addr, Password: pw, DisableIdentity: true, Protocol: 2})
	defer func() { _ = c.Close() }()
	return c.DBSize(ctx).Result()
}

// backup takes the RedisBackup name of the source and records its time and the operator's
// memory meanwhile.
func (b *backupBench) backup(ctx context.Context, name string, f *BackupFigures) error {
	mem, err := b.watchMemory(ctx)
	if err != nil {
		return err
	}
	cpu := b.cpu(ctx, "source")
	rb := &redisv1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Namespace: backupNS, Name: name},
		Spec: redisv1alpha1.RedisBackupSpec{Cluster: "source", Destination: redisv1alpha1.ObjectStore{
			Endpoint: b.store.Endpoint, Bucket: b.store.Bucket, Region: b.store.Region, CredentialsSecret: "store", CASecret: "store-ca"}}}
	start := time.Now()
	if err := b.env.Client.Create(ctx, rb); err != nil {
		mem.stop()
		return err
	}
	_, err = waitFor(ctx, start, name+" Completed", func(ctx context.Context) (bool, error) {
		if err := b.env.Client.Get(ctx, client.ObjectKeyFromObject(rb), rb); err != nil {
			return false, err
		}
		if rb.Status.Phase == redisv1alpha1.BackupFailed {
			return false, fmt.Errorf("%s failed: %s", name, rb.Status.Reason)
		}
		return rb.Status.Phase == redisv1alpha1.BackupCompleted, nil
	})
	seen := time.Since(start).Seconds()
	used := cpuSince(cpu, b.cpu(ctx, "source"))
	rss, heap := mem.stop()
	if err != nil {
		return err
	}
	if rb.Status.Keys != int64(f.Keys) {
		return fmt.Errorf("%s has %d keys, want %d", name, rb.Status.Keys, f.Keys)
	}
	took := rb.Status.CompletedAt.Sub(rb.Status.StartedAt.Time).Seconds()
	f.Backup, f.BackupSeen, f.Bytes = append(f.Backup, took), append(f.BackupSeen, seen), rb.Status.Bytes
	f.BackupPeakRSS, f.BackupPeakHeap = max(f.BackupPeakRSS, rss), max(f.BackupPeakHeap, heap)
	f.BackupCPU = append(f.BackupCPU, used)
	b.logf("%s: %d keys, %d bytes in %d shards, %.2f s from start to completion (%.2f s from creation); operator peak RSS %d MiB, heap %d MiB; CPU s: %s; operator's timeline: %s",
		name, rb.Status.Keys, rb.Status.Bytes, len(rb.Status.Shards), took, seen, rss>>20, heap>>20, cpuLine(used), b.operatorLine("backup completed", name))
	return nil
}

// redisCLIRDB runs `redis-cli --rdb` of the nodes the first backup copied, side by side, each
// to a file, and removes the files.
func (b *backupBench) redisCLIRDB(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *BackupFigures) error {
	rb := &redisv1alpha1.RedisBackup{}
	if err := b.env.Client.Get(ctx, client.ObjectKey{Namespace: backupNS, Name: "b-0"}, rb); err != nil {
		return err
	}
	instance := map[string]string{}
	for _, n := range rc.Status.Nodes {
		instance[n.Name] = n.Instance
	}
	pw, err := b.password(ctx, rc.Name)
	if err != nil {
		return err
	}
	sizes := make([]int64, len(rb.Status.Shards))
	cpu := b.cpu(ctx, "source")
	start := time.Now()
	each, err := sideBySide(ctx, len(rb.Status.Shards), func(ctx context.Context, i int) error {
		out := filepath.Join(b.work, fmt.Sprintf("cli-%d.rdb", i))
		defer func() { _ = os.Remove(out) }()
		host, port, _ := strings.Cut(instance[rb.Status.Shards[i].Source], ":")
		if o, err := exec.CommandContext(ctx, "redis-cli", "-h", host, "-p", port, "-a", pw, "--no-auth-warning", "--rdb", out).CombinedOutput(); err != nil {
			return fmt.Errorf("redis-cli --rdb of %s: %w: %s", host, err, o)
		}
		st, err := os.Stat(out)
		if err == nil {
			sizes[i] = st.Size()
		}
		return err
	})
	if err != nil {
		return err
	}
	wall := time.Since(start).Seconds()
	used := cpuSince(cpu, b.cpu(ctx, "source"))
	f.RDB, f.RDBCPU = append(f.RDB, wall), append(f.RDBCPU, used)
	var total int64
	for _, s := range sizes {
		total += s
	}
	b.logf("redis-cli --rdb of the 3 source nodes side by side: %d bytes in %.2f s (%s); CPU s: %s", total, wall, seconds(each), cpuLine(used))
	return nil
}

// restore creates the cluster name restoring the RedisBackup from, waits until it is Ready
// and loaded, checks its keys, records the times and the operator's memory, and deletes it.
func (b *backupBench) restore(ctx context.Context, name, from string, f *BackupFigures) error {
	mem, err := b.watchMemory(ctx)
	if err != nil {
		return err
	}
	rc := redistest.NewCluster(backupNS, name, 6)
	rc.Spec.Finalizers = "foreground"
	rc.Spec.Restore = &redisv1alpha1.RestoreSpec{Backup: from}
	profile := "" // MWO_BENCH_CPUPROFILE: the operator's first 30 s of the restore, and its allocations
	if os.Getenv("MWO_BENCH_CPUPROFILE") != "" {
		profile = filepath.Join(testenv.RepoRoot(), "bin", "bench-restore-"+name+".pprof")
	}
	profiled := b.op.startCPUProfile(ctx, 30*time.Second, profile)
	stopBenchProfile := func() {}
	if profile != "" { // and what it allocated (the difference of these two), and this process's CPU
		if err := b.op.saveProfile(ctx, "allocs", profile+".allocs-before"); err != nil {
			return err
		}
		if stopBenchProfile, err = startCPUProfile(profile + ".bench"); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := b.env.Client.Create(ctx, rc); err != nil {
		mem.stop()
		return err
	}
	loads := b.watchLoads(ctx, client.ObjectKeyFromObject(rc))
	formed := traceForming(ctx, b.env.Client, client.ObjectKeyFromObject(rc), 6, 3, func() (string, error) { return b.password(ctx, name) }, start)
	restored, err := b.waitReady(ctx, client.ObjectKeyFromObject(rc), true)
	took := time.Since(start).Seconds()
	shards := loads()
	milestones := formed()
	stopBenchProfile()
	rss, heap := mem.stop()
	if perr := profiled(); err == nil {
		err = perr
	}
	if profile != "" && err == nil {
		err = b.op.saveProfile(ctx, "allocs", profile+".allocs-after")
	}
	if err != nil {
		return err
	}
	pw, err := b.password(ctx, name)
	if err != nil {
		return err
	}
	n, err := b.masterKeys(ctx, restored, pw)
	if err != nil {
		return err
	}
	if n != int64(f.Keys) || restored.Status.Restore.Keys != int64(f.Keys) {
		return fmt.Errorf("%s holds %d keys and restored %d, want %d", name, n, restored.Status.Restore.Keys, f.Keys)
	}
	first, last := shards.span()
	f.Restore, f.RestoreLoad, f.RestoreShards = append(f.Restore, took), append(f.RestoreLoad, last-first), shards.each()
	f.RestorePeakRSS, f.RestorePeakHeap = max(f.RestorePeakRSS, rss), max(f.RestorePeakHeap, heap)
	b.logf("%s: %d keys restored, Ready %.2f s after creation; keys loading from %.2f s to %.2f s (per shard: %s); operator peak RSS %d MiB, heap %d MiB; CPU s while loading: %s",
		name, n, took, first, last, seconds(shards.each()), rss>>20, heap>>20, cpuLine(cpuSince(shards.cpuFirst, shards.cpuLast)))
	b.logf("%s formed, seen from outside, after its creation: %s; first key %.2f s, last key %.2f s, Ready %.2f s", name, milestones, first, last, took)
	return b.deleteCluster(ctx, restored)
}

// shardLoads are, per master, when (seconds after the watch started) its first key and
// its last were seen; and the CPU seconds used so far (cpu of the restoring cluster) when
// the first key was seen on any master and when the last change was.
type shardLoads struct {
	first, last       []float64
	cpuFirst, cpuLast map[string]float64
}

// span is the first key seen on any master and the last master complete.
func (s shardLoads) span() (first, last float64) {
	if len(s.first) == 0 {
		return 0, 0
	}
	return slices.Min(s.first), slices.Max(s.last)
}

// each is every master's load time.
func (s shardLoads) each() []float64 {
	out := make([]float64, len(s.first))
	for i := range out {
		out[i] = s.last[i] - s.first[i]
	}
	return out
}

// watchLoads polls the DBSIZE of the restoring cluster's masters every 100 ms, once they are
// known, and returns the function that stops and says when each master's keys started and
// stopped growing.
func (b *backupBench) watchLoads(ctx context.Context, key client.ObjectKey) func() shardLoads {
	ctx, cancel := context.WithCancel(ctx)
	start := time.Now()
	var out shardLoads
	done := make(chan struct{})
	go func() {
		defer close(done)
		var addrs []string
		var counters []*goredis.Client // one connection per master, kept: the bench shares the cores
		var readCPU func() map[string]float64
		defer func() {
			for _, c := range counters {
				_ = c.Close()
			}
		}()
		last := map[string]int64{}
		for ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			if addrs == nil {
				rc := &redisv1alpha1.RedisCluster{}
				if err := b.env.Client.Get(ctx, key, rc); err != nil {
					continue
				}
				if a, _ := masters(rc); len(a) == len(b.pipes) {
					p, err := b.password(ctx, key.Name)
					if err != nil {
						continue
					}
					addrs, readCPU = a, b.cpuReader(ctx, key.Name)
					for _, addr := range a {
						counters = append(counters, goredis.NewClient(&goredis.Options{Addr: addr, Password: p, DisableIdentity: true, Protocol: 2, PoolSize: 1}))
					}
					out.first, out.last = make([]float64, len(a)), make([]float64, len(a))
				}
				continue
			}
			for i, a := range addrs {
				n, err := counters[i].DBSize(ctx).Result()
				if err != nil || n == last[a] {
					continue
				}
				now := time.Since(start).Seconds()
				if last[a] == 0 {
					out.first[i] = now
				}
				out.last[i], last[a] = now, n
				out.cpuLast = readCPU()
				if out.cpuFirst == nil {
					out.cpuFirst = out.cpuLast
				}
			}
		}
	}()
	return func() shardLoads {
		cancel()
		<-done
		return out
	}
}

// memoryWatch samples the operator's Go heap while a run goes on; its peak resident set
// was reset at the start.
type memoryWatch struct {
	stop func() (rss, heap uint64)
}

// watchMemory resets the operator process's peak resident set (VmHWM, through clear_refs)
// and samples its heap in use every 250 ms until stop, which returns the peak of each.
func (b *backupBench) watchMemory(ctx context.Context) (*memoryWatch, error) {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", b.op.cmd.Process.Pid), []byte("5"), 0); err != nil {
		return nil, fmt.Errorf("while resetting the operator's peak RSS: %w", err)
	}
	if rss, _, _, err := b.op.memory(); err == nil {
		b.logf("operator RSS at the start of the run: %d MiB", rss>>20)
	}
	ctx, cancel := context.WithCancel(ctx)
	var peak uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if families, err := b.op.scrape(ctx); err == nil {
				heap, _ := goMemory(families)
				peak = max(peak, heap)
			}
			time.Sleep(time.Second) // a scrape costs both processes CPU the load would use
		}
	}()
	return &memoryWatch{stop: func() (uint64, uint64) {
		cancel()
		<-done
		_, rss, _, _ := b.op.memory()
		return rss, peak
	}}, nil
}

// seconds formats times as "1.23 s, 4.56 s".
func seconds(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatFloat(x, 'f', 2, 64) + " s"
	}
	return strings.Join(s, ", ")
}

// median is the middle of v (the mean of the two middles for an even count), 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BackupTable formats the backup figures as a Markdown table.
func BackupTable(all []BackupFigures) string {
	var b strings.Builder
	b.WriteString("| keys | backup bytes | RedisBackup: create -> Completed (median) | redis-cli --rdb x3 side by side (median) | restore: create -> Ready (median) | restore: keys loading (median) | redis-cli --pipe x3 side by side (median) | operator RSS idle / peak backup / peak restore | Go heap peak backup / restore |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range all {
		fmt.Fprintf(&b, "| %d | %d | %.2f s (%s) | %.2f s (%s) | %.2f s | %.2f s | %.2f s (%s) | %d / %d / %d MiB | %d / %d MiB |\n",
			f.Keys, f.Bytes, median(f.BackupSeen), seconds(f.BackupSeen), median(f.RDB), seconds(f.RDB), median(f.Restore), median(f.RestoreLoad),
			median(f.Pipe), seconds(f.Pipe), f.IdleRSS>>20, f.BackupPeakRSS>>20, f.RestorePeakRSS>>20, f.BackupPeakHeap>>20, f.RestorePeakHeap>>20)
	}
	b.WriteString("\nlimits (MB/s): ")
	for _, f := range all {
		fmt.Fprintf(&b, "at %d keys: loopback %.0f, disk write+fsync %.0f, store put x3 %.0f; ", f.Keys, f.Loopback, f.Disk, f.StorePut)
	}
	b.WriteString("\n")
	return b.String()
}

// cpu is the CPU seconds used so far by the operator, the object store, the redis-servers of
// the cluster name with the snapshot forks they reaped, the local cluster's components, this
// process, and the redis-cli processes this bench ran and reaped; with the machine's busy
// and total seconds.
func (b *backupBench) cpu(ctx context.Context, name string) map[string]float64 {
	return b.cpuReader(ctx, name)()
}

// cpuReader finds the processes cpu reads once (the redis-servers' among all of the
// machine's) and returns what reads their CPU seconds: cheap enough to call every 100 ms
// while a restore loads, beside it on the same cores.
func (b *backupBench) cpuReader(ctx context.Context, name string) func() map[string]float64 {
	pids := map[string][]int{"operator": {b.op.cmd.Process.Pid}, benchProcess: {os.Getpid()}}
	if pid := b.store.PID(); pid > 0 {
		pids["object store"] = []int{pid}
	}
	for component, pid := range b.env.Cluster.PIDs() {
		pids[component] = []int{pid}
	}
	rc := &redisv1alpha1.RedisCluster{}
	if err := b.env.Client.Get(ctx, client.ObjectKey{Namespace: backupNS, Name: name}, rc); err == nil {
		for _, n := range rc.Status.Nodes {
			pids["redis-server"] = append(pids["redis-server"], b.kubelet.Processes(backupNS, n.Name)...)
		}
	}
	return func() map[string]float64 {
		out := map[string]float64{}
		for component, ps := range pids {
			for _, pid := range ps {
				own, forks, _ := processAndChildrenCPU(pid)
				out[component] += own
				if component == "redis-server" { // its snapshot forks; this process's children are the redis-clis
					out[component] += forks
				}
			}
		}
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err == nil {
			out["redis-cli"] = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
		}
		if busy, total, err := machineCPU(); err == nil {
			out[machineBusy], out[machineTotal] = busy, total
		}
		return out
	}
}

// cpuSince is what each of after's figures grew since before.
func cpuSince(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		out[k] = v - before[k]
	}
	return out
}

// operatorLine is the last line of the operator's log that holds msg and name, or a note
// that there is none.
func (b *backupBench) operatorLine(msg, name string) string {
	data, err := os.ReadFile(filepath.Join(b.env.Cluster.Dir, "operator.log"))
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(string(data), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], msg) && strings.Contains(lines[i], `"`+name+`"`) {
			return lines[i]
		}
	}
	return "no " + msg + " line for " + name
}
