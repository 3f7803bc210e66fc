package localcluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
)

// Object store defaults: the bucket created at start and the region the server reports.
const (
	ObjectStoreBucket = "backups"
	ObjectStoreRegion = "us-east-1"
	// objectStoreAccessKey is the root user's access key; its secret is random per store.
	objectStoreAccessKey = "middleware-operator"
)

// ObjectStoreOptions configures StartObjectStore. The zero value serves HTTPS with a new
// CA, from a new temporary directory.
type ObjectStoreOptions struct {
	// Dir holds the data (Dir/data: one directory per bucket, one file per object), the
	// certificates and the log. Empty means a new temporary directory that Stop removes.
	Dir string
	// BinDir holds versitygw; empty means as for Options.BinDir.
	BinDir string
	// PlainHTTP serves http:// instead of https://.
	PlainHTTP bool
	// Logf, when set, receives progress lines.
	Logf func(format string, args ...any)
}

// ObjectStore is a running S3-compatible server: the Versity S3 Gateway (versitygw) on its
// posix backend, which keeps each object as a plain file under DataDir/<bucket>/<key>, on a
// free loopback port, with one bucket and one root user.
type ObjectStore struct {
	// Endpoint is the server's URL (https://127.0.0.1:<port>, or http:// with PlainHTTP).
	Endpoint string
	// Bucket exists when Start returns; Region is the region the server signs for.
	Bucket, Region string
	// AccessKey and SecretKey are the root user's credentials.
	AccessKey, SecretKey string
	// CA is the PEM of the CA that signed the server's certificate, also in the file CAFile;
	// both empty with PlainHTTP.
	CA     []byte
	CAFile string
	// DataDir is the posix backend's root: DataDir/<bucket>/<key> is an object's content.
	DataDir string

	dir    string
	ownDir bool
	proc   *process
	// ofCluster is set for the store a Cluster runs: the Cluster stops it.
	ofCluster bool
}

// StartObjectStore starts an object store on its own, without Kubernetes, for tests of
// code that only talks to S3. Stop ends it.
func StartObjectStore(ctx context.Context, opts ObjectStoreOptions) (o *ObjectStore, err error) {
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	o = &ObjectStore{dir: opts.Dir, ownDir: opts.Dir == ""}
	if o.ownDir {
		if o.dir, err = os.MkdirTemp("", "mwo-objectstore-"); err != nil {
			return nil, err
		}
	}
	defer func() {
		if err != nil {
			o.Stop()
			o = nil
		}
	}()
	bin, err := findBinDir(opts.BinDir)
	if err != nil {
		return o, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return o, err
	}
	if err = o.start(ctx, bin, ports[0], !opts.PlainHTTP); err != nil {
		return o, err
	}
	opts.Logf("object store ready at %s (bucket %s)", o.Endpoint, o.Bucket)
	return o, nil
}

// start writes the certificates, starts versitygw on port and creates the bucket.
func (o *ObjectStore) start(ctx context.Context, bin string, port int, secure bool) error {
	o.DataDir = filepath.Join(o.dir, "objectstore")
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return err
	}
	secret := make([]byte, 20)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	o.Bucket, o.Region, o.AccessKey, o.SecretKey = ObjectStoreBucket, ObjectStoreRegion, objectStoreAccessKey, hex.EncodeToString(secret)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := []string{"--port", addr, "--region", o.Region, "--health", "/health", "--quiet"}
	scheme := "http"
	if secure {
		scheme = "https"
		certFile, keyFile, err := o.writeCerts()
		if err != nil {
			return err
		}
		args = append(args, "--cert", certFile, "--key", keyFile)
	}
	o.Endpoint = scheme + "://" + addr
	// The credentials go in the environment, so they do not show in the process list.
	env := []string{"ROOT_ACCESS_KEY_ID=" + o.AccessKey, "ROOT_SECRET_ACCESS_KEY=" + o.SecretKey}
	p, err := startProcess("objectstore", filepath.Join(bin, "versitygw"), filepath.Join(o.dir, "objectstore.log"),
		append(args, "posix", o.DataDir), env)
	if err != nil {
		return err
	}
	o.proc = p
	p.ready = o.healthy
	if err := p.waitFor(30*time.Second, p.ready); err != nil {
		return err
	}
	client, err := objectstore.New(o.Config())
	if err != nil {
		return err
	}
	return client.CreateBucket(ctx)
}

// writeCerts writes a CA and a server certificate for 127.0.0.1 and localhost that it
// signs, and returns the server's certificate and key files.
func (o *ObjectStore) writeCerts() (certFile, keyFile string, err error) {
	l, err := certs.NewLoopback(filepath.Join(o.dir, "objectstore-tls"), "middleware-operator-local-objectstore-ca", time.Now())
	if err != nil {
		return "", "", err
	}
	o.CA, o.CAFile = l.CA.Cert, l.CAFile
	return l.CertFile, l.KeyFile, nil
}

// healthy checks the server's health endpoint, verifying its certificate.
func (o *ObjectStore) healthy() error {
	var tlsConf *tls.Config
	if len(o.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(o.CA) {
			return errors.New("the object store's CA is not PEM")
		}
		tlsConf = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return httpOK(tlsConf, o.Endpoint+"/health", "")
}

// Config is a client configuration for the store's bucket, with the root credentials and
// the CA.
func (o *ObjectStore) Config() objectstore.Config {
	return objectstore.Config{Endpoint: o.Endpoint, Bucket: o.Bucket, Region: o.Region,
		AccessKey: o.AccessKey, SecretKey: o.SecretKey, CA: o.CA}
}

// Env returns the store's coordinates as shell export lines, one a line, for `source` (or
// `.`): MWO_S3_ENDPOINT, MWO_S3_BUCKET, MWO_S3_REGION, the AWS_* variables that AWS tools
// read, and MWO_S3_CA_FILE and AWS_CA_BUNDLE with HTTPS. Exported, so the commands run
// after it (aws, kubectl create secret) see them.
func (o *ObjectStore) Env() string {
	vars := [][2]string{
		{"MWO_S3_ENDPOINT", o.Endpoint},
		{"MWO_S3_BUCKET", o.Bucket},
		{"MWO_S3_REGION", o.Region},
		{"AWS_ACCESS_KEY_ID", o.AccessKey},
		{"AWS_SECRET_ACCESS_KEY", o.SecretKey},
		{"AWS_DEFAULT_REGION", o.Region},
	}
	if o.CAFile != "" {
		vars = append(vars, [2]string{"MWO_S3_CA_FILE", o.CAFile}, [2]string{"AWS_CA_BUNDLE", o.CAFile})
	}
	var b strings.Builder
	for _, v := range vars {
		b.WriteString("export " + v[0] + "=" + shellQuote(v[1]) + "\n")
	}
	return b.String()
}

// shellQuote quotes s for a POSIX shell: in single quotes, a quote inside closed, escaped
// with a backslash and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// PID is the store's process id, or 0 when it is not running.
func (o *ObjectStore) PID() int {
	if o.proc == nil || o.proc.cmd.Process == nil {
		return 0
	}
	return o.proc.cmd.Process.Pid
}

// Stop ends a store that StartObjectStore started and removes its temporary directory. A
// store that a Cluster started is stopped by the Cluster's Stop. It is safe to call more
// than once.
func (o *ObjectStore) Stop() {
	if o.proc != nil && !o.ofCluster {
		o.proc.stop(10 * time.Second)
	}
	if o.ownDir && o.dir != "" && os.Getenv("MWO_KEEP_CLUSTER_DIR") == "" {
		_ = os.RemoveAll(o.dir)
	}
}

// LogTail returns the last lines of the store's log, for test failures.
func (o *ObjectStore) LogTail(lines int) string {
	if o.proc == nil {
		return ""
	}
	return o.proc.logTail(lines)
}

// startObjectStore starts the cluster's object store in the cluster's directory, as the
// component "objectstore" (so Halt and Resume apply to it).
func (c *Cluster) startObjectStore(ctx context.Context, bin string, port int) error {
	o := &ObjectStore{dir: c.Dir, ofCluster: true}
	err := o.start(ctx, bin, port, true)
	if o.proc != nil {
		c.procs = append(c.procs, o.proc)
	}
	if err != nil {
		return fmt.Errorf("while starting the object store: %w", err)
	}
	c.ObjectStore = o
	return nil
}
