package rdbload_test

import (
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
