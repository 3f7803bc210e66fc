package rdbload_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
	"github.com/middleware-operator/middleware-operator/tests/teststore"
)

// TestLoadObject loads an RDB from the local cluster's object store as it downloads; a
// digest that does not match the object (as a manifest of another file would) fails the
// load with objectstore.ErrChecksum at the object's end, although every key and the RDB's
// own checksum were fine (the keys still held for MSETs then are not sent); a missing
// object fails with ErrNotFound.
func TestLoadObject(t *testing.T) {
	_, client := teststore.Start(t, "")
	src := testredis.Start(t, t.TempDir(), goredis.Options{})
	data := testredis.Dataset{Strings: 20_000, Others: 200}
	data.Write(t, src.Client)
	path := fetchRDB(t, src)
	rdb, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	obj, err := client.Put(t.Context(), "shard-0.rdb", f, -1)
	if err != nil {
		t.Fatal(err)
	}
	dst := testredis.Start(t, t.TempDir(), goredis.Options{})
	opts := rdbload.Options{Node: rdbstream.Options{Addr: dst.Addr}}
	res, err := rdbload.LoadObject(t.Context(), opts, client, "shard-0.rdb", obj.Digest)
	if err != nil || res.Restored != int64(data.Keys()) {
		t.Fatalf("%+v, %v", res, err)
	}
	data.Check(t, dst.Client)

	other := sha256.Sum256(rdb[1:])
	res, err = rdbload.LoadObject(t.Context(), opts, client, "shard-0.rdb", objectstore.Digest{Size: obj.Size, SHA256: hex.EncodeToString(other[:])})
	if !errors.Is(err, objectstore.ErrChecksum) || res.Bytes != int64(len(rdb)) || res.Restored > int64(data.Keys()) {
		t.Fatalf("a digest of another file: %+v, %v; want ErrChecksum after all %d bytes", res, err, len(rdb))
	}
	t.Log(err)
	if _, err := rdbload.LoadObject(t.Context(), opts, client, "missing.rdb", obj.Digest); !errors.Is(err, objectstore.ErrNotFound) {
		t.Fatalf("a missing object: %v, want ErrNotFound", err)
	}
}
