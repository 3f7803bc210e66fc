package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// buildDir holds the binaries the bench runs as processes, built once per test binary.
var buildDir = sync.OnceValues(func() (string, error) { return os.MkdirTemp("", "mwo-bench-") })

// binary builds the main package at pkg (relative to the repository) once, as its image
// builds it (static, CGO_ENABLED=0, with flags), and returns its path: the resident set
// measured is then that of the binary a pod runs (a default build links the C library and
// maps its pages too).
func binary(pkg string, flags ...string) (string, error) {
	dir, err := buildDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, strings.ReplaceAll(strings.Trim(pkg, "./"), "/", "-")+"manager")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	build := exec.Command("go", append(append([]string{"build", "-o", bin}, flags...), pkg)...)
	build.Dir = testenv.RepoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// operatorBuildFlags are the Dockerfile's link flags for the operator's binary; its
// -trimpath is left out (it only shortens the file names in the binary, and would rebuild
// every dependency outside the test's build cache: minutes on a fresh machine). The
// memcached sample's scaffolded Dockerfile builds with no flag but -a (a forced rebuild).
// A package is built one way only: the path is not keyed by the flags.
var operatorBuildFlags = []string{"-ldflags=-s -w"}

// process is an operator run as a process of its own, as a pod runs it, so its memory is
// its own: peak and current resident set from /proc, its API requests from its metrics.
type process struct {
	cmd     *exec.Cmd
	metrics string // host:port of its plain-HTTP metrics endpoint
	pprof   string // host:port of its pprof endpoints, if it serves them
	log     *os.File
}

// startProcess runs bin with kubeconfig and args, its metrics on a free local port (given to
// it as metricsFlag=host:port) and its output in logPath.
func startProcess(bin, kubeconfig, logPath, metricsFlag string, args ...string) (*process, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{metricsFlag + "=" + addr}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, err
	}
	return &process{cmd: cmd, metrics: addr, log: log}, nil
}

// saveHeapProfile writes the process's heap profile (after a GC) to path, for
// go tool pprof -sample_index=inuse_space -top.
func (p *process) saveHeapProfile(ctx context.Context, path string) error {
	return p.saveProfile(ctx, "heap?gc=1", path)
}

// startCPUProfile starts a CPU profile of the process over window, written to path, and
// returns the function that waits for it; with path "" it profiles nothing.
func (p *process) startCPUProfile(ctx context.Context, window time.Duration, path string) (wait func() error) {
	if path == "" {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() { done <- p.saveProfile(ctx, fmt.Sprintf("profile?seconds=%d", int(window.Seconds())), path) }()
	return func() error { return <-done }
}

// saveProfile writes what the process's pprof endpoint serves at /debug/pprof/<query> to path.
func (p *process) saveProfile(ctx context.Context, query, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.pprof+"/debug/pprof/"+query, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("while reading the profile %s: %w", query, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the pprof endpoint answered %s", resp.Status)
	}
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// stop ends the process and closes its log.
func (p *process) stop() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	_ = p.log.Close()
}

// memory is the process's resident set now and at its peak (VmRSS and VmHWM), and the part
// of it now that is file-backed (RssFile: mostly the binary's pages), in bytes.
func (p *process) memory() (rss, peak, file uint64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0, 0, err
	}
	fields := map[string]*uint64{"VmRSS": &rss, "VmHWM": &peak, "RssFile": &file}
	for line := range strings.SplitSeq(string(data), "\n") {
		field, value, ok := strings.Cut(line, ":")
		if !ok || fields[field] == nil {
			continue
		}
		kib, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("%s in /proc/%d/status: %w", field, p.cmd.Process.Pid, err)
		}
		*fields[field] = kib << 10
	}
	return rss, peak, file, nil
}

// cpuSeconds is the user and system CPU time the process has used.
func (p *process) cpuSeconds() (float64, error) { return processCPU(p.cmd.Process.Pid) }

// scrape reads the process's metrics, uncompressed: benches sample them every 250 ms while
// they time the operator, whose gzip of each answer then cost it a tenth of its CPU.
func (p *process) scrape(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metrics+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, &scrapeRefused{status: resp.Status}
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// scrapeRefused is a metrics endpoint's answer other than 200 OK.
type scrapeRefused struct{ status string }

func (e *scrapeRefused) Error() string { return "the metrics endpoint answered " + e.status }

// goMemory is the Go heap in use and all the memory the Go runtime holds from the system,
// from the process's go_memstats_* metrics.
func goMemory(families map[string]*dto.MetricFamily) (heap, sys uint64) {
	gauge := func(name string) uint64 {
		for _, m := range families[name].GetMetric() {
			return uint64(m.GetGauge().GetValue())
		}
		return 0
	}
	return gauge("go_memstats_heap_inuse_bytes"), gauge("go_memstats_sys_bytes")
}

// apiWrites counts the process's API requests that write (POST, PUT, PATCH, DELETE), from
// client-go's rest_client_requests_total.
func apiWrites(families map[string]*dto.MetricFamily) int64 {
	var n float64
	for _, m := range families["rest_client_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "method" && l.GetValue() != http.MethodGet {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return int64(n)
}

// sumWhere sums the values (counter or gauge) of family's series whose label is value.
func sumWhere(families map[string]*dto.MetricFamily, family, label, value string) float64 {
	var v float64
	for _, m := range families[family].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return v
}

// settled reports whether the named controller has reconciled at least n times and has
// nothing queued or in progress.
func settled(families map[string]*dto.MetricFamily, controller string, n int) bool {
	return sumWhere(families, "controller_runtime_reconcile_total", "controller", controller) >= float64(n) &&
		sumWhere(families, "workqueue_depth", "name", controller) == 0 &&
		sumWhere(families, "controller_runtime_active_workers", "controller", controller) == 0
}

// waitSettled waits until the process's controller has reconciled n objects and is idle.
func (p *process) waitSettled(ctx context.Context, controller string, n int) (float64, error) {
	return waitFor(ctx, time.Now(), controller+" settled", func(ctx context.Context) (bool, error) {
		families, err := p.scrape(ctx)
		var refused *scrapeRefused
		if errors.As(err, &refused) {
			return false, err
		}
		if err != nil {
			return false, nil // not serving yet
		}
		return settled(families, controller, n), nil
	})
}

// freePort is a free local TCP address, below the kernel's ephemeral range (see
// localcluster.FreePorts).
func freePort() (string, error) {
	ports, err := localcluster.FreePorts(1)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", ports[0]), nil
}
