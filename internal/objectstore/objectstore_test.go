package objectstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
)

func TestParseEndpoint(t *testing.T) {
	cases := map[string]struct {
		endpoint string
		host     string
		secure   bool
		err      string
	}{
		"https URL":              {endpoint: "https://s3.eu-west-1.amazonaws.com", host: "s3.eu-west-1.amazonaws.com", secure: true},
		"http URL with port":     {endpoint: "http://minio.storage.svc:9000", host: "minio.storage.svc:9000"},
		"trailing slash":         {endpoint: "https://127.0.0.1:7070/", host: "127.0.0.1:7070", secure: true},
		"bare host means https":  {endpoint: "rgw.example.com:8443", host: "rgw.example.com:8443", secure: true},
		"IPv6":                   {endpoint: "http://[::1]:9000", host: "[::1]:9000"},
		"empty":                  {endpoint: "", err: "no endpoint"},
		"other scheme":           {endpoint: "s3://bucket", err: "scheme must be http or https"},
		"path":                   {endpoint: "https://s3.example.com/bucket", err: "only scheme, host and port"},
		"query":                  {endpoint: "https://s3.example.com?x=1", err: "only scheme, host and port"},
		"credentials in the URL": {endpoint: "https://key:secret@s3.example.com", err: "access and secret keys"},
		"no host":                {endpoint: "https://:9000", err: "has no host"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			host, secure, err := parseEndpoint(tc.endpoint)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || host != tc.host || secure != tc.secure {
				t.Fatalf("got %q secure=%v err=%v, want %q secure=%v", host, secure, err, tc.host, tc.secure)
			}
		})
	}
}

func TestPrefixAndKeys(t *testing.T) {
	for prefix, want := range map[string]string{
		"": "", "/": "", "a": "a/", "/a/b/": "a/b/", "a//b": "a/b/", "prod/redis": "prod/redis/",
	} {
		if got := normalizePrefix(prefix); got != want {
			t.Errorf("normalizePrefix(%q) = %q, want %q", prefix, got, want)
		}
	}
	c := &Client{prefix: "prod/redis/"}
	for name, want := range map[string]string{
		"cache/0.rdb": "prod/redis/cache/0.rdb", "manifest.json": "prod/redis/manifest.json",
		"": "", "/abs": "", "dir/": "",
	} {
		got, err := c.key(name)
		if want == "" {
			if err == nil {
				t.Errorf("key(%q) = %q, want an error", name, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("key(%q) = %q, %v, want %q", name, got, err, want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	ok := Config{Endpoint: "https://s3.example.com", Bucket: "b", AccessKey: "k", SecretKey: "s"}
	cases := map[string]struct {
		change func(*Config)
		err    string
	}{
		"valid":                    {change: func(*Config) {}},
		"anonymous":                {change: func(c *Config) { c.AccessKey, c.SecretKey = "", "" }},
		"no bucket":                {change: func(c *Config) { c.Bucket = "" }, err: "no bucket"},
		"access key alone":         {change: func(c *Config) { c.SecretKey = "" }, err: "needs its secret key"},
		"secret alone":             {change: func(c *Config) { c.AccessKey = "" }, err: "needs its secret key"},
		"part too small":           {change: func(c *Config) { c.PartSize = 1 << 20 }, err: "below the 5 MiB"},
		"CA not PEM":               {change: func(c *Config) { c.CA = []byte("not a certificate") }, err: "no PEM certificate"},
		"CA ignored on http":       {change: func(c *Config) { c.Endpoint, c.CA = "http://s3.local", []byte("x") }},
		"bad endpoint":             {change: func(c *Config) { c.Endpoint = "ftp://x" }, err: "scheme"},
		"part size of 5 MiB is ok": {change: func(c *Config) { c.PartSize = 5 << 20 }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := ok
			tc.change(&cfg)
			_, err := New(cfg)
			if tc.err == "" && err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

// TestKindOf: every failure is classed, and its message is the class, never the store's
// words: a store's (or any endpoint's) answer is not echoed into statuses and events.
func TestKindOf(t *testing.T) {
	cases := map[string]struct {
		err     error
		want    error
		summary string
	}{
		"no such key":              {err: minio.ErrorResponse{Code: "NoSuchKey", StatusCode: 404, Message: "secret key name"}, want: ErrNotFound, summary: "object not found (HTTP 404)"},
		"no such bucket":           {err: minio.ErrorResponse{Code: "NoSuchBucket", StatusCode: 404, Message: "bucket text"}, want: ErrNoBucket},
		"unknown access key":       {err: minio.ErrorResponse{Code: "InvalidAccessKeyId", StatusCode: 403, Message: "who are you"}, want: ErrAccessDenied},
		"bad signature":            {err: minio.ErrorResponse{Code: "SignatureDoesNotMatch", StatusCode: 403}, want: ErrAccessDenied},
		"versitygw's unknown user": {err: minio.ErrorResponse{Code: "XAdminUserNotFound", StatusCode: 404}, want: ErrAccessDenied},
		"policy":                   {err: minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403, Message: "policy says no"}, want: ErrAccessDenied, summary: "access denied (HTTP 403)"},
		"bare 403 of a HEAD":       {err: minio.ErrorResponse{StatusCode: 403}, want: ErrAccessDenied},
		"server error":             {err: minio.ErrorResponse{Code: "InternalError", StatusCode: 500, Message: "stack trace"}, want: ErrBadResponse, summary: "bad response (HTTP 500)"},
		"a web page":               {err: minio.ErrorResponse{Code: "<html>internal admin page</html>", StatusCode: 200}, want: ErrBadResponse},
		"unknown CA": {err: &url.Error{Op: "Get", URL: "https://x", Err: x509.UnknownAuthorityError{}},
			want: ErrTLS},
		"wrong name": {err: &url.Error{Op: "Get", URL: "https://x", Err: x509.HostnameError{Host: "x"}},
			want: ErrTLS},
		"refused": {err: &url.Error{Op: "Get", URL: "https://x", Err: &net.OpError{Op: "dial", Err: errors.New("connection refused")}},
			want: ErrUnreachable, summary: "while testing at https://x: endpoint unreachable"},
		"another protocol's banner": {err: &url.Error{Op: "Get", URL: "http://x", Err: errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP response "-ERR wrong number of arguments"`)},
			want: ErrBadResponse},
		"cut short": {err: io.ErrUnexpectedEOF, want: ErrUnreachable},
		"cancelled": {err: &url.Error{Op: "Get", URL: "https://x", Err: context.Canceled}, want: context.Canceled},
		"other":     {err: errors.New("short read: the store said hello"), want: ErrBadResponse},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := kindOf(tc.err); got != tc.want { //nolint:errorlint // the sentinels themselves
				t.Fatalf("kindOf(%v) = %v, want %v", tc.err, got, tc.want)
			}
			wrapped := (&Client{endpoint: "https://x"}).classify("testing", tc.err)
			if !errors.Is(wrapped, tc.want) {
				t.Fatalf("%v does not match %v", wrapped, tc.want)
			}
			if cause := tc.err.Error(); strings.Contains(wrapped.Error(), cause) {
				t.Fatalf("%q echoes the store's answer %q", wrapped, cause)
			}
			if !strings.Contains(wrapped.Error(), tc.summary) {
				t.Fatalf("%q does not say %q", wrapped, tc.summary)
			}
			if !strings.Contains(Detail(fmt.Errorf("while x: %w", wrapped)), tc.err.Error()) {
				t.Fatalf("Detail lost the original message %q", tc.err)
			}
		})
	}
}

func TestDigestVerify(t *testing.T) {
	sum := sha256.Sum256([]byte("hello"))
	hello := Digest{Size: 5, SHA256: hex.EncodeToString(sum[:])}
	cases := map[string]struct {
		want Digest
		err  string
	}{
		"same":                 {want: hello},
		"upper-case hex":       {want: Digest{Size: 5, SHA256: strings.ToUpper(hello.SHA256)}},
		"size only":            {want: Digest{Size: 5}},
		"other size":           {want: Digest{Size: 6, SHA256: hello.SHA256}, err: "5 bytes where 6 were expected"},
		"other content":        {want: Digest{Size: 5, SHA256: strings.Repeat("0", 64)}, err: "SHA-256 " + hello.SHA256},
		"empty object allowed": {want: Digest{Size: 5, SHA256: ""}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := hello.Verify(tc.want)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want ErrChecksum containing %q", err, tc.err)
			}
		})
	}
}

func TestCountingReader(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 100_000)
	r := &countingReader{r: bytes.NewReader(data)}
	var out bytes.Buffer
	if _, err := out.ReadFrom(r); err != nil {
		t.Fatal(err)
	}
	if r.n != int64(len(data)) || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("read %d bytes, want %d", r.n, len(data))
	}
}

func ExampleClient_Location() {
	c, _ := New(Config{Endpoint: "https://s3.example.com", Bucket: "backups", Prefix: "/prod//redis/"})
	fmt.Println(c.Location())
	// Output: s3://backups/prod/redis/
}
