package redis_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestRedisClusterRotatesItsCA rotates the generated CA of a running TLS cluster on the
// rotate-ca annotation, under a writer whose client re-reads ca.crt from the Secret (as an
// application with the Secret mounted does) and opens a new connection every 300 ms: the
// stages come in order, each lasts its overlap, no write fails and no key is lost; at the
// end every node serves a certificate of the new CA, ca.crt lists the new CA alone, and the
// nodes no longer accept a certificate of the old CA.
func TestRedisClusterRotatesItsCA(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := redistest.NewCluster(ns, "rotating", 6)
	overlap := 3 * time.Second
	rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, CARotationOverlap: &metav1.Duration{Duration: overlap}}
	key, rc, pw := createRunning(t, rc, "over TLS")
	serverName := resources.RedisTLSServerName(rc)
	tlsKey := client.ObjectKey{Namespace: ns, Name: "rotating-tls"}
	caKey := client.ObjectKey{Namespace: ns, Name: "rotating-tls-ca"}
	read := func(ctx context.Context, key client.ObjectKey) (*corev1.Secret, error) {
		secret := &corev1.Secret{}
		return secret, env.Client.Get(ctx, key, secret)
	}
	oldCASecret, err := read(t.Context(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	oldCA := certs.Pair{Cert: oldCASecret.Data["tls.crt"], Key: oldCASecret.Data["tls.key"]}

	// The application's trust: ca.crt as the Secret holds it, read again every 200 ms.
	var trusted atomic.Pointer[x509.CertPool]
	refresh := func(ctx context.Context) error {
		secret, err := read(ctx, tlsKey)
		if err != nil {
			return err
		}
		pool, err := certs.Pool(secret.Data["ca.crt"])
		if err != nil {
			return err
		}
		trusted.Store(pool)
		return nil
	}
	if err := refresh(t.Context()); err != nil {
		t.Fatal(err)
	}
	refreshCtx, stopRefresh := context.WithCancel(context.Background())
	defer stopRefresh()
	go func() {
		for refreshCtx.Err() == nil {
			_ = refresh(refreshCtx)
			time.Sleep(200 * time.Millisecond)
		}
	}()
	var issuersMu sync.Mutex
	issuers := map[string]int{}                                                                           // verified handshakes by the issuing CA's key ID
	appTLS := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, InsecureSkipVerify: true, // verified below, with the trust of the moment
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no certificate")
			}
			leaf := cs.PeerCertificates[0]
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: trusted.Load(), DNSName: serverName,
				KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				return err
			}
			issuersMu.Lock()
			issuers[string(leaf.AuthorityKeyId)]++
			issuersMu.Unlock()
			return nil
		}}

	w := redistest.StartReconnectingTLSWriter(rc.Status.Nodes[0].Instance, pw, appTLS, 300*time.Millisecond)
	w.WaitWritten(t, 300)

	start := time.Now()
	patch := client.MergeFrom(rc.DeepCopy())
	rc.Annotations = map[string]string{resources.RedisRotateCAAnnotation: "2026-11-27"}
	if err := env.Client.Patch(t.Context(), rc, patch); err != nil {
		t.Fatal(err)
	}
	var stages []string
	stageSince := map[string]time.Time{}
	var newCA []byte
	testenv.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, string) {
		caSecret, err := read(ctx, caKey)
		if err != nil {
			return false, err.Error()
		}
		ca := resources.ReadRedisCA(caSecret)
		stage := ca.Stage()
		if n := len(stages); stage != "" && (n == 0 || stages[n-1] != stage) {
			// A stage's start as the operator recorded it; the next one's when seen
			// (never earlier than it began), so a late look cannot shorten what it lasted.
			stages, stageSince[stage] = append(stages, stage), time.Now()
			if stage == resources.CAStageTrust && !ca.Since.IsZero() {
				stageSince[stage] = ca.Since
			}
		}
		if stage != "" || bytes.Equal(caSecret.Data["tls.crt"], oldCA.Cert) {
			return false, fmt.Sprintf("the rotation is at stage %q", stage)
		}
		newCA = caSecret.Data["tls.crt"]
		secret, err := read(ctx, tlsKey)
		if err != nil {
			return false, err.Error()
		}
		if !bytes.Equal(bytes.TrimSpace(secret.Data["ca.crt"]), bytes.TrimSpace(newCA)) {
			return false, "ca.crt does not list the new CA alone yet"
		}
		pool, _ := certs.Pool(newCA)
		onlyNew := &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}
		cert, err := certs.ParseCert(secret.Data["tls.crt"])
		if err != nil {
			return false, err.Error()
		}
		return everyNodeServes(ctx, rc.Status.Nodes, onlyNew, cert.Raw, "the new CA's last certificate")
	})
	took := time.Since(start)
	if strings.Join(stages, ",") != resources.CAStageTrust+","+resources.CAStageSwitch {
		t.Errorf("stages seen %v, want Trust then Switch", stages)
	} else if lasted := stageSince[resources.CAStageSwitch].Sub(stageSince[resources.CAStageTrust]); lasted < overlap-500*time.Millisecond {
		t.Errorf("stage Trust lasted %s, want at least the overlap of %s", lasted, overlap)
	}
	t.Logf("CA rotation: %d nodes on the new CA alone %.1f s after the annotation (overlap %s per stage)", len(rc.Status.Nodes), took.Seconds(), overlap)
	for _, reason := range []string{report.ReasonCARotationStarted, report.ReasonCARotationSwitched, report.ReasonCARotationCompleted} {
		waitEvent(t, ns, reason, "CA")
	}

	stopWithoutFailures(t, w, "during the CA rotation")
	issuersMu.Lock()
	// The writer's new connections met certificates of both CAs: the switch happened
	// under it, not before it started or after it stopped.
	if len(issuers) < 2 {
		t.Errorf("the writer's handshakes verified certificates of %d CAs (%v), want the old and the new", len(issuers), issuers)
	}
	issuersMu.Unlock()
	rc = redistest.WaitShape(t, env.Client, key, 3, 6)
	w.Verify(t, env.Client, rc, pw)

	// The nodes dropped the old CA: its certificate no longer gets onto the cluster bus.
	oldCert, err := certs.NewServer(oldCA, []string{serverName}, nil, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(oldCert.Cert, oldCert.Key)
	if err != nil {
		t.Fatal(err)
	}
	newPool, _ := certs.Pool(newCA)
	withOld := &tls.Config{RootCAs: newPool, ServerName: serverName, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	for _, n := range rc.Status.Nodes {
		bus := strings.TrimSuffix(n.Instance, ":6379") + ":16379"
		if err := busRead(bus, withOld); err == nil || isTimeout(err) {
			t.Errorf("%s: the cluster bus, to a certificate of the old CA: %v, want it refused", n.Name, err)
		}
	}
}

// stopWithoutFailures lets the writer write 300 more keys, stops it, and fails the test
// when any of its writes failed (during says when: "during the CA rotation").
func stopWithoutFailures(t *testing.T, w *redistest.Writer, during string) {
	t.Helper()
	w.WaitWritten(t, 300)
	written, outage := w.Stop()
	failures, lastErr := w.Failures()
	t.Logf("writer: %d keys, %d failed writes (last: %v), longest outage %s", written, failures, lastErr, outage)
	if failures > 0 {
		t.Errorf("%d writes failed %s, want 0 (last: %v)", failures, during, lastErr)
	}
}
