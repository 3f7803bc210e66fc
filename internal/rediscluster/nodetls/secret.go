package nodetls

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
	"github.com/middleware-operator/middleware-operator/internal/status"
)

// Read reads the facts of rc's TLS without changing anything (a paused cluster is still
// read over TLS): the generated CA, and the configuration of TLS connections to the nodes
// from the Secret the pods mount, when it exists and verifies. Ensure reports what is wrong
// otherwise.
func (k *Keeper) Read(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts) error {
	if !resources.RedisTLSEnabled(rc) {
		return nil
	}
	if !resources.RedisTLSUserSecret(rc) && !resources.RedisTLSIssued(rc) {
		if err := k.readGeneratedCA(ctx, rc, f); err != nil {
			return err
		}
	}
	secret, err := k.secret(ctx, rc, f)
	if err != nil || secret == nil {
		return err
	}
	if cfg, err := nodeConfig(rc, secret); err == nil {
		f.Config = cfg
		k.expect(rc, f, secret)
	}
	return nil
}

// expect makes secret's certificate (verified by nodeConfig) the one every node should
// serve, and one of the cluster's own (Trust). Every reconcile that reads TLS sets it, not
// only those that ensure the children: a CA rotation's stage must not end on a snapshot
// that checked no node.
func (k *Keeper) expect(rc *redisv1alpha1.RedisCluster, f *Facts, secret *corev1.Secret) *x509.Certificate {
	cert, _ := certs.ParseCert(secret.Data[resources.RedisTLSCertKey])
	f.Cert, f.X509 = cert.Raw, cert
	k.Remember(rc, cert.Raw)
	return cert
}

// Ensure keeps rc's certificate and sets the TLS condition in conds: with
// spec.tls.secretName it checks the user's Secret (keys, key pair, chain to ca.crt, the
// client Service's name, server and client usages); with spec.tls.issuerRef it keeps a
// cert-manager Certificate; otherwise it keeps a generated CA (<name>-tls-ca, made once)
// and a certificate it signs (<name>-tls) naming hosts (the external hosts), made again
// when missing or invalid (renewed when due by the planner, StepRenewCertificate). A
// user's Secret that is missing or wrong stops the reconcile: the condition and a Warning
// event say what to fix; a wrong one is a terminal error (the Secret is labelled and
// watched: its next change resumes), a missing one a *child.MissingError.
func (k *Keeper) Ensure(ctx context.Context, rc *redisv1alpha1.RedisCluster, conds *[]metav1.Condition, f *Facts, hosts []string) error {
	gen := rc.Generation
	if !resources.RedisTLSEnabled(rc) {
		status.Set(conds, gen, report.ConditionTLS, metav1.ConditionFalse, report.ReasonTLSDisabled, "spec.tls.enabled is not true: clients, replication and the cluster bus use plain text")
		return nil
	}
	reason := report.ReasonTLSUserCertificate
	var secret *corev1.Secret
	var err error
	switch {
	case resources.RedisTLSUserSecret(rc):
		secret, err = k.secret(ctx, rc, f)
		if err == nil && secret == nil {
			err = &invalidError{msg: fmt.Sprintf("spec.tls.secretName: Secret %q not found: create a kubernetes.io/tls Secret with the keys %s, %s and %s",
				rc.Spec.TLS.SecretName, resources.RedisTLSCAKey, resources.RedisTLSCertKey, resources.RedisTLSKeyKey), missing: true}
		}
	case resources.RedisTLSIssued(rc):
		reason = report.ReasonTLSIssued
		secret, err = k.ensureIssued(ctx, rc, f, hosts)
	default:
		reason = report.ReasonTLSGenerated
		secret, err = k.ensureGenerated(ctx, rc, f, hosts)
	}
	if err == nil && (f.Config == nil || secret != f.Secret) { // Read checked this one already
		if f.Config, err = nodeConfig(rc, secret); err == nil {
			f.Secret = secret
		}
	}
	var invalid *invalidError
	if errors.As(err, &invalid) {
		why := cmp.Or(invalid.reason, report.ReasonTLSInvalid)
		if c := meta.FindStatusCondition(rc.Status.Conditions, report.ConditionTLS); why != report.ReasonTLSCertificatePending && (c == nil || c.Reason != why || c.Message != invalid.msg) {
			k.Recorder.Eventf(rc, nil, corev1.EventTypeWarning, why, "Reconcile", "%s", invalid.msg)
		}
		status.Set(conds, gen, report.ConditionTLS, metav1.ConditionFalse, why, invalid.msg)
		if invalid.missing {
			return &child.MissingError{Msg: invalid.msg}
		}
		return reconcile.TerminalError(err)
	}
	if err != nil {
		return err
	}
	cert := k.expect(rc, f, secret)
	msg := fmt.Sprintf("the nodes serve the certificate of Secret %s, valid until %s; clients verify it with its %s and the name %s",
		secret.Name, cert.NotAfter.UTC().Format(time.RFC3339), resources.RedisTLSCAKey, resources.RedisTLSServerName(rc))
	if reason == report.ReasonTLSIssued {
		msg += fmt.Sprintf("; issued by %s through Certificate %s, which cert-manager renews", resources.RedisIssuer(rc), secret.Name)
	}
	if reason == report.ReasonTLSGenerated {
		at, _ := certs.RenewAt(secret.Data[resources.RedisTLSCertKey])
		msg += fmt.Sprintf("; renewed from %s", at.UTC().Format(time.RFC3339))
		if f.CA != nil && f.CA.Stage() != "" {
			msg += fmt.Sprintf("; CA rotation in stage %s since %s (%s lists the old and the new CA)",
				f.CA.Stage(), f.CA.Since.UTC().Format(time.RFC3339), resources.RedisTLSCAKey)
		}
	}
	status.Set(conds, gen, report.ConditionTLS, metav1.ConditionTrue, reason, msg)
	return nil
}

// invalidError: the TLS Secret is missing or its content is wrong.
type invalidError struct {
	msg string
	// reason is the TLS condition's reason (report.ReasonTLSInvalid when empty).
	reason string
	// missing: the user's Secret does not exist (a bounded requeue looks for it again).
	missing bool
}

func (e *invalidError) Error() string { return e.msg }

// secret reads the Secret the pods mount (the user's through UserObject: the cache holds
// only the operator's own), nil when it does not exist; once per reconcile, as Read and
// Ensure both need it.
func (k *Keeper) secret(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts) (*corev1.Secret, error) {
	if f.secretRead {
		return f.Secret, nil
	}
	get := k.Client.Get
	if resources.RedisTLSUserSecret(rc) || resources.RedisTLSIssued(rc) {
		get = k.UserObject // cert-manager's Secret is not the operator's either
	}
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: rc.Namespace, Name: resources.RedisTLSSecretName(rc)}
	if err := get(ctx, key, secret); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("while reading Secret %s: %w", key.Name, err)
		}
		secret = nil
	}
	f.Secret, f.secretRead = secret, true
	return secret, nil
}

// nodeConfig checks secret's certificate (see certs.Check) and returns the configuration
// that verifies the nodes: its CA, and the client Service's name, which the certificate of
// every node carries.
func nodeConfig(rc *redisv1alpha1.RedisCluster, secret *corev1.Secret) (*tls.Config, error) {
	for _, key := range []string{resources.RedisTLSCAKey, resources.RedisTLSCertKey, resources.RedisTLSKeyKey} {
		if len(secret.Data[key]) == 0 {
			return nil, &invalidError{msg: fmt.Sprintf("Secret %q has no %q key: it needs %s, %s and %s",
				secret.Name, key, resources.RedisTLSCAKey, resources.RedisTLSCertKey, resources.RedisTLSKeyKey)}
		}
	}
	serverName := resources.RedisTLSServerName(rc)
	pair := certs.Pair{Cert: secret.Data[resources.RedisTLSCertKey], Key: secret.Data[resources.RedisTLSKeyKey]}
	if err := certs.Check(secret.Data[resources.RedisTLSCAKey], pair, serverName, Now()); err != nil {
		return nil, &invalidError{msg: fmt.Sprintf("Secret %q: %v; the certificate must be signed by %s, valid now, name %s (and may name *.%s.%s.svc for the pods), allow server and client authentication, and have keys of at least RSA %d bits or ECDSA P-256",
			secret.Name, err, resources.RedisTLSCAKey, serverName, resources.RedisHeadlessServiceName(rc), rc.Namespace, certs.MinRSABits)}
	}
	pool, _ := certs.Pool(secret.Data[resources.RedisTLSCAKey]) // checked above
	// The operator presents the nodes' certificate (it has the client usage): nodes that
	// require client certificates (spec.tls.requireClientCertificates) accept it.
	cert, err := tls.X509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		return nil, &invalidError{msg: fmt.Sprintf("Secret %q: %v", secret.Name, err)}
	}
	return &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, nil
}
