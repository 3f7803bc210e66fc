package teststore

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/middleware-operator/middleware-operator/tests/localcluster"
)

// Counting is an HTTPS reverse proxy in front of an object store that counts the requests
// it passes on, so that a test can tell how often the operator read the store.
type Counting struct {
	// Endpoint is the proxy's URL, to name in a spec instead of the store's.
	Endpoint string
	// CA is the PEM of the proxy's certificate, for a caSecret.
	CA []byte

	mu       sync.Mutex
	requests []string // "METHOD path", in order
}

// Count starts a counting proxy in front of store, stopped when the test ends. The client's
// signature stays valid: the proxy passes the Host header on as it came.
func Count(t testing.TB, store *localcluster.ObjectStore) *Counting {
	t.Helper()
	target, err := url.Parse(store.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(store.CA) {
		t.Fatal("the store's CA is not PEM")
	}
	c := &Counting{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.requests = append(c.requests, r.Method+" "+r.URL.Path)
		c.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c.Endpoint = srv.URL
	c.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return c
}

// Requests counts the requests passed on whose method is method ("" for any) and whose path
// ends with suffix ("" for any).
func (c *Counting) Requests(method, suffix string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, r := range c.requests {
		m, path, _ := strings.Cut(r, " ")
		if (method == "" || m == method) && strings.HasSuffix(path, suffix) {
			n++
		}
	}
	return n
}
