package rdbload_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/tests/testmem"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// library is the function library the data set loads.
const library = "#!lua name=rdbloadlib\nredis.register_function('echo_first', function(keys, args) return args[1] end)"

// writeEveryType fills c with every value type in its compact and its large encodings
// (large elements each, and a string of 100 bytes an element), keys with TTLs (one that
// expires in 10 minutes: "soon"), a stream with two consumer groups and pending entries, and
// a function library.
func writeEveryType(t *testing.T, c *goredis.Client, large int) {
	t.Helper()
	ctx := t.Context()
	big := strings.Repeat("large value, compressible; ", 10) // > 64 bytes, LZF in the RDB
	smallNoise := noise(200)
	pipe := c.Pipeline()
	pipe.Set(ctx, "str:small", "v", 0)
	pipe.Set(ctx, "str:int8", "-12", 0)
	pipe.Set(ctx, "str:int16", "30000", 0)
	pipe.Set(ctx, "str:int32", "-2000000000", 0)
	pipe.Set(ctx, "str:int64", "9000000000000", 0)
	pipe.Set(ctx, "str:large", big, 0)
	pipe.Set(ctx, "str:noise", smallNoise, 0)
	pipe.Set(ctx, "str:empty", "", 0)
	pipe.Set(ctx, "str:huge", noise(large * 50)[200:], 0) // with 1,000 elements, larger than the reader's buffer
	pipe.Set(ctx, strings.Repeat("long-key-compressible-", 10), "a long key, LZF-compressed in the RDB", 0)
	pipe.Set(ctx, "{tag}str:ttl", "expires in an hour", time.Hour)
	pipe.Set(ctx, "str:soon", "expires in ten minutes", 10*time.Minute)
	pipe.RPush(ctx, "list:small", "a", "b", 3)
	pipe.HSet(ctx, "hash:small", "f1", "v1", "f2", 2)
	pipe.HSet(ctx, "hash:bigvalue", "f", big)
	pipe.SAdd(ctx, "set:ints", 1, 2, 300, -7)
	pipe.SAdd(ctx, "set:small", "x", "y", "z")
	pipe.ZAdd(ctx, "zset:small", goredis.Z{Score: 1.5, Member: "a"}, goredis.Z{Score: -2, Member: "b"})
	for i := range large {
		s := strconv.Itoa(i)
		pipe.RPush(ctx, "list:large", "element-"+s+"-"+big[:i%60])
		pipe.HSet(ctx, "hash:large", "field-"+s, "value-"+s)
		pipe.SAdd(ctx, "set:large", "member-"+s)
		pipe.SAdd(ctx, "set:largeints", i*1000)
		pipe.ZAdd(ctx, "zset:large", goredis.Z{Score: float64(i) / 3, Member: "member-" + s})
		pipe.XAdd(ctx, &goredis.XAddArgs{Stream: "stream", ID: "", Values: []any{"n", i, "payload", big[:i%70]}})
	}
	pipe.ZAdd(ctx, "zset:large", goredis.Z{Score: math.Inf(1), Member: "inf"})
	pipe.Expire(ctx, "list:large", time.Hour)
	pipe.Expire(ctx, "hash:small", 2*time.Hour)
	pipe.XGroupCreate(ctx, "stream", "group-a", "0")
	pipe.XGroupCreate(ctx, "stream", "group-b", "$")
	pipe.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "group-a", Consumer: "alice", Streams: []string{"stream", ">"}, Count: 10})
	pipe.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "group-a", Consumer: "bob", Streams: []string{"stream", ">"}, Count: 5})
	pipe.XAdd(ctx, &goredis.XAddArgs{Stream: "stream", Values: []any{"after", "group-b"}})
	pipe.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: "group-b", Consumer: "carol", Streams: []string{"stream", ">"}, Count: 1})
	pipe.XAdd(ctx, &goredis.XAddArgs{Stream: "stream:small", Values: []any{"k", "v"}})
	pipe.FunctionLoad(ctx, library)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	// Pending entries acknowledged in part: the group's PEL and its consumers' differ.
	if err := c.XAck(ctx, "stream", "group-a", firstIDs(t, c, 3)...).Err(); err != nil {
		t.Fatal(err)
	}
}

// noise is the hex digits of n pseudo-random bytes: a value LZF cannot compress.
func noise(n int) string {
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return hex.EncodeToString(b)
}

// firstIDs returns the IDs of the stream's first n entries.
func firstIDs(t *testing.T, c *goredis.Client, n int64) []string {
	msgs, err := c.XRangeN(t.Context(), "stream", "-", "+", n).Result()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	return ids
}

// fetchRDB fetches the RDB of src into a file and returns its path.
func fetchRDB(t *testing.T, src *testredis.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dump.rdb")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	res, err := rdbstream.Fetch(t.Context(), rdbstream.Options{Addr: src.Addr}, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fetched %d bytes, RDB version %d", res.Bytes, res.RDBVersion)
	return path
}

// load runs Load of the file at path into the node at addr.
func load(t *testing.T, opts rdbload.Options, path string) (rdbload.Result, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	return rdbload.Load(t.Context(), opts, f)
}

// compare checks that every key of src is on dst with the same type, TTL (within 2 s) and
// DUMP payload, except the keys in missing, which must be absent; and that dst holds no other
// key.
func compare(t *testing.T, src, dst *goredis.Client, missing map[string]bool) {
	t.Helper()
	ctx := t.Context()
	keys, err := src.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, k := range keys {
		if missing[k] {
			if n, _ := dst.Exists(ctx, k).Result(); n != 0 {
				t.Errorf("%s was restored; it should not have been", k)
			}
			continue
		}
		want++
		srcType, dstType := src.Type(ctx, k).Val(), dst.Type(ctx, k).Val()
		srcTTL, dstTTL := src.PTTL(ctx, k).Val(), dst.PTTL(ctx, k).Val()
		srcDump, dstDump := src.Dump(ctx, k).Val(), dst.Dump(ctx, k).Val()
		if srcType != dstType || (srcTTL < 0) != (dstTTL < 0) || (srcTTL-dstTTL).Abs() > 2*time.Second {
			t.Errorf("%s: type %s, TTL %s on the source; type %s, TTL %s restored", k, srcType, srcTTL, dstType, dstTTL)
		}
		if srcDump != dstDump && !sameContent(t, src, dst, k, srcType) {
			t.Errorf("%s (%s): DUMP and content differ: %d bytes on the source, %d restored", k, srcType, len(srcDump), len(dstDump))
		}
	}
	if n := dst.DBSize(ctx).Val(); n != int64(want) {
		t.Errorf("the restored node holds %d keys, want %d", n, want)
	}
	srcLibs, _ := src.FunctionList(ctx, goredis.FunctionListQuery{WithCode: true}).Result()
	dstLibs, _ := dst.FunctionList(ctx, goredis.FunctionListQuery{WithCode: true}).Result()
	if len(srcLibs) != 1 || len(dstLibs) != 1 || srcLibs[0].Code != dstLibs[0].Code {
		t.Errorf("function libraries: %d on the source, %d restored", len(srcLibs), len(dstLibs))
	}
	if got := dst.FCall(ctx, "echo_first", nil, "hello").Val(); got != "hello" {
		t.Errorf("FCALL echo_first hello = %v on the restored node", got)
	}
}

// sameContent compares a set or a hash by content: in a hash table, the order of elements
// (and so the DUMP payload) depends on the order of insertion.
func sameContent(t *testing.T, src, dst *goredis.Client, key, typ string) bool {
	t.Helper()
	ctx := t.Context()
	switch typ {
	case "set":
		a, b := src.SMembers(ctx, key).Val(), dst.SMembers(ctx, key).Val()
		slices.Sort(a)
		slices.Sort(b)
		return len(a) > 0 && slices.Equal(a, b)
	case "hash":
		a, b := src.HGetAll(ctx, key).Val(), dst.HGetAll(ctx, key).Val()
		return len(a) > 0 && maps.Equal(a, b)
	}
	return false
}

// TestLoadEveryType fetches the RDB of a cluster-mode node holding every type and loads it
// into a fresh standalone node with a password, into a fresh cluster-mode node owning every
// slot, into one whose user may SET but not MSET, and into one whose user may RESTORE but not
// SET (as the operator's own): every key comes back with its type, TTL and DUMP payload, the
// function library works, and a key already expired by the loader's clock is skipped.
// Small strings without an expiry go as MSET where MSET is allowed, other strings as SET
// where SET is.
func TestLoadEveryType(t *testing.T) {
	src := testredis.StartClusterNode(t, t.TempDir(), goredis.Options{})
	writeEveryType(t, src.Client, 1000)
	path := fetchRDB(t, src)
	keys := src.Client.DBSize(t.Context()).Val()

	standalone := testredis.Start(t, t.TempDir(), goredis.Options{Username: "loader", Password: "pw"},
		"--user", "loader", "on", ">pw", "~*", "&*", "+@all")
	cluster := testredis.StartClusterNode(t, t.TempDir(), goredis.Options{})
	noMSet := testredis.StartClusterNode(t, t.TempDir(), goredis.Options{Username: "loader", Password: "pw"},
		"--user", "loader", "on", ">pw", "~*", "&*", "+@all", "-mset")
	noSet := testredis.StartClusterNode(t, t.TempDir(), goredis.Options{Username: "loader", Password: "pw"},
		"--user", "loader", "on", ">pw", "~*", "&*", "+@all", "-set")
	// The strings: all but str:huge (LZF in the RDB and over 64 KiB uncompressed: RESTORE)
	// and str:soon (expired); of those, {tag}str:ttl has an expiry (SET ... PXAT).
	strs := int64(len(keysOfType(t, src.Client, "string")) - 2)
	for name, dst := range map[string]struct {
		srv           *testredis.Server
		opts          rdbload.Options
		sets, msetted int64 // keys sent as SET, and as MSET
	}{
		"standalone": {srv: standalone, opts: rdbload.Options{Node: rdbstream.Options{Addr: standalone.Addr, Username: "loader", Password: "pw"}, Window: 16},
			sets: 1, msetted: strs - 1},
		"cluster": {srv: cluster, opts: rdbload.Options{Node: rdbstream.Options{Addr: cluster.Addr}}, sets: 1, msetted: strs - 1},
		"no MSET": {srv: noMSet, opts: rdbload.Options{Node: rdbstream.Options{Addr: noMSet.Addr, Username: "loader", Password: "pw"}}, sets: strs},
		"no SET":  {srv: noSet, opts: rdbload.Options{Node: rdbstream.Options{Addr: noSet.Addr, Username: "loader", Password: "pw"}}},
	} {
		t.Run(name, func(t *testing.T) {
			// Twenty minutes from now, str:soon (ten minutes) has expired.
			dst.opts.Now = func() time.Time { return time.Now().Add(20 * time.Minute) }
			res, err := load(t, dst.opts, path)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", res)
			if res.Restored != keys-1 || res.Expired != 1 || res.Skipped != 0 || res.Functions != 1 || res.RDBVersion < 10 {
				t.Fatalf("result %+v, want %d restored, 1 expired, 1 function, RDB 10 or later", res, keys-1)
			}
			if fi, _ := os.Stat(path); res.Bytes != fi.Size() {
				t.Fatalf("read %d bytes of the %d-byte RDB", res.Bytes, fi.Size())
			}
			compare(t, src.Client, dst.srv.Client, map[string]bool{"str:soon": true})
			// compare above holds the SETs and MSETs to the same values; every other key
			// went as RESTORE.
			c := dst.srv.Client
			sets, msets, restores := calls(t, c, "set"), calls(t, c, "mset"), calls(t, c, "restore")
			if sets != dst.sets || restores != keys-1-dst.sets-dst.msetted || (msets == 0) != (dst.msetted == 0) || msets > dst.msetted {
				t.Fatalf("%d SETs, %d MSETs and %d RESTOREs; want %d SETs, MSETs of %d keys, %d RESTOREs",
					sets, msets, restores, dst.sets, dst.msetted, keys-1-dst.sets-dst.msetted)
			}
		})
	}
}

// keysOfType lists the keys of type typ.
func keysOfType(t *testing.T, c *goredis.Client, typ string) []string {
	t.Helper()
	keys, _, err := c.ScanType(t.Context(), 0, "*", 1_000_000, typ).Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// calls is the number of calls of the command name the node ran without an error (INFO
// commandstats: calls less failed_calls; the ACL's refusals are in neither).
func calls(t *testing.T, c *goredis.Client, name string) int64 {
	t.Helper()
	count := map[string]int64{}
	for field := range strings.SplitSeq(infoField(t, c, "commandstats", "cmdstat_"+name), ",") {
		k, v, _ := strings.Cut(field, "=")
		count[k], _ = strconv.ParseInt(v, 10, 64)
	}
	return count["calls"] - count["failed_calls"]
}

// TestLoadSlots loads only the keys of some slots; the others are counted as skipped.
func TestLoadSlots(t *testing.T) {
	src := testredis.Start(t, t.TempDir(), goredis.Options{})
	testredis.Dataset{Strings: 2000}.Write(t, src.Client)
	path := fetchRDB(t, src)
	dst := testredis.Start(t, t.TempDir(), goredis.Options{})
	ranges := []rdbload.SlotRange{{From: 0, To: 5460}, {From: 10923, To: 10923}}
	res, err := load(t, rdbload.Options{Node: rdbstream.Options{Addr: dst.Addr}, Slots: ranges}, path)
	if err != nil {
		t.Fatal(err)
	}
	var inside int64
	for i := range 2000 {
		k := fmt.Sprintf("key:%d", i)
		slot := rdbload.KeySlot(k)
		in := slot <= 5460 || slot == 10923
		if in {
			inside++
		}
		if n := dst.Client.Exists(t.Context(), k).Val(); (n == 1) != in {
			t.Fatalf("%s (slot %d): exists %d", k, slot, n)
		}
	}
	if res.Restored != inside || res.Skipped != 2000-inside {
		t.Fatalf("result %+v; %d keys are in the slots", res, inside)
	}
	if _, err := load(t, rdbload.Options{Node: rdbstream.Options{Addr: dst.Addr}, Slots: []rdbload.SlotRange{{From: 5, To: 16384}}}, path); err == nil ||
		!strings.Contains(err.Error(), "Options.Slots") {
		t.Fatalf("a slot range past 16383: %v", err)
	}
}

// TestLoadRefused: a node that refuses a SET (a cluster node that serves no slot)
// stops the load with an error naming the key and the node's answer.
func TestLoadRefused(t *testing.T) {
	src := testredis.Start(t, t.TempDir(), goredis.Options{})
	testredis.Dataset{Strings: 100}.Write(t, src.Client)
	path := fetchRDB(t, src)
	dir := t.TempDir()
	dst := testredis.Start(t, dir, goredis.Options{}, testredis.ClusterArgs(t, dir)...)
	_, err := load(t, rdbload.Options{Node: rdbstream.Options{Addr: dst.Addr}}, path)
	if err == nil || !strings.Contains(err.Error(), `"key:`) || !strings.Contains(err.Error(), "CLUSTERDOWN") {
		t.Fatalf("error %v, want one naming a key and CLUSTERDOWN", err)
	}
	t.Log(err)
	_, err = load(t, rdbload.Options{Node: rdbstream.Options{Addr: src.Addr, Password: "wrong"}}, path)
	if !errors.Is(err, rdbstream.ErrAuth) {
		t.Fatalf("a wrong password: %v, want ErrAuth", err)
	}
}

// TestLoadRefusedNamesTheKey: a node that refuses keys in the middle of a long load (its user
// may write only key:*; 20 keys outside:<i> among 5,000) stops the load with an error
// naming the refused key: with SET, the first refused key in the RDB's order, not another of
// the batch of commands the refusal came in; with MSET, the keys of the refused MSET, one of
// them outside key:*.
func TestLoadRefusedNamesTheKey(t *testing.T) {
	src := testredis.Start(t, t.TempDir(), goredis.Options{})
	testredis.Dataset{Strings: 5000}.Write(t, src.Client)
	for i := range 20 {
		if err := src.Client.Set(t.Context(), fmt.Sprintf("outside:%d", i), "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	path := fetchRDB(t, src)
	// The RDB's order is the source's hash order: find the first key outside key:*.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	rd, first, at := rdbload.NewReader(f), "", 0
	for first == "" {
		rec, err := rd.Next()
		if err != nil {
			t.Fatalf("no key outside key:* in the RDB: %v", err)
		}
		if key := string(rec.Key); strings.HasPrefix(key, "outside:") {
			first = key
		} else {
			at++
		}
	}
	opts := rdbload.Options{Node: rdbstream.Options{Username: "loader", Password: "pw"}}
	noMSet := testredis.Start(t, t.TempDir(), goredis.Options{}, "--user", "loader", "on", ">pw", "~key:*", "~mwo-*-probe", "+@all", "-mset")
	opts.Node.Addr = noMSet.Addr
	res, err := load(t, opts, path)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("SET of key %q", first)) || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("error %v, want one naming %s (the RDB's key %d) and NOPERM", err, first, at)
	}
	t.Logf("%v (the RDB's key %d; %d keys sent)", err, at, res.Restored)
	mset := testredis.Start(t, t.TempDir(), goredis.Options{}, "--user", "loader", "on", ">pw", "~key:*", "~mwo-*-probe", "+@all")
	opts.Node.Addr = mset.Addr
	res, err = load(t, opts, path)
	if err == nil || !strings.Contains(err.Error(), "MSET of ") || !strings.Contains(err.Error(), `"outside:`) || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("error %v, want one naming an MSET of keys outside:<i> among them, and NOPERM", err)
	}
	t.Logf("%v (%d keys sent)", err, res.Restored)
}

// TestLoadCorrupt: a truncated RDB fails where it ends; a byte changed inside a value loads
// to the end and fails there, on the checksum, with ErrCorrupt.
func TestLoadCorrupt(t *testing.T) {
	src := testredis.Start(t, t.TempDir(), goredis.Options{})
	writeEveryType(t, src.Client, 1000)
	path := fetchRDB(t, src)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dst := testredis.Start(t, t.TempDir(), goredis.Options{})
	opts := rdbload.Options{Node: rdbstream.Options{Addr: dst.Addr}}
	res, err := rdbload.Load(context.Background(), opts, bytes.NewReader(data[:len(data)/2]))
	if !errors.Is(err, rdbload.ErrCorrupt) || !errors.Is(err, io.ErrUnexpectedEOF) || res.Bytes > int64(len(data)/2) || res.Bytes == 0 {
		t.Fatalf("half an RDB: %+v, %v; want ErrCorrupt within its %d bytes", res, err, len(data)/2)
	}
	t.Log(err)
	at := bytes.Index(data, []byte(noise(200)[:40]))
	damaged := bytes.Clone(data)
	damaged[at] ^= 0x20
	res, err = rdbload.Load(context.Background(), opts, bytes.NewReader(damaged))
	if !errors.Is(err, rdbload.ErrCorrupt) || !strings.Contains(err.Error(), "CRC-64") || res.Bytes != int64(len(data)) {
		t.Fatalf("a changed byte: %+v, %v; want a checksum error at the end", res, err)
	}
	t.Log(err)
}

// TestLoadHeapBounded: loading 200,000 keys grows the Go heap by less than 7 MB (read
// buffers, the window's keys, and the small strings held for MSETs: at most 2 MiB of them
// as the loader counts, about 3 MB of heap), as loading 2,000 does: memory does not follow
// the data (the RDB of 200,000 keys is 6.5 MB).
func TestLoadHeapBounded(t *testing.T) {
	src := testredis.Start(t, t.TempDir(), goredis.Options{}, "--enable-debug-command", "yes")
	dst := testredis.Start(t, t.TempDir(), goredis.Options{})
	for _, keys := range []int{2_000, 200_000} {
		ctx := t.Context()
		if err := src.Client.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := src.Client.Do(ctx, "DEBUG", "POPULATE", keys, "key", 20).Err(); err != nil {
			t.Fatal(err)
		}
		path := fetchRDB(t, src)
		var res rdbload.Result
		var err error
		growth := testmem.HeapGrowth(func() { res, err = load(t, rdbload.Options{Node: rdbstream.Options{Addr: dst.Addr}}, path) })
		if err != nil || res.Restored != int64(keys) {
			t.Fatalf("%+v, %v", res, err)
		}
		t.Logf("%d keys: the heap grew by %d KB", keys, growth>>10)
		if growth > 7<<20 {
			t.Fatalf("loading %d keys grew the heap by %d KB", keys, growth>>10)
		}
	}
}

// TestLoadStalled: a node that stops answering (DEBUG SLEEP) fails the load after
// IdleTimeout; a cancelled context fails it at once.
func TestLoadStalled(t *testing.T) {
	src := testredis.Start(t, t.TempDir(), goredis.Options{})
	testredis.Dataset{Strings: 1000}.Write(t, src.Client)
	path := fetchRDB(t, src)
	dst := testredis.Start(t, t.TempDir(), goredis.Options{ReadTimeout: 10 * time.Second}, "--enable-debug-command", "yes")
	slept := make(chan error, 1)
	go func() { slept <- dst.Client.Do(context.Background(), "DEBUG", "SLEEP", 3).Err() }()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	_, err := load(t, rdbload.Options{Node: rdbstream.Options{Addr: dst.Addr, IdleTimeout: 500 * time.Millisecond}}, path)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || time.Since(start) > 2*time.Second {
		t.Fatalf("after %s: %v, want a timeout after 500ms", time.Since(start), err)
	}
	t.Log(err)
	if err := <-slept; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	if _, err := rdbload.Load(ctx, rdbload.Options{Node: rdbstream.Options{Addr: dst.Addr}}, f); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled context: %v", err)
	}
}
