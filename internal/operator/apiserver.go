package operator

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// WaitForAPIServer returns once the API server of cfg answers GET /version, or with ctx's
// error when ctx ends first. The manager cannot be built without the API server (its cache
// asks the server's discovery which kinds are namespaced), so an operator started during an
// API server outage would otherwise exit at once and be restarted in a loop; this way it
// waits, logging every failure with a back-off of up to 10 s. Meanwhile, unless probeAddr is
// "" or "0", it answers the kubelet's probes there: /healthz as alive (a restart would not
// help) and /readyz as not ready.
func WaitForAPIServer(ctx context.Context, cfg *rest.Config, probeAddr string, log logr.Logger) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = 5 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return err
	}
	stopProbes, err := serveWaitingProbes(probeAddr)
	if err != nil {
		return err
	}
	defer stopProbes()
	for delay := time.Second; ; delay = min(2*delay, 10*time.Second) {
		_, err := dc.ServerVersion()
		if err == nil {
			return nil
		}
		log.Info("waiting for the API server", "error", err.Error(), "retryIn", delay.String())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
}

// serveWaitingProbes serves /healthz (200) and /readyz (503) on addr until the returned
// function is called; "" and "0" serve nothing.
func serveWaitingProbes(addr string) (func(), error) {
	if addr == "" || addr == "0" {
		return func() {}, nil
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "waiting for the API server", http.StatusServiceUnavailable)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(l) }()
	return func() { _ = srv.Close(); <-done }, nil
}
