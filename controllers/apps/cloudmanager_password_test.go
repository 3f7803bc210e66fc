package apps_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/caching"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	appsv1api "github.com/middleware-operator/middleware-operator/api/apps/v1"
	"github.com/middleware-operator/middleware-operator/controllers/apps"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// logBuffer collects every log line of a manager.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) write(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.WriteString(prefix + " " + args + "\n")
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// logVerbosity is the most verbose level the log capture keeps: everything the operator and
// the libraries log, including client-go's request lines (V(6)) and headers (V(7)). From V(8)
// on client-go traces the bodies of every API response, the objects it reads included (a
// CloudManager's spec.db.rootPass, a Secret's data), as kubectl -v=8 does; that wire tracing
// is out of what the operator's logs can keep secret.
const logVerbosity = 7

// startSecondOperator runs another manager with the CloudManager reconciler next to the
// suite's, with its own cache, as a restarted operator would. It logs everything up to
// logVerbosity into the returned buffer, and stops when the test ends.
func startSecondOperator(t *testing.T) (ctrl.Manager, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	cfg := rest.CopyConfig(env.Cluster.Config)
	cfg.Wrap(env.ManagerRequests.Wrap) // the same operator code: its requests count for RBAC too
	m, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Logger:                 funcr.New(logs.write, funcr.Options{Verbosity: logVerbosity}),
		Cache:                  caching.Options(cache.Options{}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&apps.CloudManagerReconciler{
		Client: m.GetClient(), Scheme: m.GetScheme(), Recorder: m.GetEventRecorder("cloudmanager-controller"),
	}).SetupWithManager(m, controller.Options{SkipNameValidation: ptr.To(true)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("second operator: %v", err)
		}
	})
	if !m.GetCache().WaitForCacheSync(t.Context()) {
		t.Fatal("the second operator's cache never synced")
	}
	return m, logs
}

// touch changes an annotation of the CloudManager, which makes every operator instance
// reconcile it.
func touch(t *testing.T, key client.ObjectKey, i int) {
	t.Helper()
	updateCM(t, key, func(cm *appsv1api.CloudManager) {
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		cm.Annotations["test/touch"] = fmt.Sprint(i)
	})
}

func TestCloudManagerGeneratedPasswordIsStable(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	cm := seedCloudManager(t, ns)
	cm.Spec.DB.RootPass = ""
	key := createCM(t, cm)
	cm = waitReady(t, key, readyTimeout)

	secretKey := client.ObjectKey{Namespace: ns, Name: "cloudmanager-sample-db-auth"}
	first := mustGetObj(t, ns, secretKey.Name, &corev1.Secret{})
	password := first.Data["password"]
	if len(password) < 20 || !metav1.IsControlledBy(first, cm) {
		t.Fatalf("generated password of %d bytes, controlled %v", len(password), metav1.IsControlledBy(first, cm))
	}

	// A restarted operator (a second instance with a fresh cache) keeps it, however often
	// it reconciles, and so does the first one.
	second, _ := startSecondOperator(t)
	r := &apps.CloudManagerReconciler{Client: second.GetClient(), APIReader: second.GetAPIReader(), Scheme: env.Scheme, Recorder: events.NewFakeRecorder(100)}
	for i := range 3 {
		if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key}); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
	}
	for i := range 3 {
		touch(t, key, i)
	}
	// A spec change that rolls the database goes through the whole pipeline again.
	updateCM(t, key, func(cm *appsv1api.CloudManager) { cm.Spec.DB.StatefulSet.Image = "mariadb:10.3.36" })
	waitReady(t, key, readyTimeout)
	time.Sleep(2 * time.Second) // give any (wrong) write time to happen

	after := mustGetObj(t, ns, secretKey.Name, &corev1.Secret{})
	if !bytes.Equal(after.Data["password"], password) {
		t.Error("the generated password changed")
	}
	if after.ResourceVersion != first.ResourceVersion {
		t.Errorf("the password Secret was rewritten: resourceVersion %s -> %s", first.ResourceVersion, after.ResourceVersion)
	}
	sts := mustGetObj(t, ns, "cm-db", &appsv1.StatefulSet{})
	if ref := sts.Spec.Template.Spec.Containers[0].Env[0].ValueFrom.SecretKeyRef; ref.Name != secretKey.Name || ref.Key != "password" {
		t.Errorf("the database reads its password from %s/%s", ref.Name, ref.Key)
	}
}

func TestCloudManagerRootPasswordNeverLeaks(t *testing.T) {
	t.Parallel()
	const password = "Leak-Check-7f3a91c2e5"
	_, logs := startSecondOperator(t)
	ns := env.Namespace(t)
	cm := seedCloudManager(t, ns)
	cm.Spec.DB.RootPass = password
	key := createCM(t, cm)
	waitReady(t, key, readyTimeout)
	// A change of the password reaches the Secret too.
	const changed = password + "-2"
	updateCM(t, key, func(cm *appsv1api.CloudManager) { cm.Spec.DB.RootPass = changed })
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cloudmanager-sample-db-auth"}, s); err != nil {
			return false, err.Error()
		}
		return string(s.Data["password"]) == changed, "the Secret does not hold the new rootPass"
	})
	cm = waitReady(t, key, readyTimeout)

	leaks := func(what, text string) {
		t.Helper()
		for _, p := range []string{password, base64.StdEncoding.EncodeToString([]byte(password)), base64.StdEncoding.EncodeToString([]byte(changed))} {
			if strings.Contains(text, p) {
				t.Errorf("%s holds the root password (%q)", what, p)
			}
		}
	}
	statusJSON, err := json.Marshal(cm.Status)
	if err != nil {
		t.Fatal(err)
	}
	leaks("the status", string(statusJSON))
	evs := &corev1.EventList{}
	if err := env.Client.List(t.Context(), evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	eventsJSON, err := json.Marshal(evs)
	if err != nil {
		t.Fatal(err)
	}
	leaks("the events", string(eventsJSON))
	for _, obj := range []client.Object{&appsv1.StatefulSet{}, &appsv1.Deployment{}} {
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "cm-db"}, obj); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		objJSON, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		leaks(fmt.Sprintf("the %T", obj), string(objJSON))
	}
	// Stop the second operator's writes before reading its logs.
	got := logs.String()
	leaks("the second operator's logs", got)
	if !strings.Contains(got, `"controller"="cloudmanager"`) || !strings.Contains(got, ns) {
		t.Error("the second operator logged nothing about this CloudManager: the log capture does not work")
	}

	reasons := eventReasons(t, ns, cm.Name)
	if w := reasons["PlainTextRootPassword"]; len(w) == 0 || !strings.HasPrefix(w[0], "Warning: ") || !strings.Contains(w[0], "spec.db.rootPasswordSecretRef") {
		t.Errorf("PlainTextRootPassword events %q, want a Warning recommending spec.db.rootPasswordSecretRef", w)
	}
}

func TestCloudManagerRootPasswordSecretRef(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	key := createCM(t, seedCloudManager(t, ns))
	waitReady(t, key, readyTimeout)

	// Switching to a reference to a Secret that does not exist yet: Degraded, and the owned
	// Secret is no longer needed.
	updateCM(t, key, func(cm *appsv1api.CloudManager) {
		cm.Spec.DB.RootPass = ""
		cm.Spec.DB.RootPasswordSecretRef = &appsv1api.SecretKeyReference{Name: "db-root"}
	})
	testenv.Eventually(t, time.Minute, func(ctx context.Context) (bool, string) {
		cm, err := getCM(ctx, key)
		if err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(cm.Status.Conditions, "Degraded")
		return cm.Status.Phase == appsv1api.CloudManagerDegraded && cm.Status.ObservedGeneration == cm.Generation &&
				c != nil && c.Reason == "RootPasswordSecretUnavailable" && strings.Contains(c.Message, `"db-root"`) &&
				cmCondition(cm, "DatabaseReady") == "False/RootPasswordSecretUnavailable" && cmCondition(cm, "FrontReady") == "True/Ready",
			fmt.Sprintf("status %+v", cm.Status)
	})
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cloudmanager-sample-db-auth"}, &corev1.Secret{})
		return apierrors.IsNotFound(err), fmt.Sprintf("the owned Secret is still there: %v", err)
	})

	// The Secret appears: the missing-Secret look (10 s), not the one-minute safety net,
	// brings the stack back to Ready with the database reading the referenced Secret. No
	// watch can announce it: the operator watches only the Secrets it has labelled.
	start := time.Now()
	if err := env.Client.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db-root", Namespace: ns},
		Data:       map[string][]byte{"password": []byte("from-my-secret")},
	}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, key, 40*time.Second)
	t.Logf("Ready %s after the Secret appeared", time.Since(start).Round(time.Millisecond))
	sts := mustGetObj(t, ns, "cm-db", &appsv1.StatefulSet{})
	if ref := sts.Spec.Template.Spec.Containers[0].Env[0].ValueFrom.SecretKeyRef; ref.Name != "db-root" || ref.Key != "password" {
		t.Errorf("the database reads its password from %s/%s, want db-root/password", ref.Name, ref.Key)
	}
	if s := mustGetObj(t, ns, "db-root", &corev1.Secret{}); len(s.OwnerReferences) != 0 || string(s.Data["password"]) != "from-my-secret" {
		t.Error("the referenced Secret was modified")
	}
}
