// Package teststore starts the local cluster's object store (versitygw) on its own for a
// test, with a client of it.
package teststore

import (
	"errors"
	"os"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
)

// Start starts the object store with TLS, stops it when the test ends, and returns it with a
// client for the given object name prefix. It skips the test when versitygw is not built
// (make tools), except in CI.
func Start(t testing.TB, prefix string) (*localcluster.ObjectStore, *objectstore.Client) {
	t.Helper()
	store, err := localcluster.StartObjectStore(t.Context(), localcluster.ObjectStoreOptions{Dir: t.TempDir()})
	if errors.Is(err, os.ErrNotExist) && os.Getenv("CI") == "" {
		t.Skipf("versitygw is not built (make tools): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Stop)
	cfg := store.Config()
	cfg.Prefix = prefix
	c, err := objectstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return store, c
}
