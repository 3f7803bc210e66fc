package nodetls

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// ensureGenerated keeps the generated CA and certificate Secrets and returns the
// certificate's: issued when missing or when it does not verify (the look needs a working
// one; a Secret of that name that is not the operator's is refused by child.Ensure); when
// it works but is due, of a CA rotation's earlier stage or lacks an external host, the
// planner renews it (StepRenewCertificate, GeneratedCert).
func (k *Keeper) ensureGenerated(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts, hosts []string) (*corev1.Secret, error) {
	ca, err := k.ensureGeneratedCA(ctx, rc, f)
	if err != nil {
		return nil, err
	}
	current, err := k.secret(ctx, rc, f)
	if err != nil {
		return nil, err
	}
	if current != nil && metav1.IsControlledBy(current, rc) && f.Config != nil {
		return current, nil // Read verified it (nodeConfig)
	}
	return k.issueGenerated(ctx, rc, ca, current, hosts)
}

// issueGenerated issues a certificate of ca's signing CA for the nodes (their names and the
// external hosts) and writes it into the TLS Secret (current, nil when there is none), with
// a CertificateRenewed event when it replaced one.
func (k *Keeper) issueGenerated(ctx context.Context, rc *redisv1alpha1.RedisCluster, ca resources.RedisCA, current *corev1.Secret, hosts []string) (*corev1.Secret, error) {
	server, err := certs.NewServer(ca.Signer, resources.RedisTLSDNSNames(rc, hosts...), resources.RedisTLSIPs(hosts...), Now(), certs.ServerValidity)
	if err != nil {
		return nil, err
	}
	live, outcome, err := child.Ensure(ctx, k.Client, k.Scheme, rc, resources.RedisTLSSecret(rc, ca.Bundle(), server), child.MergeSecret)
	k.record(rc, live, outcome, err)
	if err != nil {
		return nil, err
	}
	if current != nil && outcome == child.Updated {
		k.Recorder.Eventf(rc, live, corev1.EventTypeNormal, report.ReasonTLSRenewed, "Renew",
			"issued a new certificate in Secret %s (the previous one was due for renewal, did not verify, or a CA rotation moved on); the nodes load it once their Secret volume shows it", live.Name)
	}
	return live, nil
}

// Renew issues the generated certificate again, naming hosts, as the planner's
// StepRenewCertificate asks.
func (k *Keeper) Renew(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts, hosts []string) error {
	if f.CA == nil {
		return errors.New("while renewing the nodes' certificate: the generated CA was not read")
	}
	if _, err := k.issueGenerated(ctx, rc, *f.CA, f.Secret, hosts); err != nil {
		return fmt.Errorf("while renewing the nodes' certificate: %w", err)
	}
	return nil
}

// GeneratedCert is the generated certificate for the planner: nil without TLS, with a
// user's or cert-manager's certificate, while the Secret is not the operator's, or while
// it does not verify (Ensure issues it then). hosts are the external hosts it must name.
func GeneratedCert(rc *redisv1alpha1.RedisCluster, f *Facts, hosts []string) *plan.GeneratedCert {
	secret := f.Secret
	if !resources.RedisTLSEnabled(rc) || resources.RedisTLSUserSecret(rc) || resources.RedisTLSIssued(rc) ||
		f.CA == nil || f.Config == nil || secret == nil || !metav1.IsControlledBy(secret, rc) {
		return nil
	}
	cert := secret.Data[resources.RedisTLSCertKey]
	renewAt, _ := certs.RenewAt(cert) // unreadable: the zero time, so it is renewed
	pair := certs.Pair{Cert: cert, Key: secret.Data[resources.RedisTLSKeyKey]}
	stale := string(secret.Data[resources.RedisTLSCAKey]) != string(f.CA.Bundle()) ||
		certs.Check(f.CA.Signer.Cert, pair, resources.RedisTLSServerName(rc), Now()) != nil
	return &plan.GeneratedCert{RenewAt: renewAt, StaleCA: stale, Unnamed: certs.UnnamedHosts(f.X509, hosts)}
}

// readGeneratedCA reads the generated CA Secret from the cache once per reconcile, for the
// planner to see a rotation under way and for ensureGeneratedCA and the rotation steps to
// write; f.CA stays nil when it does not exist yet or is not the operator's.
func (k *Keeper) readGeneratedCA(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts) error {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: rc.Namespace, Name: resources.RedisTLSCASecretName(rc)}
	if err := k.Client.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("while reading Secret %s: %w", key.Name, err)
	}
	f.CASecret = secret
	if metav1.IsControlledBy(secret, rc) {
		ca := resources.ReadRedisCA(secret)
		f.CA = &ca
	}
	return nil
}

// newClusterCA makes a fresh CA for rc.
func newClusterCA(rc *redisv1alpha1.RedisCluster) (certs.Pair, error) {
	return certs.NewCA(rc.Name+"."+rc.Namespace+" Redis CA", Now(), certs.CAValidity)
}

// ensureGeneratedCA keeps the generated CA Secret (as readGeneratedCA read it): made once.
// Its rotations are the planner's (StepStartCARotation, StepRotateCA).
func (k *Keeper) ensureGeneratedCA(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts) (resources.RedisCA, error) {
	if f.CA == nil {
		// Made once. A stale read cannot replace a live CA (its keys are kept), and a
		// Secret of someone else's is refused by Ensure.
		fresh, err := newClusterCA(rc)
		if err != nil {
			return resources.RedisCA{}, err
		}
		made, outcome, err := child.Ensure(ctx, k.Client, k.Scheme, rc, resources.RedisTLSCASecret(rc, resources.RedisCA{Signer: fresh}),
			child.MergeSecretKeeping(resources.RedisTLSCertKey, resources.RedisTLSKeyKey))
		k.record(rc, made, outcome, err)
		if err != nil {
			return resources.RedisCA{}, err
		}
		f.CASecret = made
		read := resources.ReadRedisCA(made)
		f.CA = &read
	}
	return *f.CA, nil
}

// writeCA writes ca into the live CA Secret, failing on a conflict rather than over a
// newer stage.
func (k *Keeper) writeCA(ctx context.Context, rc *redisv1alpha1.RedisCluster, live *corev1.Secret, ca resources.RedisCA) error {
	desired := resources.RedisTLSCASecret(rc, ca)
	live.Data = desired.Data
	live.Annotations = resources.WithRedisCAAnnotations(live.Annotations, desired.Annotations)
	if err := k.Client.Update(ctx, live); err != nil {
		return fmt.Errorf("while writing the CA rotation's stage to Secret %s: %w", live.Name, err)
	}
	return nil
}

// CARotation is the rotation under way for the planner, nil when none is.
func CARotation(rc *redisv1alpha1.RedisCluster, f *Facts) *plan.CARotation {
	if f.CA == nil || f.CA.Stage() == "" {
		return nil
	}
	return &plan.CARotation{Stage: f.CA.Stage(), Last: f.CA.Stage() == resources.CAStageSwitch, Due: resources.RedisCAStageDue(rc, *f.CA),
		Checked: f.Config != nil && f.Cert != nil}
}

// GeneratedCA is the generated CA for the planner while no rotation of it is under way, nil
// without one (or during one).
func GeneratedCA(rc *redisv1alpha1.RedisCluster, f *Facts) *plan.GeneratedCA {
	if f.CA == nil || f.CA.Stage() != "" {
		return nil
	}
	renewAt, _ := certs.RenewAt(f.CA.Signer.Cert) // unreadable: the zero time, so it is rotated
	return &plan.GeneratedCA{RenewAt: renewAt, Token: rc.Annotations[resources.RedisRotateCAAnnotation], RotatedFor: f.CA.RotatedFor}
}

// StartCARotation starts the rotation the planner's step planned (why is its reason): a
// new CA written into the CA Secret next to the old one (over the Secret as read this
// reconcile: a newer one fails on the conflict). It reports whether it wrote; the next look
// renews the nodes' certificate (StepRenewCertificate).
func (k *Keeper) StartCARotation(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts, why string) (bool, error) {
	if f.CA == nil || f.CA.Stage() != "" {
		return false, nil // planned from another read (not expected within one reconcile)
	}
	next, err := newClusterCA(rc)
	if err != nil {
		return false, err
	}
	ca := f.CA.Started(next, Now(), rc.Annotations[resources.RedisRotateCAAnnotation])
	if err := k.writeCA(ctx, rc, f.CASecret, ca); err != nil {
		return false, err
	}
	k.Recorder.Eventf(rc, nil, corev1.EventTypeNormal, report.ReasonCARotationStarted, "Rotate",
		"rotating the CA of Secret %s (%s): ca.crt of %s now lists the new CA next to the old one; the nodes switch to a certificate of the new CA after at least %s",
		f.CASecret.Name, why, resources.RedisTLSSecretName(rc), resources.RedisCAStageDue(rc, ca).Sub(ca.Since))
	return true, nil
}

// AdvanceCA moves the CA rotation on from stage (the planner's step: every node serves the
// current stage's certificate and the overlap has passed), writing over the Secret as read
// this reconcile: a newer one fails on the conflict. It reports whether it wrote; the next
// look renews the certificate of the new stage.
func (k *Keeper) AdvanceCA(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts, stage string) (bool, error) {
	if f.CA == nil || f.CA.Stage() != stage {
		return false, nil // planned from another read (not expected within one reconcile)
	}
	next := f.CA.Advanced(Now())
	if err := k.writeCA(ctx, rc, f.CASecret, next); err != nil {
		return false, err
	}
	if next.Stage() == resources.CAStageSwitch {
		k.Recorder.Eventf(rc, nil, corev1.EventTypeNormal, report.ReasonCARotationSwitched, "Rotate",
			"every node trusts the new CA: it now signs the nodes' certificate; ca.crt keeps the old CA for at least %s more", resources.RedisCAStageDue(rc, next).Sub(next.Since))
	} else {
		k.Recorder.Eventf(rc, nil, corev1.EventTypeNormal, report.ReasonCARotationCompleted, "Rotate",
			"every node serves a certificate of the new CA: the old CA is dropped from ca.crt of %s", resources.RedisTLSSecretName(rc))
	}
	return true, nil
}
