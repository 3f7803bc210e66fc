package plugin

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/tests/localcluster"
	"github.com/middleware-operator/middleware-operator/tests/redispods"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

var (
	env   *testenv.Env
	store *localcluster.ObjectStore
	// pluginBin and operatorBin are the built kubectl-middleware and operator; operatorLog
	// is the suite's operator's output.
	pluginBin, operatorBin, operatorLog string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if env, err = testenv.Start(context.Background(), 3); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer env.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kubelet, err := redispods.Watching(env.Cluster.Config, filepath.Join(env.Cluster.Dir, "redis-data"), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubeletDone := make(chan struct{})
	go func() { kubelet.Run(ctx); close(kubeletDone) }()
	defer func() { cancel(); <-kubeletDone }()
	if store, err = localcluster.StartObjectStore(ctx, localcluster.ObjectStoreOptions{Dir: filepath.Join(env.Cluster.Dir, "objectstore")}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer store.Stop()
	pluginBin = filepath.Join(env.Cluster.Dir, "kubectl-middleware")
	operatorBin = filepath.Join(env.Cluster.Dir, "manager")
	for bin, pkg := range map[string]string{pluginBin: "./cmd/kubectl-middleware", operatorBin: "."} {
		build := exec.Command("go", "build", "-o", bin, pkg)
		build.Dir = testenv.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build %s: %v\n%s", pkg, err, out)
			return 1
		}
	}
	stop, err := startOperator(operatorBin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	stop()
	if code != 0 {
		if data, err := os.ReadFile(operatorLog); err == nil {
			fmt.Fprintf(os.Stderr, "operator log (last 8 KiB):\n%s\n", data[max(0, len(data)-8192):])
		}
	}
	return code
}

// startOperator runs the operator binary with leader election in namespace default, as the
// e2e suite does; it returns once the operator holds the Lease.
func startOperator(bin string) (func(), error) {
	operatorLog = filepath.Join(env.Cluster.Dir, "operator.log")
	f, err := os.Create(operatorLog)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--kubeconfig="+env.Cluster.Kubeconfig, "--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--leader-elect", "--leader-election-namespace=default")
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := testenv.StopProcess(cmd, f)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if data, _ := os.ReadFile(operatorLog); strings.Contains(strings.ToLower(string(data)), "successfully acquired lease") {
			return stop, nil
		}
	}
	stop()
	data, _ := os.ReadFile(operatorLog)
	return nil, fmt.Errorf("the operator never took the Lease:\n%s", data)
}

// plugin runs kubectl-middleware with args against the cluster and returns its stdout; it
// fails the test when the plugin fails.
func plugin(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := pluginErr(args...)
	if err != nil {
		t.Fatalf("kubectl middleware %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func pluginErr(args ...string) (string, string, error) {
	cmd := exec.Command(pluginBin, append([]string{"--kubeconfig", env.Cluster.Kubeconfig}, args...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}
