package localcluster_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/middleware-operator/middleware-operator/internal/objectstore"
)

// TestObjectStoreServesAndSurvivesAnOutage puts an object into the cluster's object store
// over HTTPS, halts the store (a client then gets ErrUnreachable), resumes it and reads the
// object back: the data directory outlives the process.
func TestObjectStoreServesAndSurvivesAnOutage(t *testing.T) {
	o := cluster.ObjectStore
	if o == nil || !strings.HasPrefix(o.Endpoint, "https://127.0.0.1:") || o.Bucket != "backups" || o.CAFile == "" {
		t.Fatalf("object store %+v, want one on https://127.0.0.1 with the bucket backups and a CA file", o)
	}
	if ca, err := os.ReadFile(o.CAFile); err != nil || !bytes.Equal(ca, o.CA) {
		t.Fatalf("the CA file %s does not hold the CA (err %v)", o.CAFile, err)
	}
	if !strings.HasPrefix(o.DataDir, cluster.Dir) {
		t.Fatalf("the data directory %s is outside the cluster's directory %s", o.DataDir, cluster.Dir)
	}
	// objectstore.env is read with `source`: what it sets reaches the commands run after it.
	envFile := filepath.Join(t.TempDir(), "objectstore.env")
	if err := os.WriteFile(envFile, []byte(o.Env()), 0o600); err != nil {
		t.Fatal(err)
	}
	sourced, err := exec.Command("sh", "-c", `. "$1" && env`, "sh", envFile).Output()
	if err != nil {
		t.Fatalf("sourcing %s: %v\n%s", o.Env(), err, sourced)
	}
	for _, want := range []string{"MWO_S3_ENDPOINT=" + o.Endpoint, "MWO_S3_BUCKET=backups", "AWS_ACCESS_KEY_ID=" + o.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + o.SecretKey, "AWS_CA_BUNDLE=" + o.CAFile, "MWO_S3_CA_FILE=" + o.CAFile} {
		if !slices.Contains(strings.Split(string(sourced), "\n"), want) {
			t.Errorf("a command run after sourcing objectstore.env lacks %s; the file:\n%s", want, o.Env())
		}
	}
	cfg := o.Config()
	cfg.MaxRetries = -1
	c, err := objectstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	put, err := c.Put(ctx, "lc/hello.txt", strings.NewReader("hello"), -1)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(o.DataDir, o.Bucket, "lc/hello.txt")); err != nil || string(data) != "hello" {
		t.Fatalf("the object's file holds %q (err %v)", data, err)
	}

	if err := cluster.Halt("objectstore"); err != nil {
		t.Fatal(err)
	}
	if err := c.Check(ctx); !errors.Is(err, objectstore.ErrUnreachable) {
		t.Errorf("Check with the store halted: %v, want ErrUnreachable", err)
	}
	if err := cluster.Resume("objectstore"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "lc/hello.txt", io.Discard, &put.Digest); err != nil {
		t.Fatalf("Get after the outage: %v", err)
	}
}
