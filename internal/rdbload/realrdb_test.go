package rdbload_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// TestRealRDBFiles reads the RDBs of testdata, written by real redis-servers of several
// versions (TestWriteRealRDBFiles): every key's payload must be byte for byte the DUMP the
// same server gave for it, kept beside the RDB.
func TestRealRDBFiles(t *testing.T) {
	files, err := filepath.Glob("testdata/redis-*.rdb")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/redis-*.rdb (%v)", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			dumps := readDumps(t, strings.TrimSuffix(file, ".rdb")+".dump")
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			r := rdbload.NewReader(bytes.NewReader(data))
			keys, functions := 0, 0
			types := map[byte]bool{}
			for {
				rec, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if rec.Kind == rdbload.KindFunction {
					functions++
					if !strings.Contains(string(rec.Payload), "rdbloadlib") {
						t.Fatalf("function code %q", rec.Payload)
					}
					continue
				}
				keys++
				types[rec.Payload[0]] = true
				want, ok := dumps[string(rec.Key)]
				if !ok {
					t.Fatalf("key %q is not in the DUMP file", rec.Key)
				}
				if !bytes.Equal(rec.Payload, want) {
					t.Fatalf("key %q (type %d): payload\n%x\nDUMP gave\n%x", rec.Key, rec.Payload[0], rec.Payload, want)
				}
			}
			if keys != len(dumps) || functions != 1 || !r.Checksummed() {
				t.Fatalf("%d keys of %d, %d functions, checksummed %v", keys, len(dumps), functions, r.Checksummed())
			}
			for _, want := range typesOf[r.Version()] {
				if !types[want] {
					t.Errorf("no key of type %d in this RDB %d", want, r.Version())
				}
			}
			t.Logf("RDB version %d: %d keys, every payload equal to its DUMP; types %v", r.Version(), keys, slices.Sorted(maps.Keys(types)))
		})
	}
}

// typesOf lists the value types each RDB version of testdata must hold (src/rdb.h): 7.0
// writes lists as quicklists 2 (18), sets as tables (2) or intsets (11), sorted sets as
// skiplists (5) or listpacks (17), hashes as tables (4) or listpacks (16), streams in their
// second layout (19); 7.2 adds sets as listpacks (20) and the third stream layout (21); 7.4
// hashes with field expiries, as tables (24) and listpacks (25).
var typesOf = map[int][]byte{
	10: {0, 2, 4, 5, 11, 16, 17, 18, 19},
	12: {0, 2, 4, 5, 11, 16, 17, 18, 20, 21, 24, 25},
}

// readDumps reads a file of "<hex key> <hex DUMP payload>" lines.
func readDumps(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	dumps := map[string][]byte{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		key, err1 := hex.DecodeString(k)
		payload, err2 := hex.DecodeString(v)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		dumps[string(key)] = payload
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return dumps
}

// TestWriteRealRDBFiles writes testdata/redis-<version>.rdb and .dump with the
// redis-server first in PATH, when MWO_RDBLOAD_TESTDATA=1: the data set of
// TestLoadEveryType with 200-element large forms, and from Redis 7.4 on, hashes with field
// expiries in both encodings.
func TestWriteRealRDBFiles(t *testing.T) {
	if os.Getenv("MWO_RDBLOAD_TESTDATA") != "1" {
		t.Skip("MWO_RDBLOAD_TESTDATA=1 writes the testdata RDBs")
	}
	src := testredis.Start(t, t.TempDir(), goredis.Options{})
	ctx := t.Context()
	writeEveryType(t, src.Client, 200)
	version := infoField(t, src.Client, "server", "redis_version")
	if version >= "7.4" {
		pipe := src.Client.Pipeline()
		pipe.HSet(ctx, "hfe:small", "f1", "v1", "f2", "v2")
		pipe.Do(ctx, "HEXPIRE", "hfe:small", 7200, "FIELDS", 1, "f1")
		for i := range 200 {
			pipe.HSet(ctx, "hfe:large", fmt.Sprintf("field-%d", i), i)
		}
		pipe.HSet(ctx, "hfe:large", "long", strings.Repeat("a value longer than 64 bytes makes a table; ", 2))
		pipe.Do(ctx, "HPEXPIRE", "hfe:large", 3_600_000, "FIELDS", 2, "field-1", "field-7")
		pipe.Do(ctx, "HEXPIRE", "hfe:large", 9000, "FIELDS", 1, "field-100")
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Client.Save(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	rdb, err := os.ReadFile(filepath.Join(src.Dir, "dump.rdb"))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := src.Client.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var dumps strings.Builder
	for _, k := range keys {
		payload, err := src.Client.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&dumps, "%x %x\n", k, payload)
	}
	base := filepath.Join("testdata", "redis-"+version)
	if err := os.WriteFile(base+".rdb", rdb, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".dump", []byte(dumps.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s.rdb (%d bytes, %d keys) at %s", base, len(rdb), len(keys), time.Now().UTC().Format(time.RFC3339))
}

// infoField reads a field of an INFO section.
func infoField(t *testing.T, c *goredis.Client, section, field string) string {
	t.Helper()
	info, err := c.Info(t.Context(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	t.Fatalf("INFO %s has no %s", section, field)
	return ""
}
