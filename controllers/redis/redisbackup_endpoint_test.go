package redis_test

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/controllers/redisbackup"
	"github.com/middleware-operator/middleware-operator/internal/backupstore"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/objectstore"
)

// countingServer is an endpoint that counts the requests it gets (and answers none well).
func countingServer(t *testing.T, tls bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		http.Error(w, "an internal page the tenant must not read", http.StatusTeapot)
	})
	srv := httptest.NewUnstartedServer(h)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestRedisBackupToAnHTTPEndpointIsRefused: the operator (without --object-store-allow-http)
// fails a backup to an http:// endpoint with a condition and one event that name the field
// and the flag, and sends the endpoint no request.
func TestRedisBackupToAnHTTPEndpointIsRefused(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	srv, requests := countingServer(t, false)
	createStoreSecrets(t, ns, store.SecretKey)
	dest := storeSpec(store.Bucket)
	dest.Endpoint, dest.CASecret = srv.URL, ""
	key := createBackup(t, ns, "in-clear", "absent", dest)
	b := waitBackup(t, key, redisv1alpha1.BackupFailed, backupstore.ReasonEndpointRefused, 30*time.Second)
	c := meta.FindStatusCondition(b.Status.Conditions, redisbackup.ConditionBackupCompleted)
	for _, want := range []string{"spec.destination.endpoint " + srv.URL, "--" + objectstore.AllowHTTPFlag} {
		if !strings.Contains(c.Message, want) {
			t.Errorf("the condition says %q, want it to name %q", c.Message, want)
		}
	}
	time.Sleep(3 * time.Second) // room for any retry
	if got := eventReasons(t, ns, "in-clear"); !slices.Equal(got, []string{"Warning/" + backupstore.ReasonEndpointRefused}) {
		t.Errorf("events %v, want one Warning %s", got, backupstore.ReasonEndpointRefused)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("the refused endpoint got %d requests", n)
	}
}

// TestStoreEndpointPolicyIsAppliedBeforeAnyRequest: with an allowlist, a backup or a schedule
// naming another endpoint is refused (condition, one event naming the field and the flag)
// without a request to it; with --object-store-allow-http an http:// endpoint goes on.
func TestStoreEndpointPolicyIsAppliedBeforeAnyRequest(t *testing.T) {
	plain, plainRequests := countingServer(t, false)
	secure, secureRequests := countingServer(t, true)
	listed, err := objectstore.NewEndpointPolicy(false, []string{"https://s3.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		policy   objectstore.EndpointPolicy
		endpoint string
		refused  []string // the words of the refusal; none: not refused
	}{
		"http without the flag":    {endpoint: plain.URL, refused: []string{"spec.destination.endpoint " + plain.URL, "plain HTTP", "--" + objectstore.AllowHTTPFlag}},
		"http with the flag":       {policy: objectstore.EndpointPolicy{AllowHTTP: true}, endpoint: plain.URL},
		"https outside the list":   {policy: listed, endpoint: secure.URL, refused: []string{"spec.destination.endpoint " + secure.URL, "https://s3.example.com", "--" + objectstore.EndpointsFlag}},
		"https, no list":           {endpoint: secure.URL},
		"listed, another spelling": {policy: listed, endpoint: "https://S3.example.com:443"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dest := redisv1alpha1.ObjectStore{Endpoint: tc.endpoint, Bucket: "backups", CredentialsSecret: "creds"}
			b := &redisv1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "policy", Name: "b"},
				Spec: redisv1alpha1.RedisBackupSpec{Cluster: "absent", Destination: dest}}
			sch := &redisv1alpha1.RedisBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "policy", Name: "s"},
				Spec: redisv1alpha1.RedisBackupScheduleSpec{Cluster: "absent", Schedule: "@daily", Destination: dest}}
			c := fake.NewClientBuilder().WithScheme(env.Scheme).WithObjects(b, sch).WithStatusSubresource(b, sch).Build()
			recorder := events.NewFakeRecorder(10)
			backups := &redisbackup.RedisBackupReconciler{Client: c, APIReader: c, Scheme: env.Scheme, Recorder: recorder, StorePolicy: tc.policy}
			schedules := &redisbackup.RedisBackupScheduleReconciler{Client: c, Scheme: env.Scheme, Recorder: recorder, StorePolicy: tc.policy}
			for range 2 { // a second look reports nothing new
				for _, r := range []interface {
					Reconcile(context.Context, ctrl.Request) (ctrl.Result, error)
				}{backups, schedules} {
					_, _ = r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "policy", Name: "b"}})
					_, _ = r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "policy", Name: "s"}})
				}
			}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(b), b); err != nil {
				t.Fatal(err)
			}
			if err := c.Get(t.Context(), client.ObjectKeyFromObject(sch), sch); err != nil {
				t.Fatal(err)
			}
			conds := map[string]*metav1.Condition{
				"backup":   meta.FindStatusCondition(b.Status.Conditions, redisbackup.ConditionBackupCompleted),
				"schedule": meta.FindStatusCondition(sch.Status.Conditions, redisbackup.ConditionScheduled),
			}
			var refusals []string
			for len(recorder.Events) > 0 {
				if e := <-recorder.Events; strings.Contains(e, backupstore.ReasonEndpointRefused) {
					refusals = append(refusals, e)
				}
			}
			for what, cond := range conds {
				refused := cond != nil && cond.Reason == backupstore.ReasonEndpointRefused
				if refused != (len(tc.refused) > 0) {
					t.Fatalf("the %s's condition: %+v, want refused %t", what, cond, len(tc.refused) > 0)
				}
				for _, w := range tc.refused {
					if !strings.Contains(cond.Message, w) {
						t.Errorf("the %s's condition says %q, want it to name %q", what, cond.Message, w)
					}
				}
			}
			if want := map[bool]int{true: 2}[len(tc.refused) > 0]; len(refusals) != want {
				t.Errorf("refusal events %q, want %d (one for the backup, one for the schedule)", refusals, want)
			}
			if len(tc.refused) > 0 && b.Status.Phase != redisv1alpha1.BackupFailed {
				t.Errorf("a backup to a refused endpoint is %q, want Failed", b.Status.Phase)
			}
			if n := plainRequests.Load() + secureRequests.Load(); n != 0 {
				t.Errorf("the endpoints got %d requests before the cluster was even found", n)
			}
		})
	}
}

// TestStoreAnswersAreSummarised: what an endpoint answers (here a page of its own) reaches
// the backup's status and events as a class and an HTTP status, never as its words.
func TestStoreAnswersAreSummarised(t *testing.T) {
	srv, requests := countingServer(t, true)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "answers", Name: "cache"}}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "answers", Name: "creds"}, Data: map[string][]byte{
		backupstore.StoreAccessKeyIDKey: []byte("id"), backupstore.StoreSecretAccessKeyKey: []byte("secret")}}
	ca := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "answers", Name: "ca"}, Data: map[string][]byte{backupstore.StoreCAKey: caPEM}}
	b := &redisv1alpha1.RedisBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "answers", Name: "b", CreationTimestamp: metav1.Now()},
		Spec: redisv1alpha1.RedisBackupSpec{Cluster: "cache", Destination: redisv1alpha1.ObjectStore{
			Endpoint: srv.URL, Bucket: "backups", Region: "us-east-1", CredentialsSecret: "creds", CASecret: "ca"}}}
	c := fake.NewClientBuilder().WithScheme(env.Scheme).WithObjects(rc, creds, ca, b).WithStatusSubresource(b).Build()
	recorder := events.NewFakeRecorder(10)
	r := &redisbackup.RedisBackupReconciler{Client: c, APIReader: c, Scheme: env.Scheme, Recorder: recorder,
		Clusters: &clusterconn.Pool{}}
	res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	shown := b.Status.Reason
	for len(recorder.Events) > 0 {
		shown += "\n" + <-recorder.Events
	}
	if requests.Load() == 0 || b.Status.Phase != redisv1alpha1.BackupPending || !strings.Contains(b.Status.Reason, "bad response (HTTP 418)") {
		t.Errorf("after %d requests the backup is %q with the reason %q, want Pending with a bad response (HTTP 418)", requests.Load(), b.Status.Phase, b.Status.Reason)
	}
	if strings.Contains(shown, "internal page") {
		t.Errorf("the store's words reached the status or an event: %s", shown)
	}
	if res.RequeueAfter < 5*time.Second {
		t.Errorf("a failing store is looked at again after %s, want a back-off of at least 5 s", res.RequeueAfter)
	}
}
