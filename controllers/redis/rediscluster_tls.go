package redis

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// tlsNow is the clock of certificate checks and renewals (a test may move it).
var tlsNow = time.Now

// readTLS builds the TLS configuration of the connections to the nodes from the Secret the
// pods mount, when it exists and verifies, without changing anything: a paused cluster is
// still read over TLS. ensureTLS reports what is wrong otherwise.
func (r *RedisClusterReconciler) readTLS(ctx context.Context, s *state) error {
	if !resources.RedisTLSEnabled(s.rc) {
		return nil
	}
	if !resources.RedisTLSUserSecret(s.rc) && !resources.RedisTLSIssued(s.rc) {
		if err := r.readGeneratedCA(ctx, s); err != nil {
			return err
		}
	}
	secret, err := r.tlsSecret(ctx, s)
	if err != nil || secret == nil {
		return err
	}
	if cfg, err := nodeTLSConfig(s, secret); err == nil {
		s.certs.config = cfg
		r.expectCertificate(s, secret)
	}
	return nil
}

// expectCertificate makes secret's certificate (verified by nodeTLSConfig) the one every
// node should serve (checkCertificates), and one of the cluster's own (ownCertsTLS). Every
// reconcile that reads TLS sets it, not only those that ensure the children: a CA
// rotation's stage must not end on a snapshot that checked no node.
func (r *RedisClusterReconciler) expectCertificate(s *state, secret *corev1.Secret) *x509.Certificate {
	cert, _ := certs.ParseCert(secret.Data[resources.RedisTLSCertKey])
	s.certs.cert, s.certs.x509 = cert.Raw, cert
	r.issued.add(client.ObjectKeyFromObject(s.rc), cert.Raw)
	return cert
}

// ensureTLS keeps the cluster's certificate: with spec.tls.secretName it checks the user's
// Secret (keys, key pair, chain to ca.crt, the client Service's name, server and client
// usages); otherwise it keeps a generated CA (<name>-tls-ca, made once) and a certificate it
// signs (<name>-tls), made again when missing or invalid (renewed when due by the planner,
// StepRenewCertificate). A
// user's Secret that is missing or wrong stops the reconcile: the TLS condition and a
// Warning event say what to fix; a wrong one resumes on its next change (it is labelled and
// watched), a missing one is looked for again after plan.LookIdle.
func (r *RedisClusterReconciler) ensureTLS(ctx context.Context, s *state) error {
	gen, conds := s.rc.Generation, &s.next.Status.Conditions
	if !resources.RedisTLSEnabled(s.rc) {
		status.Set(conds, gen, report.ConditionTLS, metav1.ConditionFalse, report.ReasonTLSDisabled, "spec.tls.enabled is not true: clients, replication and the cluster bus use plain text")
		return nil
	}
	reason := report.ReasonTLSUserCertificate
	var secret *corev1.Secret
	var err error
	switch {
	case resources.RedisTLSUserSecret(s.rc):
		secret, err = r.tlsSecret(ctx, s)
		if err == nil && secret == nil {
			err = &tlsInvalidError{msg: fmt.Sprintf("spec.tls.secretName: Secret %q not found: create a kubernetes.io/tls Secret with the keys %s, %s and %s",
				s.rc.Spec.TLS.SecretName, resources.RedisTLSCAKey, resources.RedisTLSCertKey, resources.RedisTLSKeyKey), missing: true}
		}
	case resources.RedisTLSIssued(s.rc):
		reason = report.ReasonTLSIssued
		secret, err = r.ensureIssuedTLS(ctx, s)
	default:
		reason = report.ReasonTLSGenerated
		secret, err = r.ensureGeneratedTLS(ctx, s)
	}
	if err == nil && (s.certs.config == nil || secret != s.certs.secret) { // readTLS checked this one already
		if s.certs.config, err = nodeTLSConfig(s, secret); err == nil {
			s.certs.secret = secret
		}
	}
	var invalid *tlsInvalidError
	if errors.As(err, &invalid) {
		why := cmp.Or(invalid.reason, report.ReasonTLSInvalid)
		if c := meta.FindStatusCondition(s.rc.Status.Conditions, report.ConditionTLS); why != report.ReasonTLSCertificatePending && (c == nil || c.Reason != why || c.Message != invalid.msg) {
			r.Recorder.Eventf(s.rc, nil, corev1.EventTypeWarning, why, "Reconcile", "%s", invalid.msg)
		}
		status.Set(conds, gen, report.ConditionTLS, metav1.ConditionFalse, why, invalid.msg)
		if invalid.missing {
			return &userObjectMissingError{invalid.msg}
		}
		return reconcile.TerminalError(err)
	}
	if err != nil {
		return err
	}
	cert := r.expectCertificate(s, secret)
	msg := fmt.Sprintf("the nodes serve the certificate of Secret %s, valid until %s; clients verify it with its %s and the name %s",
		secret.Name, cert.NotAfter.UTC().Format(time.RFC3339), resources.RedisTLSCAKey, resources.RedisTLSServerName(s.rc))
	if reason == report.ReasonTLSIssued {
		msg += fmt.Sprintf("; issued by %s through Certificate %s, which cert-manager renews", resources.RedisIssuer(s.rc), secret.Name)
	}
	if reason == report.ReasonTLSGenerated {
		at, _ := certs.RenewAt(secret.Data[resources.RedisTLSCertKey])
		msg += fmt.Sprintf("; renewed from %s", at.UTC().Format(time.RFC3339))
		if s.certs.ca != nil && s.certs.ca.Stage() != "" {
			msg += fmt.Sprintf("; CA rotation in stage %s since %s (%s lists the old and the new CA)",
				s.certs.ca.Stage(), s.certs.ca.Since.UTC().Format(time.RFC3339), resources.RedisTLSCAKey)
		}
	}
	status.Set(conds, gen, report.ConditionTLS, metav1.ConditionTrue, reason, msg)
	return nil
}

// checkCertificates marks, in the snapshot, the answering nodes that serve another
// certificate than the TLS Secret's (execute.ServesCertificate: a TLS handshake each). A
// node already seen serving this certificate since its process started is not asked again
// (certsSeen), so a converged cluster costs no handshake.
func (r *RedisClusterReconciler) checkCertificates(ctx context.Context, s *state) {
	if s.certs.config == nil || s.certs.cert == nil {
		return
	}
	cluster := client.ObjectKeyFromObject(s.rc)
	var trust *tls.Config // made at the first handshake: a converged cluster needs none
	for i := range s.snap.Nodes {
		o := &s.snap.Nodes[i]
		if !o.Answered() || r.certsSeen.has(cluster, string(s.certs.cert), o) {
			continue
		}
		if trust == nil {
			trust = r.ownCertsTLS(s)
		}
		ok, err := execute.ServesCertificate(ctx, o.Addr, trust, s.certs.cert)
		switch {
		case err != nil: // gone since it answered, or no certificate of the cluster's: no evidence either way
			o.CertificateUnknown = true
			logf.FromContext(ctx).V(1).Info("certificate not checked", "pod", o.Pod, "error", err.Error())
		case ok:
			r.certsSeen.mark(cluster, string(s.certs.cert), o)
		default:
			o.StaleCertificate = true
		}
	}
}

// ownCertsTLS is s.certs.config that also accepts a node presenting one of the cluster's latest
// certificates (trustingIssued): an earlier one, after a CA rotation dropped its CA, shows
// as stale and can be reloaded.
func (r *RedisClusterReconciler) ownCertsTLS(s *state) *tls.Config {
	cluster := client.ObjectKeyFromObject(s.rc)
	return trustingIssued(s.certs.config, func(der []byte) bool { return r.issued.has(cluster, der) })
}

// reloadCertificates makes each node of the step read its certificate files again
// (execute.ReloadTLS), without a restart, and reports those that then serve the TLS
// Secret's certificate.
func (r *RedisClusterReconciler) reloadCertificates(ctx context.Context, s *state) error {
	var reloaded []string
	trust := r.ownCertsTLS(s)
	for _, addr := range s.step.Addrs {
		if err := r.fence(ctx); err != nil {
			return err
		}
		if err := execute.ReloadTLS(ctx, addr, trust, s.login(), resources.RedisTLSCertFile); err != nil {
			continue // not readable yet (the files are being replaced) or the node went away
		}
		if ok, err := execute.ServesCertificate(ctx, addr, s.certs.config, s.certs.cert); err == nil && ok {
			reloaded = append(reloaded, addr)
		}
	}
	if len(reloaded) > 0 {
		r.event(s, corev1.EventTypeNormal, report.ReasonTLSReloaded, "Reload",
			"%d nodes now serve the certificate of Secret %s (%s)", len(reloaded), resources.RedisTLSSecretName(s.rc), strings.Join(reloaded, ", "))
	}
	return nil
}

// tlsExternalHosts are the external hosts the nodes' certificate must name
// (resources.RedisTLSExternalHosts): none without TLS or external access.
func (s *state) tlsExternalHosts() []string {
	return resources.RedisTLSExternalHosts(s.rc, s.external)
}

// tlsInvalidError: the TLS Secret is missing or its content is wrong.
type tlsInvalidError struct {
	msg string
	// reason is the TLS condition's reason (report.ReasonTLSInvalid when empty).
	reason string
	// missing: the user's Secret does not exist (a bounded requeue looks for it again).
	missing bool
}

func (e *tlsInvalidError) Error() string { return e.msg }

// tlsSecret reads the Secret the pods mount (the user's through the API reader: the cache
// holds only the operator's own), nil when it does not exist; once per reconcile, as readTLS
// and ensureTLS both need it.
func (r *RedisClusterReconciler) tlsSecret(ctx context.Context, s *state) (*corev1.Secret, error) {
	if s.certs.secretRead {
		return s.certs.secret, nil
	}
	get := r.Get
	if resources.RedisTLSUserSecret(s.rc) || resources.RedisTLSIssued(s.rc) {
		get = r.userObject // cert-manager's Secret is not the operator's either
	}
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RedisTLSSecretName(s.rc)}
	if err := get(ctx, key, secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("while reading Secret %s: %w", key.Name, err)
		}
		secret = nil
	}
	s.certs.secret, s.certs.secretRead = secret, true
	return secret, nil
}

// nodeTLSConfig checks secret's certificate (see certs.Check) and returns the configuration
// that verifies the nodes: its CA, and the client Service's name, which the certificate of
// every node carries.
func nodeTLSConfig(s *state, secret *corev1.Secret) (*tls.Config, error) {
	for _, key := range []string{resources.RedisTLSCAKey, resources.RedisTLSCertKey, resources.RedisTLSKeyKey} {
		if len(secret.Data[key]) == 0 {
			return nil, &tlsInvalidError{msg: fmt.Sprintf("Secret %q has no %q key: it needs %s, %s and %s",
				secret.Name, key, resources.RedisTLSCAKey, resources.RedisTLSCertKey, resources.RedisTLSKeyKey)}
		}
	}
	serverName := resources.RedisTLSServerName(s.rc)
	pair := certs.Pair{Cert: secret.Data[resources.RedisTLSCertKey], Key: secret.Data[resources.RedisTLSKeyKey]}
	if err := certs.Check(secret.Data[resources.RedisTLSCAKey], pair, serverName, tlsNow()); err != nil {
		return nil, &tlsInvalidError{msg: fmt.Sprintf("Secret %q: %v; the certificate must be signed by %s, valid now, name %s (and may name *.%s.%s.svc for the pods), allow server and client authentication, and have keys of at least RSA %d bits or ECDSA P-256",
			secret.Name, err, resources.RedisTLSCAKey, serverName, resources.RedisHeadlessServiceName(s.rc), s.rc.Namespace, certs.MinRSABits)}
	}
	pool, _ := certs.Pool(secret.Data[resources.RedisTLSCAKey]) // checked above
	// The operator presents the nodes' certificate (it has the client usage): nodes that
	// require client certificates (spec.tls.requireClientCertificates) accept it.
	cert, err := tls.X509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		return nil, &tlsInvalidError{msg: fmt.Sprintf("Secret %q: %v", secret.Name, err)}
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}

// ensureGeneratedTLS keeps the generated CA and certificate Secrets and returns the
// certificate's: issued when missing or when it does not verify (the look needs a working
// one; a Secret of that name that is not the operator's is refused by child.Ensure); when it works but is due, of a CA rotation's earlier stage or
// lacks an external host, the planner renews it (StepRenewCertificate, GeneratedCert).
func (r *RedisClusterReconciler) ensureGeneratedTLS(ctx context.Context, s *state) (*corev1.Secret, error) {
	ca, err := r.ensureGeneratedCA(ctx, s)
	if err != nil {
		return nil, err
	}
	current, err := r.tlsSecret(ctx, s)
	if err != nil {
		return nil, err
	}
	if current != nil && metav1.IsControlledBy(current, s.rc) && s.certs.config != nil {
		return current, nil // readTLS verified it (nodeTLSConfig)
	}
	return r.issueGeneratedCert(ctx, s, ca, current)
}

// issueGeneratedCert issues a certificate of ca's signing CA for the nodes (their names and
// the external hosts) and writes it into the TLS Secret (current, nil when there is none),
// with a CertificateRenewed event when it replaced one.
func (r *RedisClusterReconciler) issueGeneratedCert(ctx context.Context, s *state, ca resources.RedisCA, current *corev1.Secret) (*corev1.Secret, error) {
	rc := s.rc
	external := s.tlsExternalHosts()
	server, err := certs.NewServer(ca.Signer, resources.RedisTLSDNSNames(rc, external...), resources.RedisTLSIPs(external...), tlsNow(), certs.ServerValidity)
	if err != nil {
		return nil, err
	}
	live, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, rc, resources.RedisTLSSecret(rc, ca.Bundle(), server), child.MergeSecret)
	r.record(s, live, outcome, err)
	if err != nil {
		return nil, err
	}
	if current != nil && outcome == child.Updated {
		r.Recorder.Eventf(s.rc, live, corev1.EventTypeNormal, report.ReasonTLSRenewed, "Renew",
			"issued a new certificate in Secret %s (the previous one was due for renewal, did not verify, or a CA rotation moved on); the nodes load it once their Secret volume shows it", live.Name)
	}
	return live, nil
}

// renewCertificate issues the generated certificate again, as the step planned
// (StepRenewCertificate).
func (r *RedisClusterReconciler) renewCertificate(ctx context.Context, s *state) error {
	if s.certs.ca == nil {
		return errors.New("while renewing the nodes' certificate: the generated CA was not read")
	}
	if _, err := r.issueGeneratedCert(ctx, s, *s.certs.ca, s.certs.secret); err != nil {
		return fmt.Errorf("while renewing the nodes' certificate: %w", err)
	}
	return nil
}

// plannerGeneratedCert is the generated certificate for the planner: nil without TLS, with
// a user's or cert-manager's certificate, while the Secret is not the operator's, or while
// it does not verify (ensureGeneratedTLS issues it then).
func plannerGeneratedCert(s *state) *plan.GeneratedCert {
	rc, secret := s.rc, s.certs.secret
	if !resources.RedisTLSEnabled(rc) || resources.RedisTLSUserSecret(rc) || resources.RedisTLSIssued(rc) ||
		s.certs.ca == nil || s.certs.config == nil || secret == nil || !metav1.IsControlledBy(secret, rc) {
		return nil
	}
	cert := secret.Data[resources.RedisTLSCertKey]
	renewAt, _ := certs.RenewAt(cert) // unreadable: the zero time, so it is renewed
	pair := certs.Pair{Cert: cert, Key: secret.Data[resources.RedisTLSKeyKey]}
	stale := string(secret.Data[resources.RedisTLSCAKey]) != string(s.certs.ca.Bundle()) ||
		certs.Check(s.certs.ca.Signer.Cert, pair, resources.RedisTLSServerName(rc), tlsNow()) != nil
	return &plan.GeneratedCert{RenewAt: renewAt, StaleCA: stale, Unnamed: report.UnnamedHosts(s.certs.x509, s.tlsExternalHosts())}
}
