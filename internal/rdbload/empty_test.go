package rdbload_test

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/middleware-operator/middleware-operator/internal/rdbload"
	"github.com/middleware-operator/middleware-operator/internal/rdbstream"
	"github.com/middleware-operator/middleware-operator/tests/testredis"
)

// TestSanitizePayloadsIsUndone: a restore's load turns sanitize-dump-payload on and sets it
// back to what it was; a node that had it on keeps it on.
func TestSanitizePayloadsIsUndone(t *testing.T) {
	srv := testredis.Start(t, t.TempDir(), goredis.Options{})
	node := rdbstream.Options{Addr: srv.Addr}
	setting := func() string {
		return srv.Client.ConfigGet(t.Context(), "sanitize-dump-payload").Val()["sanitize-dump-payload"]
	}
	if got := setting(); got != "no" {
		t.Fatalf("a new node has sanitize-dump-payload %q, want Redis's default no", got)
	}
	undo, err := rdbload.SanitizePayloads(t.Context(), node)
	if err != nil {
		t.Fatal(err)
	}
	if got := setting(); got != "yes" {
		t.Fatalf("during the load sanitize-dump-payload is %q, want yes", got)
	}
	if err := undo(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := setting(); got != "no" {
		t.Fatalf("after the load sanitize-dump-payload is %q, want no again", got)
	}
	srv.Client.ConfigSet(t.Context(), "sanitize-dump-payload", "yes")
	undo, err = rdbload.SanitizePayloads(t.Context(), node)
	if err != nil {
		t.Fatal(err)
	}
	if err := undo(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := setting(); got != "yes" {
		t.Fatalf("a node set to yes by its admin has %q after the load, want yes", got)
	}
}

// TestFlushFunctionsDeletesTheLoadedLibraries: a failed restore load's master keeps none of
// the function libraries the load sent.
func TestFlushFunctionsDeletesTheLoadedLibraries(t *testing.T) {
	srv := testredis.Start(t, t.TempDir(), goredis.Options{})
	if err := srv.Client.FunctionLoad(t.Context(), library).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdbload.FlushFunctions(t.Context(), rdbstream.Options{Addr: srv.Addr}); err != nil {
		t.Fatal(err)
	}
	if libs := srv.Client.FunctionList(t.Context(), goredis.FunctionListQuery{}).Val(); len(libs) != 0 {
		t.Fatalf("%d libraries after FlushFunctions, want none: %+v", len(libs), libs)
	}
}

// TestSanitizedNodeRefusesADamagedPayload: a hash's listpack with one entry's back-length
// damaged and its DUMP checksum made right again (as the loader seals every payload it
// sends) is taken as it is by a node with Redis's default sanitize-dump-payload no, and
// refused while SanitizePayloads holds it on: the damage a file's checksum reveals only at
// its end does not reach the master's memory meanwhile.
func TestSanitizedNodeRefusesADamagedPayload(t *testing.T) {
	srv := testredis.Start(t, t.TempDir(), goredis.Options{})
	c := srv.Client
	if err := c.HSet(t.Context(), "h", "f1", "v1", "f2", "v2").Err(); err != nil {
		t.Fatal(err)
	}
	dump, err := c.Dump(t.Context(), "h").Result()
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(dump)
	entry := bytes.Index(payload, []byte{0x82, 'f', '1', 0x03}) // a 2-byte string entry and its back-length
	if entry < 0 {
		t.Fatalf("no listpack entry f1 in the DUMP of a small hash: % x", payload)
	}
	payload[entry+3] = 0x05
	body := len(payload) - 8
	binary.LittleEndian.PutUint64(payload[body:], rdbstream.CRC64(0, payload[:body]))

	undo, err := rdbload.SanitizePayloads(t.Context(), rdbstream.Options{Addr: srv.Addr})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Restore(t.Context(), "damaged", 0, string(payload)).Err()
	if err == nil || !strings.Contains(err.Error(), "Bad data format") {
		t.Fatalf("RESTORE of the damaged payload while sanitizing: %v, want Bad data format", err)
	}
	if err := undo(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.Restore(t.Context(), "damaged", 0, string(payload)).Err(); err != nil {
		t.Fatalf("without sanitizing, RESTORE of the damaged payload: %v, want it taken (the damage is one only the deep check sees)", err)
	}
}
