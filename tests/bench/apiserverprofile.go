package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
)

// apiServerProfile starts a CPU profile of the local cluster's kube-apiserver over the next
// seconds (its /debug/pprof, as the admin) and returns the function that waits for it and
// writes it to dir/name.pprof; with dir empty it does nothing. The bench uses it to see
// where the API server's time goes in one wave against another.
func apiServerProfile(ctx context.Context, cfg *rest.Config, seconds int, dir, name string) func() error {
	if dir == "" {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() { done <- fetchProfile(ctx, cfg, seconds, filepath.Join(dir, name+".pprof")) }()
	return func() error { return <-done }
}

func fetchProfile(ctx context.Context, cfg *rest.Config, seconds int, path string) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", cfg.Host, seconds), nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("kube-apiserver's profile: %s", resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
