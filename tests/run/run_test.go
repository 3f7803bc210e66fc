// Package run drives `make run`'s script as a newcomer would: on a machine with no cluster
// configured, it starts the local cluster and the operator; the three samples are applied
// with kubectl and become ready, a RedisCluster is used with redis-cli, and a SIGTERM stops
// everything it started.
package run

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/middleware-operator/middleware-operator/internal/objectstore"
	"github.com/middleware-operator/middleware-operator/tests/proctable"

	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		_ = c.Close()
	}
	return err == nil
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestMakeRunServesEveryKindAndStopsCleanly(t *testing.T) {
	root := testenv.RepoRoot()
	bin := filepath.Join(root, "bin")
	if _, err := os.Stat(filepath.Join(bin, "kubectl")); err != nil {
		t.Fatalf("the tools are not built (make tools): %v", err)
	}
	goenv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH").Output()
	if err != nil {
		t.Fatal(err)
	}
	goVars := strings.Split(strings.TrimSpace(string(goenv)), "\n")
	if len(goVars) != 3 {
		t.Fatalf("go env printed %q", goenv)
	}
	cache := t.TempDir()
	kubeconfig := filepath.Join(cache, "middleware-operator", "run", "kubeconfig")
	ports := testenv.FreePorts(t, 2)
	metrics, probe := ports[0], ports[1]
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	start := time.Now()
	script := exec.Command("bash", filepath.Join(root, "hack", "run.sh"))
	script.Dir = root
	// A newcomer's machine: no KUBECONFIG, no ~/.kube/config (HOME is empty); the Go build
	// and module caches are kept, so the test neither rebuilds nor downloads the world.
	script.Env = append(withoutVar(os.Environ(), "KUBECONFIG"), "XDG_CACHE_HOME="+cache, "HOME="+cache,
		"GOCACHE="+goVars[0], "GOMODCACHE="+goVars[1], "GOPATH="+goVars[2], "METRICS_ADDR=127.0.0.1:"+strconv.Itoa(metrics), "PROBE_ADDR=127.0.0.1:"+strconv.Itoa(probe))
	script.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &testenv.LockedBuffer{}
	pipe, err := script.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	script.Stderr = out
	if err := script.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(pipe)
		for s.Scan() {
			_, _ = fmt.Fprintln(out, s.Text())
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- script.Wait() }()
	defer func() {
		_ = syscall.Kill(-script.Process.Pid, syscall.SIGKILL)
		if t.Failed() {
			t.Logf("make run's output:\n%s", out.String())
		}
	}()

	testenv.Eventually(t, 5*time.Minute, func(context.Context) (bool, string) {
		return strings.Contains(out.String(), "running the operator"), "the script has not started the operator yet"
	})
	t.Logf("make run reached \"running the operator\" in %s", time.Since(start).Round(100*time.Millisecond))
	objectStore := checkObjectStore(t, out.String())

	kubectl := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
		b, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(b)), err
	}
	defer func() { // runs before the script is killed: the cluster is still there to ask
		if !t.Failed() {
			return
		}
		got, _ := kubectl("get", "pods,redisclusters", "-o", "wide")
		t.Logf("pods and RedisClusters when the test failed:\n%s", got)
		got, _ = kubectl("get", "rediscluster", "redis-cluster", "-o", "jsonpath={.status.reason} {.status.conditions}")
		t.Logf("the RedisCluster's reason and conditions: %s", got)
		if b, err := os.ReadFile(filepath.Join(filepath.Dir(kubeconfig), "cluster.log")); err == nil {
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("the last lines of cluster.log (the local cluster and its Redis pod runner):\n%s", strings.Join(lines[max(0, len(lines)-80):], "\n"))
		}
	}()
	applied := time.Now()
	for _, sample := range []string{"apps_v1_appservice.yaml", "apps_v1_cloudmanager.yaml", "redis_v1alpha1_rediscluster.yaml"} {
		if got, err := kubectl("apply", "-f", filepath.Join(root, "config", "samples", sample)); err != nil {
			t.Fatalf("kubectl apply %s: %v: %s", sample, err, got)
		}
	}
	waitFor := func(what string, args []string, want string) {
		t.Helper()
		testenv.Eventually(t, 3*time.Minute, func(context.Context) (bool, string) {
			got, err := kubectl(args...)
			return err == nil && got == want, fmt.Sprintf("%s: %q (%v)", what, got, err)
		})
		t.Logf("%s after %s", what, time.Since(applied).Round(100*time.Millisecond))
	}
	appService, _ := kubectl("get", "appservices", "-o", "jsonpath={.items[0].metadata.name}")
	cloudManager, _ := kubectl("get", "cloudmanagers", "-o", "jsonpath={.items[0].metadata.name}")
	waitFor("AppService Available", []string{"get", "appservice", appService, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`}, "True")
	waitFor("CloudManager Ready", []string{"get", "cloudmanager", cloudManager, "-o", "jsonpath={.status.phase}"}, "Ready")
	waitFor("RedisCluster Running", []string{"get", "rediscluster", "redis-cluster", "-o", "jsonpath={.status.phase}/{.status.slotsOk}"}, "Running/16384")

	// cliOf runs redis-cli -c against the first pod of a RedisCluster, with its password.
	cliOf := func(cluster string) (func(args ...string) string, string) {
		password, err := kubectl("get", "secret", cluster+"-password", "-o", "jsonpath={.data.password}")
		if err != nil {
			t.Fatal(err)
		}
		dec := exec.Command("base64", "-d")
		dec.Stdin = strings.NewReader(password)
		pw, err := dec.Output()
		if err != nil {
			t.Fatal(err)
		}
		podIP, _ := kubectl("get", "pod", cluster+"-0", "-o", "jsonpath={.status.podIP}")
		return func(args ...string) string {
			cmd := exec.CommandContext(ctx, "redis-cli", append([]string{"-c", "-h", podIP}, args...)...)
			cmd.Env = append(os.Environ(), "REDISCLI_AUTH="+string(pw))
			b, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("redis-cli %v: %v: %s", args, err, b)
			}
			return strings.TrimSpace(string(b))
		}, podIP
	}
	redisCLI, podIP := cliOf("redis-cluster")
	for i := range 20 {
		redisCLI("set", "k"+strconv.Itoa(i), strconv.Itoa(i))
	}
	for i := range 20 {
		if got := redisCLI("get", "k"+strconv.Itoa(i)); got != strconv.Itoa(i) {
			t.Errorf("redis-cli -c get k%d through %s = %q", i, podIP, got)
		}
	}

	// docs/backup.md's and docs/recovery.md's local recipes, run as written: the backup
	// holds the 20 keys, and the cluster restored from it serves them.
	runRecipe(t, root, "docs/backup.md", cache, kubeconfig)
	if got, _ := kubectl("get", "redisbackup", "first", "-o", "jsonpath={.status.phase}/{.status.keys}"); got != "Completed/20" {
		t.Errorf("the backup recipe's RedisBackup first is %q, want Completed/20", got)
	}
	runRecipe(t, root, "docs/recovery.md", cache, kubeconfig)
	restoredCLI, restoredIP := cliOf("redis-cluster-restored")
	for i := range 20 {
		if got := restoredCLI("get", "k"+strconv.Itoa(i)); got != strconv.Itoa(i) {
			t.Errorf("the restored cluster: redis-cli -c get k%d through %s = %q, want %d", i, restoredIP, got, i)
		}
	}
	t.Logf("backed up and restored by the docs' recipes %s after the samples were applied", time.Since(applied).Round(100*time.Millisecond))

	scrapeMetrics(t, kubectl, root, "127.0.0.1:"+strconv.Itoa(metrics))

	warnings, _ := kubectl("get", "events", "-A", "--field-selector", "type=Warning", "-o",
		"custom-columns=REASON:.reason,OBJECT:.involvedObject.name,MESSAGE:.message", "--no-headers")
	for line := range strings.SplitSeq(warnings, "\n") {
		if strings.Contains(line, "FailedToUpdateEndpoint") || strings.Contains(line, "loopback") ||
			strings.HasPrefix(line, "ClaimLost") || strings.HasPrefix(line, "ProvisioningFailed") {
			t.Errorf("a Warning of the simulation, not of a real problem: %s", line)
		} else if line != "" {
			t.Logf("Warning event (a real cluster gives it too): %s", line)
		}
	}

	apiserver, _ := kubectl("config", "view", "-o", "jsonpath={.clusters[0].cluster.server}")
	apiserver = strings.TrimPrefix(apiserver, "https://")
	procs := proctable.Descendants(script.Process.Pid)
	if len(procs) < 5 {
		t.Errorf("only %d processes under make run: the test would prove nothing", len(procs))
	}
	stopped := time.Now()
	if err := syscall.Kill(-script.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		t.Logf("make run exited: %v", err)
	case <-time.After(90 * time.Second):
		t.Fatal("make run did not exit within 90 s of SIGTERM")
	}
	t.Logf("SIGTERM to exit: %s", time.Since(stopped).Round(100*time.Millisecond))
	time.Sleep(time.Second)
	for _, pid := range procs {
		if alive(pid) {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			t.Errorf("process %d outlived make run: %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
	}
	for _, addr := range []string{apiserver, podIP + ":6379", "127.0.0.1:" + strconv.Itoa(metrics), "127.0.0.1:" + strconv.Itoa(probe), objectStore} {
		if listening(addr) {
			t.Errorf("%s still accepts connections after make run stopped", addr)
		}
	}
}

// checkObjectStore reads the object store's settings in make run's message (the export
// lines a user copies), and checks that the store serves the bucket over HTTPS with the
// printed credentials and CA: an object goes up and comes back. It returns the store's
// host:port.
func checkObjectStore(t *testing.T, output string) string {
	t.Helper()
	vars := map[string]string{}
	for line := range strings.SplitSeq(output, "\n") {
		if name, value, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "export "), "="); ok && (strings.HasPrefix(name, "MWO_S3_") || strings.HasPrefix(name, "AWS_")) {
			vars[name] = strings.Trim(value, "'") // single-quoted for the shell; no value holds a quote
		}
	}
	ca, err := os.ReadFile(vars["MWO_S3_CA_FILE"])
	if err != nil {
		t.Fatalf("make run printed no readable object store CA (%v); its variables: %v", err, vars)
	}
	c, err := objectstore.New(objectstore.Config{Endpoint: vars["MWO_S3_ENDPOINT"], Bucket: vars["MWO_S3_BUCKET"], Region: vars["MWO_S3_REGION"],
		AccessKey: vars["AWS_ACCESS_KEY_ID"], SecretKey: vars["AWS_SECRET_ACCESS_KEY"], CA: ca})
	if err != nil {
		t.Fatalf("the printed object store settings %v: %v", vars, err)
	}
	if err := c.Check(t.Context()); err != nil {
		t.Fatalf("the object store make run printed: %v", err)
	}
	put, err := c.Put(t.Context(), "make-run/hello.txt", strings.NewReader("hello"), 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(t.Context(), "make-run/hello.txt", io.Discard, &put.Digest); err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(vars["MWO_S3_ENDPOINT"], "https://")
}

// withoutVar is env without the variable name.
func withoutVar(env []string, name string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, name+"=") {
			out = append(out, e)
		}
	}
	return out
}

// scrapeMetrics reads the operator's metrics endpoint as Prometheus would, through its
// authentication and authorization: a ServiceAccount bound to the metrics-reader ClusterRole
// gets 200 and the operator's own metrics (the seed RedisCluster with every slot reachable),
// clean under the linter promtool check metrics runs; one without the binding gets 403, a
// request without a token 401.
func scrapeMetrics(t *testing.T, kubectl func(args ...string) (string, error), root, addr string) {
	t.Helper()
	for _, args := range [][]string{
		{"apply", "-f", filepath.Join(root, "config", "rbac", "metrics_reader_role.yaml")},
		{"create", "serviceaccount", "scraper"},
		{"create", "serviceaccount", "stranger"},
		{"create", "clusterrolebinding", "scraper-metrics", "--clusterrole=metrics-reader", "--serviceaccount=default:scraper"},
	} {
		if out, err := kubectl(args...); err != nil {
			t.Fatalf("kubectl %v: %v: %s", args, err, out)
		}
	}
	token := func(sa string) string {
		out, err := kubectl("create", "token", sa)
		if err != nil {
			t.Fatalf("kubectl create token %s: %v: %s", sa, err, out)
		}
		return out
	}
	// The endpoint's certificate is self-signed, as in a cluster without cert-manager.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed local endpoint
	get := func(bearer string) (int, string) {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+addr+"/metrics", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	var body string
	testenv.Eventually(t, time.Minute, func(context.Context) (bool, string) { // the binding takes a moment to count
		var code int
		code, body = get(token("scraper"))
		return code == http.StatusOK && strings.Contains(body, `middleware_operator_rediscluster_slots_ok{name="redis-cluster",namespace="default"} 16384`),
			fmt.Sprintf("GET /metrics with metrics-reader: %d", code)
	})
	t.Logf("the scrape is %d bytes", len(body))
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "middleware_operator_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		} else {
			t.Logf("lint (not ours): %s: %s", p.Metric, p.Text)
		}
	}
	// And the real promtool (make tools builds it), whose findings on others' metrics are
	// only logged.
	check := exec.CommandContext(t.Context(), filepath.Join(root, "bin", "promtool"), "check", "metrics")
	check.Stdin = strings.NewReader(body)
	out, err := check.CombinedOutput()
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(line, "middleware_operator_") {
			t.Errorf("promtool check metrics: %s", line)
		}
	}
	t.Logf("promtool check metrics: %v; %d lines about others' metrics", err, strings.Count(string(out), "\n"))
	if code, _ := get(token("stranger")); code != http.StatusForbidden {
		t.Errorf("GET /metrics as a ServiceAccount without metrics-reader: %d, want 403", code)
	}
	if code, _ := get(""); code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token: %d, want 401", code)
	}
}
