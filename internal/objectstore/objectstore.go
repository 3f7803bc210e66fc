package objectstore

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// DefaultPartSize is the part size of a multipart upload when Config.PartSize is zero: a
// 10,000th of the largest object of unknown size it can store (160 GiB). An upload holds
// Concurrency parts in memory.
const DefaultPartSize = 16 << 20

// minPartSize is the smallest part S3 accepts (except for the last part).
const minPartSize = 5 << 20

// Config says where a Client reads and writes.
type Config struct {
	// Endpoint is the store's URL, https://host[:port] or http://host[:port], without a path.
	// A bare host[:port] means HTTPS. For AWS S3: https://s3.<region>.amazonaws.com.
	Endpoint string
	// Bucket must exist; the Client never creates it except through CreateBucket.
	Bucket string
	// Prefix is prepended to every object name ("a/b" and "/a/b/" mean the same prefix).
	Prefix string
	// Region is the bucket's region. Empty lets the client ask the store (GetBucketLocation).
	Region string
	// AccessKey and SecretKey sign requests (AWS signature v4); both empty means anonymous.
	// SessionToken is for temporary credentials.
	AccessKey, SecretKey, SessionToken string
	// CA, when set, is the PEM bundle the store's certificate must chain to; it replaces the
	// system roots. An http:// endpoint ignores it.
	CA []byte
	// PartSize is the size of each part of a multipart upload (default DefaultPartSize, at
	// least 5 MiB).
	PartSize uint64
	// Concurrency is how many parts of an upload are in flight at once (default 2: one
	// uploads while the next fills). An upload holds Concurrency × PartSize of memory.
	Concurrency int
	// MaxRetries is how many times a failed request is tried again (default 3; -1: never).
	MaxRetries int
}

// Digest is what identifies an object's content: its size and SHA-256.
type Digest struct {
	// Size is the content's length in bytes.
	Size int64 `json:"size"`
	// SHA256 is the content's SHA-256, in lower-case hex.
	SHA256 string `json:"sha256"`
}

// Object is an object of the store.
type Object struct {
	// Name is the object's name relative to the Client's prefix; Key is its full key.
	Name, Key string
	// Digest is the content's size and, where the call read or wrote the content (Put, Get),
	// its SHA-256; List leaves SHA256 empty.
	Digest
	// ETag and LastModified are the store's.
	ETag         string
	LastModified time.Time
}

// Errors the caller can act on, matched with errors.Is. The error that carries one also
// carries the store's or the network's own error.
var (
	// ErrNotFound: no object has that name.
	ErrNotFound = errors.New("object not found")
	// ErrNoBucket: the bucket does not exist.
	ErrNoBucket = errors.New("bucket not found")
	// ErrAccessDenied: the store refused the credentials or what they may do.
	ErrAccessDenied = errors.New("access denied")
	// ErrChecksum: an object read back is not the one expected (size or SHA-256).
	ErrChecksum = errors.New("content does not match its checksum")
	// ErrTLS: the store's certificate is not trusted (unknown CA, wrong name, expired).
	ErrTLS = errors.New("TLS verification failed")
	// ErrUnreachable: no HTTP answer from the endpoint (refused, timed out, no route), or
	// the connection broke during the answer.
	ErrUnreachable = errors.New("endpoint unreachable")
	// ErrBadResponse: the endpoint answered, but with an error S3 names no other way, or
	// with something that is not an S3 answer.
	ErrBadResponse = errors.New("bad response")
)

// RequestError is a request to the store that failed. Its message says what was being done,
// where, and the class of the failure (Kind, and the HTTP status when there was one), never
// the store's own words: the endpoint is the user's, and what it answers goes no further
// than the operator's log (Cause).
type RequestError struct {
	// Doing is what the request was for ("downloading a/b").
	Doing string
	// Endpoint is the store's URL.
	Endpoint string
	// Kind is ErrNotFound, ErrNoBucket, ErrAccessDenied, ErrTLS, ErrUnreachable,
	// ErrBadResponse, or the context's error when it ended the request.
	Kind error
	// Status is the HTTP status of the store's answer, 0 when there was none.
	Status int
	// cause is the error of the S3 client, with the store's answer.
	cause error
}

// Error is the summary: what, where, and the class of the failure.
func (e *RequestError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("while %s at %s: %v (HTTP %d)", e.Doing, e.Endpoint, e.Kind, e.Status)
	}
	return fmt.Sprintf("while %s at %s: %v", e.Doing, e.Endpoint, e.Kind)
}

// Unwrap makes errors.Is and errors.As see the kind and the S3 client's error.
func (e *RequestError) Unwrap() []error { return []error{e.Kind, e.cause} }

// Cause is the S3 client's error, with what the store answered: for the operator's log only.
func (e *RequestError) Cause() error { return e.cause }

// Detail is err's text with, for every RequestError in it, the S3 client's own error: for
// the operator's log, never for statuses or events.
func Detail(err error) string {
	var re *RequestError
	if err == nil || !errors.As(err, &re) {
		return fmt.Sprint(err)
	}
	return fmt.Sprintf("%v (%v)", err, re.cause)
}

// Client reads and writes the objects under one bucket and prefix.
type Client struct {
	mc       *minio.Client
	bucket   string
	prefix   string
	endpoint string
	partSize uint64
	threads  uint
}

// New checks cfg and returns a Client. It makes no request.
func New(cfg Config) (*Client, error) {
	host, secure, err := parseEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	if cfg.Bucket == "" {
		return nil, errors.New("no bucket")
	}
	if (cfg.AccessKey == "") != (cfg.SecretKey == "") {
		return nil, errors.New("an access key needs its secret key, and a secret key its access key")
	}
	partSize := cfg.PartSize
	if partSize == 0 {
		partSize = DefaultPartSize
	}
	if partSize < minPartSize {
		return nil, fmt.Errorf("part size %d is below the 5 MiB that S3 accepts", partSize)
	}
	transport, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, fmt.Errorf("while setting up the HTTP transport: %w", err)
	}
	if secure && len(cfg.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CA) {
			return nil, errors.New("the CA bundle holds no PEM certificate")
		}
		transport.TLSClientConfig.RootCAs = pool
	}
	threads := cfg.Concurrency
	if threads <= 0 {
		threads = 2
	}
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = 3
	case retries < 0:
		retries = 1 // minio-go counts tries, not retries
	default:
		retries++
	}
	mc, err := minio.New(host, &minio.Options{
		Creds:      credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken),
		Secure:     secure,
		Transport:  transport,
		Region:     cfg.Region,
		MaxRetries: retries,
	})
	if err != nil {
		return nil, fmt.Errorf("while setting up the S3 client for %s: %w", cfg.Endpoint, err)
	}
	return &Client{mc: mc, bucket: cfg.Bucket, prefix: normalizePrefix(cfg.Prefix), endpoint: cfg.Endpoint, partSize: partSize, threads: uint(threads)}, nil
}

// parseEndpoint returns the host[:port] of an endpoint URL and whether it is HTTPS.
func parseEndpoint(endpoint string) (host string, secure bool, err error) {
	if endpoint == "" {
		return "", false, errors.New("no endpoint")
	}
	raw := endpoint
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", false, fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", false, fmt.Errorf("endpoint %q: the scheme must be http or https", endpoint)
	case u.Host == "" || u.Hostname() == "":
		return "", false, fmt.Errorf("endpoint %q has no host", endpoint)
	case u.User != nil:
		return "", false, fmt.Errorf("endpoint %q: credentials go in the access and secret keys, not the URL", endpoint)
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
		return "", false, fmt.Errorf("endpoint %q: only scheme, host and port are allowed (the bucket and prefix are set apart)", endpoint)
	}
	return u.Host, u.Scheme == "https", nil
}

// normalizePrefix returns prefix without leading or doubled slashes and with one trailing
// slash, or "" for the bucket's root.
func normalizePrefix(prefix string) string {
	parts := slices.DeleteFunc(strings.Split(prefix, "/"), func(s string) bool { return s == "" })
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "/") + "/"
}

// key returns the full key of name.
func (c *Client) key(name string) (string, error) {
	if name == "" || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") {
		return "", fmt.Errorf("object name %q: it must be non-empty and neither start nor end with /", name)
	}
	return c.prefix + name, nil
}

// Location is the bucket and prefix as s3://bucket/prefix, for messages.
func (c *Client) Location() string { return "s3://" + c.bucket + "/" + c.prefix }

// Put uploads the content r gives until EOF as the object name, replacing any object of
// that name. size is the content's length, or -1 when unknown (then the upload goes in parts
// of PartSize, so the object can be at most 10,000 parts). Put reads r once, and returns
// the size and SHA-256 of what it read and the store accepted.
func (c *Client) Put(ctx context.Context, name string, r io.Reader, size int64) (Object, error) {
	h := sha256.New()
	obj, err := c.PutUnhashed(ctx, name, io.TeeReader(r, h), size)
	if err == nil {
		obj.SHA256 = hex.EncodeToString(h.Sum(nil))
	}
	return obj, err
}

// PutUnhashed is Put without the SHA-256, for a caller that hashes the content on its way in
// (a shard's snapshot is hashed as it arrives from the node): on a machine whose cores the
// node, the store and the operator share, a second pass over every byte slows the copy. The
// Object's SHA256 is empty. Every part still carries a CRC32C the store checks.
func (c *Client) PutUnhashed(ctx context.Context, name string, r io.Reader, size int64) (Object, error) {
	key, err := c.key(name)
	if err != nil {
		return Object{}, err
	}
	src := &countingReader{r: r}
	info, err := c.mc.PutObject(ctx, c.bucket, key, src, size, minio.PutObjectOptions{
		PartSize:    c.partSize,
		ContentType: "application/octet-stream",
		// Parts fill from src while earlier ones upload: the source is read at the speed of
		// the slower side, not of both in turn.
		ConcurrentStreamParts: c.threads > 1,
		NumThreads:            c.threads,
	})
	if err != nil {
		return Object{}, c.classify("uploading "+key, err)
	}
	if size >= 0 && src.n != size {
		return Object{}, fmt.Errorf("while uploading %s: the source gave %d bytes, not the %d announced", key, src.n, size)
	}
	if info.Size != src.n {
		return Object{}, fmt.Errorf("while uploading %s: the store recorded %d bytes of the %d sent", key, info.Size, src.n)
	}
	return Object{Name: name, Key: key, Digest: Digest{Size: src.n}, ETag: info.ETag, LastModified: info.LastModified}, nil
}

// Get downloads the object name into w as it arrives, and returns its size and SHA-256.
// When want is not nil, a content whose size or SHA-256 (where want has one) differs is an
// ErrChecksum error: the bytes already written to w are then not that content, and the
// caller discards them.
func (c *Client) Get(ctx context.Context, name string, w io.Writer, want *Digest) (Object, error) {
	key, err := c.key(name)
	if err != nil {
		return Object{}, err
	}
	obj, err := c.mc.GetObject(ctx, c.bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return Object{}, c.classify("downloading "+key, err)
	}
	defer func() { _ = obj.Close() }()
	h := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(w, h), obj, make([]byte, 256<<10))
	if err != nil {
		return Object{}, c.classify("downloading "+key, err)
	}
	got := Object{Name: name, Key: key, Digest: Digest{Size: n, SHA256: hex.EncodeToString(h.Sum(nil))}}
	if info, err := obj.Stat(); err == nil {
		got.ETag, got.LastModified = info.ETag, info.LastModified
	}
	if want != nil {
		if err := got.Verify(*want); err != nil {
			return got, fmt.Errorf("while downloading %s: %w", key, err)
		}
	}
	return got, nil
}

// Verify returns an ErrChecksum error when d differs from want in size, or in SHA-256 where
// want has one.
func (d Digest) Verify(want Digest) error {
	switch {
	case d.Size != want.Size:
		return fmt.Errorf("%w: %d bytes where %d were expected", ErrChecksum, d.Size, want.Size)
	case want.SHA256 != "" && !strings.EqualFold(d.SHA256, want.SHA256):
		return fmt.Errorf("%w: SHA-256 %s where %s was expected", ErrChecksum, d.SHA256, want.SHA256)
	}
	return nil
}

// List returns the objects whose names start with prefix (relative to the Client's prefix;
// "" lists them all), at any depth, sorted by name.
func (c *Client) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	for info := range c.mc.ListObjectsIter(ctx, c.bucket, minio.ListObjectsOptions{Prefix: c.prefix + prefix, Recursive: true}) {
		if info.Err != nil {
			return nil, c.classify("listing "+c.Location()+prefix, info.Err)
		}
		out = append(out, Object{
			Name: strings.TrimPrefix(info.Key, c.prefix), Key: info.Key, Digest: Digest{Size: info.Size},
			ETag: info.ETag, LastModified: info.LastModified,
		})
	}
	slices.SortFunc(out, func(a, b Object) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Delete removes the object name. Removing an object that does not exist is not an error.
func (c *Client) Delete(ctx context.Context, name string) error {
	key, err := c.key(name)
	if err != nil {
		return err
	}
	if err := c.mc.RemoveObject(ctx, c.bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return c.classify("deleting "+key, err)
	}
	return nil
}

// Check makes one request that needs the endpoint, the credentials and the bucket: an
// error says which of them is wrong (ErrUnreachable, ErrTLS, ErrAccessDenied, ErrNoBucket).
// It lists at most one object under the prefix rather than asking HEAD of the bucket, whose
// answer has no body: some stores answer an unknown access key with a bare 404 there.
func (c *Client) Check(ctx context.Context) error {
	for info := range c.mc.ListObjectsIter(ctx, c.bucket, minio.ListObjectsOptions{Prefix: c.prefix, MaxKeys: 1}) {
		if info.Err != nil {
			return c.classify("checking bucket "+c.bucket, info.Err)
		}
	}
	return nil
}

// CreateBucket creates the bucket unless it exists. The operator never calls it (a backup
// into a missing bucket fails); the local cluster and tests do.
func (c *Client) CreateBucket(ctx context.Context) error {
	err := c.mc.MakeBucket(ctx, c.bucket, minio.MakeBucketOptions{})
	if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
		return nil
	}
	if err != nil {
		return c.classify("creating bucket "+c.bucket, err)
	}
	return nil
}

// classify is err, from doing, as a RequestError of the matching kind.
func (c *Client) classify(doing string, err error) error {
	return &RequestError{Doing: doing, Endpoint: c.endpoint, Kind: kindOf(err), Status: minio.ToErrorResponse(err).StatusCode, cause: err}
}

// kindOf returns the class of err: one of the Err* errors, or the context's error.
func kindOf(err error) error {
	if resp := minio.ToErrorResponse(err); resp.Code != "" || resp.StatusCode != 0 {
		switch resp.Code {
		case minio.NoSuchKey:
			return ErrNotFound
		case minio.NoSuchBucket:
			return ErrNoBucket
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken",
			"XAdminUserNotFound": // versitygw's answer to an unknown access key (with a 404)
			return ErrAccessDenied
		}
		switch resp.StatusCode {
		case 401, 403:
			return ErrAccessDenied
		case 404:
			return ErrNotFound
		}
		return ErrBadResponse
	}
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		netErr           net.Error
	)
	switch {
	case errors.Is(err, context.Canceled):
		return context.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return context.DeadlineExceeded
	case errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalid):
		return ErrTLS
	case strings.Contains(err.Error(), "malformed HTTP"), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		// An answer that is not HTTP (another protocol's port), whose bytes Go's client quotes.
		return ErrBadResponse
	case errors.As(err, &netErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		// No HTTP answer, or the connection broke during one.
		return ErrUnreachable
	}
	return ErrBadResponse
}

// countingReader counts what is read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n += int64(n)
	return n, err
}
