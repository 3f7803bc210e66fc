// Package testenv gives integration tests a local cluster with the project's CRDs installed
// and a controller-runtime manager running chosen reconcilers in the test process.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/caching"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/tests/localcluster"
)

// LogWriter, when set before Start, receives the debug-level logs of every manager the
// tests run (controller-runtime's logger can be set only once per process).
var LogWriter io.Writer

// FailureReport, when set, is called for the namespace of each test that failed, after the
// test: a suite uses it to print what its operator did there (its steps, from its logs).
var FailureReport func(t *testing.T, namespace string)

// Env is a running local cluster with the CRDs installed.
type Env struct {
	Cluster *localcluster.Cluster
	Scheme  *k8sruntime.Scheme
	Client  client.Client
	// ManagerRequests records every request of the managers StartManager runs.
	ManagerRequests RequestLog
}

// RepoRoot is the repository's top folder.

// crdWait is how long installing CRDs waits for the API server to serve them: envtest's
// 10 s default ran out in a CI run with two suites starting clusters at once.
const crdWait = time.Minute

func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Scheme has the built-in kinds and every kind of this project.
func Scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(appsv1api.AddToScheme(s))
	utilruntime.Must(redisv1alpha1.AddToScheme(s))
	return s
}

// Start starts a local cluster with nodes kwok nodes and installs the CRDs; with
// $MWO_APISERVER_PROFILING set, its kube-apiserver serves /debug/pprof.
func Start(ctx context.Context, nodes int) (*Env, error) {
	switch {
	case LogWriter != nil:
		ctrl.SetLogger(zap.New(zap.WriteTo(LogWriter), zap.Level(zapcore.DebugLevel)))
	case os.Getenv("MWO_TEST_VERBOSE") != "":
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	default:
		ctrl.SetLogger(logr.Discard())
	}
	c, err := localcluster.Start(ctx, localcluster.Options{Nodes: nodes, Profiling: os.Getenv("MWO_APISERVER_PROFILING") != ""})
	if err != nil {
		return nil, err
	}
	scheme := Scheme()
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(RepoRoot(), "config", "crd", "bases")}, ErrorIfPathMissing: true, Scheme: scheme, MaxTime: crdWait,
	}); err != nil {
		c.Stop()
		return nil, fmt.Errorf("while installing the CRDs: %w", err)
	}
	// Many parallel tests poll through this one client: client-go's default 5 QPS would
	// starve them (the API server's own fairness still applies).
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		c.Stop()
		return nil, err
	}
	return &Env{Cluster: c, Scheme: scheme, Client: cl}, nil
}

// Stop stops the cluster.
func (e *Env) Stop() { e.Cluster.Stop() }

// StartManager runs a manager on the cluster with metrics and probes off; setup registers
// reconcilers. The manager acts with the operator ServiceAccount's own token, with the RBAC
// of a cluster-wide install and the admission guard of config/guard in place
// (OperatorConfig): every test of its reconcilers shows the guard costs them nothing. The
// returned function stops it.
func (e *Env) StartManager(setup func(ctrl.Manager) error) (ctrl.Manager, func() error, error) {
	cfg, err := e.OperatorConfig(context.Background(), true)
	if err != nil {
		return nil, nil, err
	}
	cfg.Wrap(e.ManagerRequests.Wrap)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  caching.Options(cache.Options{}), // as main.go ships it
	})
	if err != nil {
		return nil, nil, err
	}
	if err := setup(mgr); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop := func() error {
		cancel()
		return <-done
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		_ = stop()
		return nil, nil, errors.New("the manager's cache never synced")
	}
	return mgr, stop, nil
}

// Namespace creates a namespace for one test that enforces the Pod Security "restricted"
// level, as a hardened cluster's would, and waits for its default ServiceAccount.
func (e *Env) Namespace(t *testing.T) string {
	t.Helper()
	return e.NamespaceAt(t, "restricted")
}

// NamespaceAt creates a namespace for one test that enforces the Pod Security level
// (privileged, baseline or restricted) and waits for its default ServiceAccount.
func (e *Env) NamespaceAt(t *testing.T, level string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-",
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": level}}}
	if err := e.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() && FailureReport != nil {
			FailureReport(t, ns.Name)
		}
	})
	if err := e.Cluster.WaitForDefaultServiceAccount(t.Context(), ns.Name); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// Eventually polls cond every 200ms until it returns true or timeout passes, then fails the
// test with the last message cond gave. Many tests poll at once against one API server on
// two cores: a faster poll costs the API server more than the few milliseconds it saves.
func Eventually(t *testing.T, timeout time.Duration, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		ok, msg := cond(ctx)
		if last == "" || (ctx.Err() == nil && !strings.Contains(msg, "context deadline")) { // a poll cut short by the timeout says nothing new
			last = msg
		}
		return ok, nil
	})
	if err != nil {
		t.Fatalf("not after %s: %s", timeout, last)
	}
}

// Tool is the path of a tool `make tools` builds, in $MWO_BIN_DIR or the repository's bin/;
// the test fails when it is not built.
func Tool(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("MWO_BIN_DIR")
	if dir == "" {
		dir = filepath.Join(RepoRoot(), "bin")
	}
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is not built (run make tools): %v", name, err)
	}
	return bin
}

// RestrictedSecurity is a workload's security that passes the Pod Security "restricted"
// level: a non-root user, no capabilities (the operator adds the seccomp profile and
// allowPrivilegeEscalation false itself).
func RestrictedSecurity() appsv1api.Security {
	return appsv1api.Security{
		PodSecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](101)},
		SecurityContext:    &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
	}
}
