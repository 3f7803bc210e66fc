package redis

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/clusterconn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/conn"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodetls"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestEveryLookChecksTheCertificatesOfACARotation: a look that does not ensure the children
// (they are not due) still knows the certificate every node should serve, so a CA
// rotation's stage ends only on a snapshot that checked the nodes, and the nodes are read
// with a trust that also accepts the cluster's earlier certificate: a node left serving it
// after the old CA was dropped still answers and can be reloaded. Without the TLS Secret,
// nothing was checked and the stage goes on.
func TestEveryLookChecksTheCertificatesOfACARotation(t *testing.T) {
	now := time.Now()
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "rc", UID: "u1"}}
	rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, CARotationOverlap: &metav1.Duration{Duration: time.Second}}
	names := resources.RedisTLSDNSNames(rc)
	var oldCA, newCA certs.Pair
	for name, ca := range map[string]*certs.Pair{"old": &oldCA, "new": &newCA} {
		pair, err := certs.NewCA(name, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		*ca = pair
	}
	earlier, err := certs.NewServer(oldCA, names, nil, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	current, err := certs.NewServer(newCA, names, nil, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Stage Switch, its overlap over: the new CA signs, ca.crt lists both.
	ca := resources.RedisCA{Signer: newCA, Previous: oldCA.Cert, Since: now.Add(-time.Minute)}
	caSecret := resources.RedisTLSCASecret(rc, ca)
	caSecret.OwnerReferences = []metav1.OwnerReference{{APIVersion: redisv1alpha1.GroupVersion.String(), Kind: "RedisCluster",
		Name: rc.Name, UID: rc.UID, Controller: ptr.To(true)}}
	tlsSecret := resources.RedisTLSSecret(rc, ca.Bundle(), current)
	parse := func(pem []byte) *x509.Certificate {
		t.Helper()
		c, err := certs.ParseCert(pem)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	for what, objects := range map[string][]client.Object{
		"the TLS Secret exists":     {caSecret, tlsSecret},
		"the TLS Secret is missing": {caSecret},
	} {
		c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(objects...).Build()
		var trust *tls.Config
		r := &RedisClusterReconciler{Client: c, APIReader: c, NewAdmin: func(_ conn.Login, cfg *tls.Config) clusterconn.Admin {
			trust = cfg
			return nil
		}}
		// The look of a reconcile whose child checks are not due: it reads, it ensures nothing.
		s := &state{rc: rc}
		if err := r.readTLS(t.Context(), s); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		rotation := nodetls.CARotation(rc, &s.certs)
		if rotation == nil || rotation.Stage != resources.CAStageSwitch {
			t.Fatalf("%s: the planner sees rotation %+v, want stage Switch", what, rotation)
		}
		if len(objects) == 1 {
			if rotation.Checked || s.certs.Cert != nil {
				t.Errorf("%s: the planner may end the stage (checked %t) with no certificate to check against", what, rotation.Checked)
			}
			continue
		}
		if !bytes.Equal(s.certs.Cert, parse(current.Cert).Raw) || !rotation.Checked {
			t.Fatalf("%s: the look expects no certificate or another (checked %t): a stage could end on no evidence", what, rotation.Checked)
		}
		// Once the old CA is dropped (ca.crt holds the new CA alone), a node still serving
		// the cluster's earlier certificate must still answer the pooled clusterconn.Admin.
		r.certKeeper().Remember(rc, parse(earlier.Cert).Raw)
		pool, _ := certs.Pool(newCA.Cert)
		s.certs.Config.RootCAs = pool
		r.adminFor(s)
		if trust == nil || trust.VerifyConnection == nil {
			t.Fatalf("%s: the clusterconn.Admin was opened with the plain trust of ca.crt (%v): a node left on the earlier certificate never answers", what, trust != nil)
		}
		for leaf, ok := range map[string]bool{string(earlier.Cert): true, string(current.Cert): true} {
			if err := trust.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{parse([]byte(leaf))}}); (err == nil) != ok {
				t.Errorf("%s: the pooled clusterconn.Admin's trust answers %v for one of the cluster's own certificates", what, err)
			}
		}
		stranger, err := certs.NewServer(oldCA, names, nil, now, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := trust.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{parse(stranger.Cert)}}); err == nil {
			t.Errorf("%s: the pooled clusterconn.Admin's trust accepts another certificate of the dropped CA", what)
		}
	}
}
