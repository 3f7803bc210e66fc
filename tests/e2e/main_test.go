package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

var (
	env *testenv.Env
	// operatorLog is the running operator's combined output.
	operatorLog string
	// metricsPort and probePort are where the operator serves.
	metricsPort, probePort int
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	env, err = testenv.Start(context.Background(), 3)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Stop()
	stop, err := startOperator()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	stop()
	if code != 0 {
		if data, err := os.ReadFile(operatorLog); err == nil {
			fmt.Fprintf(os.Stderr, "operator log:\n%s\n", data)
		}
	}
	return code
}

// startOperator builds the operator binary and runs it against the cluster.
func startOperator() (func(), error) {
	bin := filepath.Join(env.Cluster.Dir, "manager")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %w\n%s", err, out)
	}
	ports, err := localcluster.FreePorts(2)
	if err != nil {
		return nil, err
	}
	metricsPort, probePort = ports[0], ports[1]
	operatorLog = filepath.Join(env.Cluster.Dir, "operator.log")
	logFile, err := os.Create(operatorLog)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--kubeconfig="+env.Cluster.Kubeconfig,
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metricsPort),
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(probePort),
		"--leader-elect", "--leader-election-namespace=default",
		"--zap-log-level=debug",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := testenv.StopProcess(cmd, logFile)
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort))
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return stop, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	data, _ := os.ReadFile(operatorLog)
	return nil, fmt.Errorf("the operator never became ready:\n%s", data)
}

// kubectl runs the project's kubectl against the cluster and returns its output.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectlErr(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func kubectlErr(args ...string) (string, error) {
	bin := filepath.Join(testenv.RepoRoot(), "bin", "kubectl")
	if dir := os.Getenv("MWO_BIN_DIR"); dir != "" {
		bin = filepath.Join(dir, "kubectl")
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.Cluster.Kubeconfig)
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// metricsGet fetches /metrics with a bearer token (none when empty).
func metricsGet(token string) (int, string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the operator's self-signed serving certificate
	}}
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", metricsPort), nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	var sb strings.Builder
	buf := make([]byte, 32*1024)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, sb.String(), nil
}
