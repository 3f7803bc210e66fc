package nodetls

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// keeperFor is a Keeper over a fake API server holding objects, with a recorder of its
// events.
func keeperFor(objects ...client.Object) (*Keeper, *events.FakeRecorder) {
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(objects...).Build()
	rec := events.NewFakeRecorder(10)
	return &Keeper{Client: c, Scheme: testenv.Scheme(), Recorder: rec, APIReader: c, UserObject: c.Get}, rec
}

// TestEnsureGeneratesTheCAAndTheCertificateOnce: a cluster with spec.tls and no Secret of
// its own gets a CA Secret and a certificate it signs, which the next reconcile reads back
// and verifies, and does not issue again; the TLS condition says Generated.
func TestEnsureGeneratesTheCAAndTheCertificateOnce(t *testing.T) {
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache", UID: "u1", Generation: 3}}
	rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true}
	k, rec := keeperFor(rc)
	var f Facts
	var conds []metav1.Condition
	if err := k.Read(t.Context(), rc, &f); err != nil || f.Config != nil {
		t.Fatalf("Read before anything exists: config %v, %v; want none and no error", f.Config != nil, err)
	}
	if err := k.Ensure(t.Context(), rc, &conds, &f, nil); err != nil {
		t.Fatal(err)
	}
	c := meta.FindStatusCondition(conds, report.ConditionTLS)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != report.ReasonTLSGenerated || c.ObservedGeneration != 3 {
		t.Fatalf("TLS condition %+v, want True Generated at generation 3", c)
	}
	if f.Config == nil || f.X509 == nil || f.CA == nil {
		t.Fatalf("facts after Ensure: config %t, certificate %t, CA %t; want all", f.Config != nil, f.X509 != nil, f.CA != nil)
	}
	issued := f.Secret.Data[resources.RedisTLSCertKey]

	var again Facts
	if err := k.Read(t.Context(), rc, &again); err != nil || again.Config == nil || string(again.Cert) != string(f.Cert) {
		t.Fatalf("the next reconcile's Read: config %t, same certificate %t, %v", again.Config != nil, string(again.Cert) == string(f.Cert), err)
	}
	if err := k.Ensure(t.Context(), rc, &conds, &again, nil); err != nil {
		t.Fatal(err)
	}
	live := &corev1.Secret{}
	if err := k.Client.Get(t.Context(), client.ObjectKey{Namespace: "ns", Name: resources.RedisTLSSecretName(rc)}, live); err != nil {
		t.Fatal(err)
	}
	if string(live.Data[resources.RedisTLSCertKey]) != string(issued) {
		t.Error("the second Ensure issued a new certificate over a working one")
	}
	if GeneratedCert(rc, &again, nil) == nil || CARotation(rc, &again) != nil || GeneratedCA(rc, &again) == nil {
		t.Error("the planner's inputs: want a generated certificate and CA, and no rotation")
	}
	select {
	case e := <-rec.Events:
		if strings.Contains(e, report.ReasonTLSRenewed) {
			t.Errorf("a renewal event for a first certificate: %s", e)
		}
	default:
	}
}

// TestEnsureNamesAMissingOrWrongUserSecret: spec.tls.secretName naming no Secret is a
// *child.MissingError (looked for again), a Secret without the key is a terminal error; both set
// the TLS condition False naming the Secret and send one Warning event per new message.
func TestEnsureNamesAMissingOrWrongUserSecret(t *testing.T) {
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cache", UID: "u1"}}
	rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, SecretName: "mine"}

	k, rec := keeperFor(rc)
	var conds []metav1.Condition
	err := k.Ensure(t.Context(), rc, &conds, &Facts{}, nil)
	var missing *child.MissingError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), `spec.tls.secretName: Secret "mine" not found`) {
		t.Fatalf("Ensure without the user's Secret: %v, want a MissingError naming it", err)
	}
	if c := meta.FindStatusCondition(conds, report.ConditionTLS); c == nil || c.Status != metav1.ConditionFalse || c.Reason != report.ReasonTLSInvalid {
		t.Fatalf("TLS condition %+v, want False %s", c, report.ReasonTLSInvalid)
	}
	if n := len(rec.Events); n != 1 {
		t.Errorf("%d events, want 1 Warning", n)
	}

	wrong := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine"}, Data: map[string][]byte{resources.RedisTLSCertKey: []byte("x")}}
	k, _ = keeperFor(rc, wrong)
	conds = nil
	err = k.Ensure(t.Context(), rc, &conds, &Facts{}, nil)
	if err == nil || errors.As(err, &missing) || !strings.Contains(err.Error(), `Secret "mine" has no "ca.crt" key`) {
		t.Fatalf("Ensure with a Secret lacking ca.crt: %v, want a terminal error naming the key", err)
	}
}
