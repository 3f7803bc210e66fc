package objectstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/testmem"
)

// startStore starts the object store the local cluster runs (versitygw), on its own. It
// skips the test when versitygw is not built, except in CI.
func startStore(t *testing.T, plainHTTP bool) *localcluster.ObjectStore {
	t.Helper()
	started := time.Now()
	store, err := localcluster.StartObjectStore(t.Context(), localcluster.ObjectStoreOptions{Dir: t.TempDir(), PlainHTTP: plainHTTP})
	if errors.Is(err, os.ErrNotExist) && os.Getenv("CI") == "" {
		t.Skipf("versitygw is not built (make tools): %v", err)
	}
	if err != nil {
		t.Fatalf("while starting the object store: %v", err)
	}
	t.Logf("object store at %s ready in %s", store.Endpoint, time.Since(started).Round(time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("object store log:\n%s", store.LogTail(30))
		}
		store.Stop()
	})
	return store
}

func newClient(t *testing.T, cfg objectstore.Config) *objectstore.Client {
	t.Helper()
	c, err := objectstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// randomData is n reproducible bytes that do not compress.
func randomData(n int, seed uint64) []byte {
	data := make([]byte, n)
	_, _ = rand.NewChaCha8([32]byte{byte(seed)}).Read(data)
	return data
}

func sha(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// onlyReader hides every method of r but Read, so the client cannot seek or ReadAt: the
// source is a stream, as an RDB coming off a socket is.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestObjectStoreRoundTrip(t *testing.T) {
	for _, plain := range []bool{false, true} {
		name := map[bool]string{false: "https with the store's CA", true: "plain http"}[plain]
		t.Run(name, func(t *testing.T) {
			store := startStore(t, plain)
			cfg := store.Config()
			cfg.Prefix = "/test/run-1/"
			c := newClient(t, cfg)
			ctx := t.Context()
			if err := c.Check(ctx); err != nil {
				t.Fatal(err)
			}

			small := []byte(`{"cluster":"cache"}`)
			// Larger than two parts, of a size unknown to the client: a multipart upload.
			large := randomData(2*objectstore.DefaultPartSize+123_457, 1)
			// unhashed puts with PutUnhashed, as a backup streams a shard (it hashes the
			// snapshot itself): no SHA-256 comes back, the content is the same.
			puts := []struct {
				name     string
				data     []byte
				size     int64
				unhashed bool
			}{
				{"cache/manifest.json", small, int64(len(small)), false},
				{"cache/shard-0.rdb", large, -1, true},
				{"cache/shard-1.rdb", large[:1000], 1000, false},
				{"other/shard-0.rdb", []byte{}, 0, false},
			}
			for _, p := range puts {
				start := time.Now()
				put, want := c.Put, sha(p.data)
				if p.unhashed {
					put, want = c.PutUnhashed, ""
				}
				obj, err := put(ctx, p.name, onlyReader{bytes.NewReader(p.data)}, p.size)
				if err != nil {
					t.Fatalf("Put %s: %v", p.name, err)
				}
				if obj.Size != int64(len(p.data)) || obj.SHA256 != want || obj.Key != "test/run-1/"+p.name {
					t.Fatalf("Put %s returned %+v; want %d bytes, SHA-256 %q", p.name, obj, len(p.data), want)
				}
				t.Logf("Put %s: %d bytes in %s", p.name, obj.Size, time.Since(start).Round(time.Millisecond))
				// The object is a plain file of the posix backend.
				onDisk, err := os.ReadFile(filepath.Join(store.DataDir, store.Bucket, obj.Key))
				if err != nil || !bytes.Equal(onDisk, p.data) {
					t.Fatalf("the file of %s holds %d bytes (err %v), want the %d put", p.name, len(onDisk), err, len(p.data))
				}
			}

			for _, p := range puts {
				var got bytes.Buffer
				obj, err := c.Get(ctx, p.name, &got, &objectstore.Digest{Size: int64(len(p.data)), SHA256: sha(p.data)})
				if err != nil {
					t.Fatalf("Get %s: %v", p.name, err)
				}
				if !bytes.Equal(got.Bytes(), p.data) || obj.SHA256 != sha(p.data) || obj.ETag == "" {
					t.Fatalf("Get %s: %d bytes, %+v", p.name, got.Len(), obj)
				}
			}

			list, err := c.List(ctx, "cache/")
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range list {
				names = append(names, o.Name)
			}
			if want := []string{"cache/manifest.json", "cache/shard-0.rdb", "cache/shard-1.rdb"}; !slices.Equal(names, want) {
				t.Fatalf("List cache/ = %v, want %v", names, want)
			}
			if list[1].Size != int64(len(large)) {
				t.Fatalf("List gave %d bytes for shard-0, want %d", list[1].Size, len(large))
			}
			all, err := c.List(ctx, "")
			if err != nil || len(all) != len(puts) {
				t.Fatalf("List of everything: %v, %v", all, err)
			}

			if err := c.Delete(ctx, "cache/shard-1.rdb"); err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(ctx, "cache/shard-1.rdb"); err != nil {
				t.Fatalf("deleting a deleted object: %v", err)
			}
			if _, err := c.Get(ctx, "cache/shard-1.rdb", io.Discard, nil); !errors.Is(err, objectstore.ErrNotFound) {
				t.Fatalf("Get of a deleted object: %v, want ErrNotFound", err)
			}
			if list, err := c.List(ctx, "cache/"); err != nil || len(list) != 2 {
				t.Fatalf("List after Delete: %v, %v", list, err)
			}
		})
	}
}

// TestObjectStoreFaults checks that each wrong setting and a corrupted object give the error
// a caller can name.
func TestObjectStoreFaults(t *testing.T) {
	store := startStore(t, false)
	ctx := t.Context()
	good := newClient(t, store.Config())
	data := randomData(100_000, 2)
	obj, err := good.Put(ctx, "corrupt-me.rdb", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("a corrupted object fails its checksum", func(t *testing.T) {
		path := filepath.Join(store.DataDir, store.Bucket, obj.Key)
		onDisk, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		onDisk[50_000] ^= 0xff
		if err := os.WriteFile(path, onDisk, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = good.Get(ctx, "corrupt-me.rdb", io.Discard, &obj.Digest)
		if !errors.Is(err, objectstore.ErrChecksum) {
			t.Fatalf("Get of a corrupted object: %v, want ErrChecksum", err)
		}
		t.Log(err)
		if err := os.WriteFile(path, onDisk[:1000], 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err = good.Get(ctx, "corrupt-me.rdb", io.Discard, &obj.Digest); !errors.Is(err, objectstore.ErrChecksum) {
			t.Fatalf("Get of a truncated object: %v, want ErrChecksum", err)
		}
	})

	cases := map[string]struct {
		change func(*objectstore.Config)
		want   error
	}{
		"wrong secret key":   {change: func(c *objectstore.Config) { c.SecretKey += "x" }, want: objectstore.ErrAccessDenied},
		"unknown access key": {change: func(c *objectstore.Config) { c.AccessKey = "nobody" }, want: objectstore.ErrAccessDenied},
		"missing bucket":     {change: func(c *objectstore.Config) { c.Bucket = "no-such-bucket" }, want: objectstore.ErrNoBucket},
		"CA not given":       {change: func(c *objectstore.Config) { c.CA = nil }, want: objectstore.ErrTLS},
		"unreachable": {change: func(c *objectstore.Config) {
			ports, _ := localcluster.FreePorts(1)
			c.Endpoint = "https://127.0.0.1:" + strconv.Itoa(ports[0])
		}, want: objectstore.ErrUnreachable},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := store.Config()
			cfg.MaxRetries = -1
			tc.change(&cfg)
			c := newClient(t, cfg)
			if err := c.Check(ctx); !errors.Is(err, tc.want) {
				t.Fatalf("Check: %v, want %v", err, tc.want)
			} else {
				t.Log(err)
			}
			if _, err := c.Put(ctx, "x", bytes.NewReader(data), -1); !errors.Is(err, tc.want) {
				t.Fatalf("Put: %v, want %v", err, tc.want)
			}
			if _, err := c.Get(ctx, "corrupt-me.rdb", io.Discard, nil); !errors.Is(err, tc.want) {
				t.Fatalf("Get: %v, want %v", err, tc.want)
			}
			if _, err := c.List(ctx, ""); !errors.Is(err, tc.want) {
				t.Fatalf("List: %v, want %v", err, tc.want)
			}
		})
	}

	t.Run("a cancelled upload leaves no object", func(t *testing.T) {
		ctx, cancel := context.WithCancel(ctx)
		r, w := io.Pipe()
		go func() {
			_, _ = w.Write(randomData(objectstore.DefaultPartSize+1000, 3)) // one part goes up
			cancel()
			_ = w.CloseWithError(context.Canceled)
		}()
		if _, err := good.Put(ctx, "cancelled.rdb", r, -1); err == nil {
			t.Fatal("a cancelled upload succeeded")
		}
		if _, err := good.Get(t.Context(), "cancelled.rdb", io.Discard, nil); !errors.Is(err, objectstore.ErrNotFound) {
			t.Fatalf("Get of the cancelled upload: %v, want ErrNotFound", err)
		}
	})
}

// TestPutMemoryIsBounded uploads 96 MiB from a stream of unknown size and samples the heap:
// it must stay within a few parts, whatever the object's size.
func TestPutMemoryIsBounded(t *testing.T) {
	store := startStore(t, false)
	c := newClient(t, store.Config())
	const size = 96 << 20
	var (
		obj objectstore.Object
		err error
	)
	grew := testmem.HeapGrowth(func() {
		src := io.LimitReader(rand.NewChaCha8([32]byte{4}), size)
		obj, err = c.Put(t.Context(), "big.rdb", onlyReader{src}, -1)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("uploaded %d MiB; the heap grew by at most %d MiB", obj.Size>>20, grew>>20)
	if obj.Size != size {
		t.Fatalf("uploaded %d bytes, want %d", obj.Size, size)
	}
	if limit := int64(4 * objectstore.DefaultPartSize); grew > limit {
		t.Fatalf("the heap grew by %d MiB for a %d MiB upload; want at most %d MiB", grew>>20, size>>20, limit>>20)
	}
}
