package nodetls

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/caching"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// ClusterIssuersFlag is the operator flag listing the ClusterIssuers RedisClusters may name.
const ClusterIssuersFlag = "cluster-issuers"

// ClusterIssuerAllowed reports whether allowed (the operator's --cluster-issuers) lets a
// RedisCluster name the ClusterIssuer name: an entry is a name, or a prefix ending in "*"
// ("tenant-a-*"); "*" alone allows every one. An empty list allows none: a ClusterIssuer
// signs for every namespace, so a tenant naming one would make the operator its deputy.
func ClusterIssuerAllowed(allowed []string, name string) bool {
	for _, a := range allowed {
		if prefix, glob := strings.CutSuffix(a, "*"); (glob && strings.HasPrefix(name, prefix)) || a == name {
			return true
		}
	}
	return false
}

// issuerRefused is the TLS error of a ClusterIssuer the admin did not allow, nil otherwise
// (an Issuer lives in the cluster's own namespace: the tenant's to name).
func (k *Keeper) issuerRefused(rc *redisv1alpha1.RedisCluster) error {
	ref := rc.Spec.TLS.IssuerRef
	if ref.Kind != "ClusterIssuer" || ClusterIssuerAllowed(k.ClusterIssuers, ref.Name) {
		return nil
	}
	return &invalidError{reason: report.ReasonTLSIssuerNotAllowed, msg: fmt.Sprintf(
		"spec.tls.issuerRef names %s, which the operator may not use for this cluster: its --%s lists %s. Ask the cluster admin to add it, or name an Issuer of this namespace",
		resources.RedisIssuer(rc), ClusterIssuersFlag, allowedList(k.ClusterIssuers))}
}

// allowedList is how a message quotes --cluster-issuers.
func allowedList(allowed []string) string {
	if len(allowed) == 0 {
		return "no ClusterIssuer"
	}
	return strings.Join(allowed, ", ")
}

// certificateRecheck is how long a Certificate the operator made or found as it wants it is
// trusted to stay so without reading it again (the operator does not watch Certificates:
// a converged cluster then costs no API read for it).
const certificateRecheck = 10 * time.Minute

// keptCertificates remembers, by cluster, the hash of the Certificate last kept and when.
type keptCertificates struct {
	mu   sync.Mutex
	kept map[types.NamespacedName]keptCertificate
}

type keptCertificate struct {
	hash string
	at   time.Time
}

func (k *keptCertificates) fresh(key types.NamespacedName, hash string, now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, ok := k.kept[key]
	return ok && c.hash == hash && now.Sub(c.at) < certificateRecheck
}

func (k *keptCertificates) mark(key types.NamespacedName, hash string, now time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.kept == nil {
		k.kept = map[types.NamespacedName]keptCertificate{}
	}
	k.kept[key] = keptCertificate{hash, now}
}

func (k *keptCertificates) forget(key types.NamespacedName) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.kept, key)
}

// ensureIssued keeps the cluster's cert-manager Certificate and returns the Secret
// cert-manager writes for it. Until that Secret holds a certificate the reconcile stops
// with the TLS condition saying what the Certificate says, and looks again after a bounded
// requeue (the Secret's creation is seen by no watch until the operator labels it).
func (k *Keeper) ensureIssued(ctx context.Context, rc *redisv1alpha1.RedisCluster, f *Facts, hosts []string) (*corev1.Secret, error) {
	if err := k.issuerRefused(rc); err != nil {
		return nil, err
	}
	secret, err := k.secret(ctx, rc, f)
	if err != nil {
		return nil, err
	}
	issued := secret != nil && len(secret.Data[resources.RedisTLSCertKey]) > 0
	cert, err := k.ensureCertificate(ctx, rc, issued, hosts)
	if err != nil || issued {
		return secret, err
	}
	status, msg := resources.CertificateReady(cert)
	if status == "" {
		msg = "no Ready condition yet"
	}
	return nil, &invalidError{reason: report.ReasonTLSCertificatePending, missing: true, msg: fmt.Sprintf(
		"waiting for cert-manager to issue Secret %s from %s: Certificate %s says %q; check that the issuer exists and is Ready (kubectl describe certificate %s)",
		resources.RedisTLSSecretName(rc), resources.RedisIssuer(rc), cert.GetName(), msg, cert.GetName())}
}

// ensureCertificate makes the Certificate match resources.RedisCertificate, reading it from
// the API server (Certificates are not cached) unless this process kept it as wanted within
// certificateRecheck and its Secret is issued. It returns the Certificate as the server has
// it (nil when skipped).
func (k *Keeper) ensureCertificate(ctx context.Context, rc *redisv1alpha1.RedisCluster, issued bool, hosts []string) (*unstructured.Unstructured, error) {
	desired := resources.RedisCertificate(rc, map[string]string{caching.WatchLabel: caching.WatchLabelValue}, hosts...)
	if err := controllerutil.SetControllerReference(rc, desired, k.Scheme); err != nil {
		return nil, err
	}
	hash, err := child.HashOf(desired)
	if err != nil {
		return nil, err
	}
	key, now := client.ObjectKeyFromObject(rc), time.Now()
	if issued && k.kept.fresh(key, hash, now) {
		return nil, nil
	}
	desired.SetAnnotations(map[string]string{child.HashAnnotation: hash})
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(resources.CertificateGVK)
	err = k.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), live)
	switch {
	case meta.IsNoMatchError(err):
		return nil, &invalidError{reason: report.ReasonTLSCertManagerMissing, missing: true, msg: fmt.Sprintf(
			"spec.tls.issuerRef names %s, but this cluster does not serve cert-manager's Certificate kind (%s): install cert-manager, or create a new RedisCluster without issuerRef",
			resources.RedisIssuer(rc), resources.CertificateGVK.GroupVersion())}
	case apierrors.IsNotFound(err):
		if err := k.Client.Create(ctx, desired, client.FieldOwner(child.FieldOwner)); err != nil {
			return nil, fmt.Errorf("while creating Certificate %s: %w", desired.GetName(), err)
		}
		k.record(rc, desired, child.Created, nil)
		live = desired
	case err != nil:
		return nil, fmt.Errorf("while reading Certificate %s: %w", desired.GetName(), err)
	case !metav1.IsControlledBy(live, rc):
		return nil, &invalidError{msg: fmt.Sprintf(
			"Certificate %s exists and belongs to something else than this RedisCluster: delete it or rename the RedisCluster", live.GetName())}
	case live.GetAnnotations()[child.HashAnnotation] != hash:
		live.Object["spec"] = desired.Object["spec"]
		live.SetLabels(desired.GetLabels())
		live.SetAnnotations(desired.GetAnnotations())
		if err := k.Client.Update(ctx, live, client.FieldOwner(child.FieldOwner)); err != nil {
			return nil, fmt.Errorf("while updating Certificate %s: %w", live.GetName(), err)
		}
		k.record(rc, live, child.Updated, nil)
	}
	k.kept.mark(key, hash, now)
	return live, nil
}
