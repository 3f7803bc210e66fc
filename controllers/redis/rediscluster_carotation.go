package redis

import (
	"context"
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

// readGeneratedCA reads the generated CA Secret from the cache once per reconcile, for the
// planner to see a rotation under way and for ensureGeneratedCA and advanceCA to write;
// s.certs.ca stays nil when it does not exist yet or is not the operator's.
func (r *RedisClusterReconciler) readGeneratedCA(ctx context.Context, s *state) error {
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: s.rc.Namespace, Name: resources.RedisTLSCASecretName(s.rc)}
	if err := r.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("while reading Secret %s: %w", key.Name, err)
	}
	s.certs.caSecret = secret
	if metav1.IsControlledBy(secret, s.rc) {
		ca := resources.ReadRedisCA(secret)
		s.certs.ca = &ca
	}
	return nil
}

// newClusterCA makes a fresh CA for rc.
func newClusterCA(rc *redisv1alpha1.RedisCluster) (certs.Pair, error) {
	return certs.NewCA(rc.Name+"."+rc.Namespace+" Redis CA", tlsNow(), certs.CAValidity)
}

// ensureGeneratedCA keeps the generated CA Secret (as readGeneratedCA read it): made once.
// Its rotations are the planner's (StepStartCARotation, StepRotateCA).
func (r *RedisClusterReconciler) ensureGeneratedCA(ctx context.Context, s *state) (resources.RedisCA, error) {
	rc := s.rc
	if s.certs.ca == nil {
		// Made once. A stale read cannot replace a live CA (its keys are kept), and a
		// Secret of someone else's is refused by Ensure.
		fresh, err := newClusterCA(rc)
		if err != nil {
			return resources.RedisCA{}, err
		}
		made, outcome, err := child.Ensure(ctx, r.Client, r.Scheme, rc, resources.RedisTLSCASecret(rc, resources.RedisCA{Signer: fresh}),
			child.MergeSecretKeeping(resources.RedisTLSCertKey, resources.RedisTLSKeyKey))
		r.record(s, made, outcome, err)
		if err != nil {
			return resources.RedisCA{}, err
		}
		s.certs.caSecret = made
		read := resources.ReadRedisCA(made)
		s.certs.ca = &read
	}
	return *s.certs.ca, nil
}

// writeCA writes ca into the live CA Secret, failing on a conflict rather than over a
// newer stage.
func (r *RedisClusterReconciler) writeCA(ctx context.Context, rc *redisv1alpha1.RedisCluster, live *corev1.Secret, ca resources.RedisCA) error {
	desired := resources.RedisTLSCASecret(rc, ca)
	live.Data = desired.Data
	live.Annotations = resources.WithRedisCAAnnotations(live.Annotations, desired.Annotations)
	if err := r.Update(ctx, live); err != nil {
		return fmt.Errorf("while writing the CA rotation's stage to Secret %s: %w", live.Name, err)
	}
	return nil
}

// plannerCARotation is the rotation under way for the planner, nil when none is.
func plannerCARotation(s *state) *plan.CARotation {
	if s.certs.ca == nil || s.certs.ca.Stage() == "" {
		return nil
	}
	return &plan.CARotation{Stage: s.certs.ca.Stage(), Last: s.certs.ca.Stage() == resources.CAStageSwitch, Due: resources.RedisCAStageDue(s.rc, *s.certs.ca),
		Checked: s.certs.config != nil && s.certs.cert != nil}
}

// plannerGeneratedCA is the generated CA for the planner while no rotation of it is under
// way, nil without one (or during one).
func plannerGeneratedCA(s *state) *plan.GeneratedCA {
	if s.certs.ca == nil || s.certs.ca.Stage() != "" {
		return nil
	}
	renewAt, _ := certs.RenewAt(s.certs.ca.Signer.Cert) // unreadable: the zero time, so it is rotated
	return &plan.GeneratedCA{RenewAt: renewAt, Token: s.rc.Annotations[resources.RedisRotateCAAnnotation], RotatedFor: s.certs.ca.RotatedFor}
}

// startCARotation starts the rotation the step planned: a new CA written into the CA
// Secret next to the old one (over the Secret as read this reconcile: a newer one fails on
// the conflict). The next look renews the nodes' certificate (StepRenewCertificate).
func (r *RedisClusterReconciler) startCARotation(ctx context.Context, s *state) error {
	if s.certs.ca == nil || s.certs.ca.Stage() != "" {
		return nil // planned from another read (not expected within one reconcile)
	}
	next, err := newClusterCA(s.rc)
	if err != nil {
		return err
	}
	ca := s.certs.ca.Started(next, tlsNow(), s.rc.Annotations[resources.RedisRotateCAAnnotation])
	if err := r.writeCA(ctx, s.rc, s.certs.caSecret, ca); err != nil {
		return err
	}
	r.changes.touch(client.ObjectKeyFromObject(s.rc))
	r.event(s, corev1.EventTypeNormal, report.ReasonCARotationStarted, "Rotate",
		"rotating the CA of Secret %s (%s): ca.crt of %s now lists the new CA next to the old one; the nodes switch to a certificate of the new CA after at least %s",
		s.certs.caSecret.Name, s.step.Reason, resources.RedisTLSSecretName(s.rc), resources.RedisCAStageDue(s.rc, ca).Sub(ca.Since))
	return nil
}

// advanceCA moves the CA rotation a stage on (the step planned it: every node serves the
// current stage's certificate and the overlap has passed), writing over the Secret as read
// this reconcile: a newer one fails on the conflict. The next look renews the certificate
// of the new stage.
func (r *RedisClusterReconciler) advanceCA(ctx context.Context, s *state) error {
	if s.certs.ca == nil || s.certs.ca.Stage() != s.step.CAStage {
		return nil // planned from another read (not expected within one reconcile)
	}
	next := s.certs.ca.Advanced(tlsNow())
	if err := r.writeCA(ctx, s.rc, s.certs.caSecret, next); err != nil {
		return err
	}
	r.changes.touch(client.ObjectKeyFromObject(s.rc))
	if next.Stage() == resources.CAStageSwitch {
		r.event(s, corev1.EventTypeNormal, report.ReasonCARotationSwitched, "Rotate",
			"every node trusts the new CA: it now signs the nodes' certificate; ca.crt keeps the old CA for at least %s more", resources.RedisCAStageDue(s.rc, next).Sub(next.Since))
	} else {
		r.event(s, corev1.EventTypeNormal, report.ReasonCARotationCompleted, "Rotate",
			"every node serves a certificate of the new CA: the old CA is dropped from ca.crt of %s", resources.RedisTLSSecretName(s.rc))
	}
	return nil
}
