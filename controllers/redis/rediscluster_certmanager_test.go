package redis_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestRedisClusterTLSFromCertManager: a RedisCluster whose certificate a cert-manager
// ClusterIssuer issues. Before cert-manager is installed the TLS condition and a Warning say
// so and nothing runs; once cert-manager (its real controllers, built from its Go module)
// and a CA ClusterIssuer exist, the cluster forms over TLS with the issued Secret, and no
// CA key is left in the cluster's namespace (the CA's lives in cert-manager's cluster
// resource namespace). Then spec.tls.issuerRef moves to a second ClusterIssuer of the same
// CA: the operator updates the Certificate, cert-manager issues a new certificate with a new
// key, and every node loads it without a restart while a writer that trusts the CA alone
// (as an application would) writes on: 0 failed writes, every key read back.
func TestRedisClusterTLSFromCertManager(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	issuer := ns + "-ca"
	rc := redistest.NewCluster(ns, "issued", 6)
	rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, IssuerRef: &redisv1alpha1.IssuerReference{Name: issuer, Kind: "ClusterIssuer"}}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	if !certManagerServed(t) {
		c := waitCondition(t, key, report.ConditionTLS, metav1.ConditionFalse, report.ReasonTLSCertManagerMissing)
		if !strings.Contains(c.Message, "install cert-manager") {
			t.Errorf("the TLS condition says %q, want how to fix it", c.Message)
		}
		waitEvent(t, ns, report.ReasonTLSCertManagerMissing, "ClusterIssuer "+issuer)
		if err := env.Client.Get(t.Context(), key, &appsv1.StatefulSet{}); err == nil {
			t.Errorf("a StatefulSet was made before the certificate exists")
		}
	}
	env.StartCertManager(t) // its cluster resource namespace is default

	// A CA made by cert-manager itself in its cluster resource namespace: a self-signed
	// ClusterIssuer signs the CA certificate, and two CA ClusterIssuers sign with it.
	for _, obj := range []string{
		`{"apiVersion":"cert-manager.io/v1","kind":"ClusterIssuer","metadata":{"name":"NS-selfsigned"},"spec":{"selfSigned":{}}}`,
		`{"apiVersion":"cert-manager.io/v1","kind":"Certificate","metadata":{"name":"NS-root","namespace":"default"},"spec":{"isCA":true,"commonName":"redis root","secretName":"NS-root",
		  "privateKey":{"algorithm":"ECDSA","size":256},"issuerRef":{"name":"NS-selfsigned","kind":"ClusterIssuer"}}}`,
		`{"apiVersion":"cert-manager.io/v1","kind":"ClusterIssuer","metadata":{"name":"NS-ca"},"spec":{"ca":{"secretName":"NS-root"}}}`,
		`{"apiVersion":"cert-manager.io/v1","kind":"ClusterIssuer","metadata":{"name":"NS-ca-2"},"spec":{"ca":{"secretName":"NS-root"}}}`,
	} {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(strings.ReplaceAll(obj, "NS", ns))); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Create(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), u) })
	}
	start := time.Now()
	rc = waitRunning(t, key)
	t.Logf("formed over TLS with cert-manager's certificate %.1f s after cert-manager started", time.Since(start).Seconds())
	c := waitCondition(t, key, report.ConditionTLS, metav1.ConditionTrue, report.ReasonTLSIssued)
	if !strings.Contains(c.Message, "ClusterIssuer "+issuer) {
		t.Errorf("the TLS condition says %q, want the issuer named", c.Message)
	}
	assertNoCAKey(t, ns)
	root := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: "default", Name: ns + "-root"}, root); err != nil {
		t.Fatal(err)
	}
	pool, err := certs.Pool(root.Data["tls.crt"])
	if err != nil {
		t.Fatal(err)
	}
	serverName := resources.RedisTLSServerName(rc)
	appTLS := &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}
	pw := redistest.Password(t, env.Client, ns, rc.Name)
	w := redistest.StartReconnectingTLSWriter(rc.Status.Nodes[0].Instance, pw, appTLS, 300*time.Millisecond)
	w.WaitWritten(t, 300)

	tlsKey := client.ObjectKey{Namespace: ns, Name: resources.RedisTLSSecretName(rc)}
	first := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), tlsKey, first); err != nil {
		t.Fatal(err)
	}
	switched := time.Now()
	redistest.PatchSpec(t, env.Client, key, `{"spec":{"tls":{"issuerRef":{"name":"`+issuer+`-2"}}}}`)
	testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		secret := &corev1.Secret{}
		if err := env.Client.Get(ctx, tlsKey, secret); err != nil {
			return false, err.Error()
		}
		if bytes.Equal(secret.Data["tls.crt"], first.Data["tls.crt"]) {
			return false, "cert-manager has not issued the new certificate yet"
		}
		if bytes.Equal(secret.Data["tls.key"], first.Data["tls.key"]) {
			return false, "the new certificate kept the old key"
		}
		cert, err := certs.ParseCert(secret.Data["tls.crt"])
		if err != nil {
			return false, err.Error()
		}
		return everyNodeServes(ctx, rc.Status.Nodes, appTLS, cert.Raw, "the new certificate")
	})
	t.Logf("issuer switched: every node serves the new certificate %.1f s later", time.Since(switched).Seconds())
	waitEvent(t, ns, report.ReasonTLSReloaded, "now serve")
	stopWithoutFailures(t, w, "while the certificate changed")
	rc = redistest.WaitShape(t, env.Client, key, 3, 6)
	w.Verify(t, env.Client, rc, pw)
	assertNoCAKey(t, ns)
}

// TestRedisClusterRefusesAClusterIssuerTheAdminDidNotAllow: a ClusterIssuer signs for every
// namespace, so naming one the operator's --cluster-issuers does not list (this suite lists
// "t-*", the tests' namespaces) leaves the TLS condition False IssuerNotAllowed with a
// Warning naming the flag, and makes no Certificate and no pod: the operator is no tenant's
// deputy to an issuer the admin kept for others. An Issuer of the namespace needs no listing.
func TestRedisClusterRefusesAClusterIssuerTheAdminDidNotAllow(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := redistest.NewCluster(ns, "borrowed", 6)
	rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, IssuerRef: &redisv1alpha1.IssuerReference{Name: "platform-root-ca", Kind: "ClusterIssuer"}}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(rc)
	c := waitCondition(t, key, report.ConditionTLS, metav1.ConditionFalse, report.ReasonTLSIssuerNotAllowed)
	if !strings.Contains(c.Message, "--cluster-issuers lists t-*") {
		t.Errorf("the TLS condition says %q, want the flag and what it lists", c.Message)
	}
	waitEvent(t, ns, report.ReasonTLSIssuerNotAllowed, "ClusterIssuer platform-root-ca")
	if err := env.Client.Get(t.Context(), key, &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("a StatefulSet for a refused issuer: %v", err)
	}
	if certManagerServed(t) {
		cert := &unstructured.Unstructured{}
		cert.SetGroupVersionKind(resources.CertificateGVK)
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: resources.RedisTLSSecretName(rc)}, cert); !apierrors.IsNotFound(err) {
			t.Errorf("a Certificate for a refused issuer: %v", err)
		}
	}
}

// assertNoCAKey fails the test when a Secret of namespace ns holds a CA certificate with
// its private key.
func assertNoCAKey(t *testing.T, ns string) {
	t.Helper()
	secrets := &corev1.SecretList{}
	if err := env.Client.List(t.Context(), secrets, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		cert, err := certs.ParseCert(s.Data["tls.crt"])
		if err == nil && cert.IsCA && len(s.Data["tls.key"]) > 0 {
			t.Errorf("Secret %s in the cluster's namespace holds a CA's key (%s)", s.Name, cert.Subject)
		}
	}
}

// certManagerServed reports whether cert-manager's CRDs are installed already (a test run
// with -count above 1 installs them in its first round).
func certManagerServed(t *testing.T) bool {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(resources.CertificateGVK.GroupVersion().WithKind("CertificateList"))
	return env.Client.List(t.Context(), list, client.Limit(1)) == nil
}
