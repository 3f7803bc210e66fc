package bench

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/middleware-operator/middleware-operator/internal/caching"
	"github.com/middleware-operator/middleware-operator/internal/operator"
)

// SecretFigures are what N unrelated Secrets cost the operator (issue 30): the events its
// Secret and ConfigMap watches received while they were created, and its process's RSS
// before and after.
type SecretFigures struct {
	N int
	// LabelledEvents are the events received for one Secret labelled caching.WatchLabel,
	// created first: proof that the count sees what the operator does watch.
	LabelledEvents int64
	// UnrelatedEvents are the events received for the N unrelated Secrets (told apart by
	// name) while they were created and for a while after (15 s with the process, 2 s
	// without).
	UnrelatedEvents int64
	// CreateSeconds is how long creating them took.
	CreateSeconds float64
	// RSSBefore and RSSAfter are the operator process's resident set before the Secrets
	// and 15 s after the last one (0 without the process).
	RSSBefore, RSSAfter uint64
}

// String is the figures as one line.
func (f SecretFigures) String() string {
	s := fmt.Sprintf("%d unrelated Secrets (created in %.0f s): %d watch events to the operator (%d for the one labelled Secret)",
		f.N, f.CreateSeconds, f.UnrelatedEvents, f.LabelledEvents)
	if f.RSSBefore > 0 {
		s += fmt.Sprintf("; operator process RSS %.1f MiB before, %.1f MiB after (%+.1f%%)", mib(f.RSSBefore), mib(f.RSSAfter), growth(f.RSSBefore, f.RSSAfter))
	}
	return s
}

// unrelatedSecretBytes is the size of each unrelated Secret's value.
const unrelatedSecretBytes = 4 << 10

// RunUnrelatedSecrets starts a fresh local cluster with the operator in this process (its
// Secret and ConfigMap watches counted by watchEvents) and, with process, the operator's
// binary too when withProcess (its RSS read from /proc), then creates n Secrets that no resource names.
func RunUnrelatedSecrets(ctx context.Context, n int, withProcess bool, logf func(string, ...any)) (SecretFigures, error) {
	f := SecretFigures{N: n}
	env, c, _, err := freshCluster(ctx, 0, "users")
	if err != nil {
		return f, err
	}
	defer env.Stop()
	counter := &watchEvents{}
	cfg := operator.Defaults()
	restConfig := rest.CopyConfig(env.Cluster.Config)
	restConfig.Wrap(func(next http.RoundTripper) http.RoundTripper { counter.next = next; return counter })
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: operator.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: operator.CacheOptions(cfg), Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return f, err
	}
	if err := operator.Setup(mgr, cfg); err != nil {
		return f, err
	}
	_, stop := startManager(ctx, mgr, logf)
	defer stop()
	var proc *process
	if withProcess {
		if proc, err = startOperatorProcess(env); err != nil {
			return f, err
		}
		defer proc.stop()
	}
	// The controllers open their watches once started; give them (and the process) time,
	// then touch a labelled Secret until one of its events arrives: the watches are open.
	settle := 2 * time.Second
	if withProcess {
		settle = 15 * time.Second
	}
	time.Sleep(settle)
	labelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "users", Name: "named",
		Labels: map[string]string{caching.WatchLabel: caching.WatchLabelValue}}, StringData: map[string]string{"password": "p"}}
	before := counter.events.Load()
	if err := c.Create(ctx, labelled); err != nil {
		return f, err
	}
	for try := 0; counter.events.Load() == before; try++ {
		if try == 30 {
			return f, fmt.Errorf("no watch event for the labelled Secret in 30 s: the count does not see the operator's watches")
		}
		time.Sleep(time.Second)
		labelled.StringData = map[string]string{"password": fmt.Sprint(try)}
		if err := c.Update(ctx, labelled); err != nil {
			return f, err
		}
	}
	f.LabelledEvents = counter.events.Load() - before
	if proc != nil {
		if f.RSSBefore, _, _, err = proc.memory(); err != nil {
			return f, err
		}
	}

	start := time.Now()
	blob := strings.Repeat("x", unrelatedSecretBytes)
	if err := parallel(ctx, n, func(ctx context.Context, i int) error {
		return c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%05d", unrelatedPrefix, i), Namespace: "users",
			Labels: map[string]string{"app": "unrelated"}}, StringData: map[string]string{"v": blob}})
	}); err != nil {
		return f, err
	}
	f.CreateSeconds = time.Since(start).Seconds()
	logf("created %d unrelated Secrets in %.0f s", n, f.CreateSeconds)
	time.Sleep(settle)
	f.UnrelatedEvents = counter.unrelated.Load()
	if proc != nil {
		if f.RSSAfter, _, _, err = proc.memory(); err != nil {
			return f, err
		}
		logf("operator process log: %s", filepath.Join(env.Cluster.Dir, "operator.log"))
	}
	return f, nil
}
