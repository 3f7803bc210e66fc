package operator

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
)

// TestWaitForAPIServer: while the API server fails, the operator waits (probes: alive, not
// ready) instead of returning; it returns once /version answers, and the probe port is free
// again for the manager.
func TestWaitForAPIServer(t *testing.T) {
	var up atomic.Bool
	var calls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if !up.Load() || r.URL.Path != "/version" {
			http.Error(w, "etcd is gone", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"major":"1","minor":"36","gitVersion":"v1.36.3"}`))
	}))
	defer api.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	probeAddr := l.Addr().String()
	_ = l.Close()

	done := make(chan error, 1)
	go func() { done <- WaitForAPIServer(t.Context(), &rest.Config{Host: api.URL}, probeAddr, logr.Discard()) }()
	probe := func(path string) int {
		resp, err := http.Get("http://" + probeAddr + path)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(5 * time.Second)
	for probe("/healthz") != http.StatusOK && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := probe("/healthz"); got != http.StatusOK {
		t.Errorf("/healthz answered %d while waiting, want 200", got)
	}
	if got := probe("/readyz"); got != http.StatusServiceUnavailable {
		t.Errorf("/readyz answered %d while waiting, want 503", got)
	}
	time.Sleep(1500 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("returned while the API server failed: %v", err)
	default:
	}
	if calls.Load() < 2 {
		t.Errorf("%d requests in 1.5 s: it does not retry", calls.Load())
	}
	up.Store(true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting 5 s after the API server came back")
	}
	if l, err := net.Listen("tcp", probeAddr); err != nil {
		t.Errorf("the probe port is still taken: %v", err)
	} else {
		_ = l.Close()
	}

	// Ending the context ends the wait.
	up.Store(false)
	ctx, cancel := context.WithCancel(t.Context())
	go func() { done <- WaitForAPIServer(ctx, &rest.Config{Host: api.URL}, "0", logr.Discard()) }()
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("returned nil after its context ended with the API server down")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("did not return after its context ended")
	}
}
