// Package nodetls keeps what a RedisCluster's nodes need for TLS: the certificate they
// serve and the CA that signs it (generated and rotated by the operator, issued by
// cert-manager, or the user's own Secret), checked before any node is asked to load it. The
// RedisCluster controller reads the facts once per reconcile (Keeper.Read), keeps the
// Secrets and the Certificate while it keeps the children (Keeper.Ensure), and carries out
// the planner's certificate steps (Keeper.Renew, Keeper.StartCARotation, Keeper.AdvanceCA).
package nodetls

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/child"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// Now is the clock of certificate checks and renewals (a test may move it).
var Now = time.Now

// Facts is what a reconcile read and made of the nodes' certificate and its CA.
type Facts struct {
	// Config is the configuration of TLS connections to the nodes, nil without spec.tls
	// (or while the certificate does not verify); Cert the certificate (DER) of the TLS
	// Secret, which every node should serve.
	Config *tls.Config
	Cert   []byte
	// X509 is Cert parsed (the names it carries), nil when there is none.
	X509 *x509.Certificate
	// Secret is the TLS Secret as read this reconcile (nil: none), once secretRead; the
	// one Ensure wrote instead, once it verified.
	Secret     *corev1.Secret
	secretRead bool
	// CASecret is the generated CA Secret as read this reconcile (nil: none), CA the same
	// read as a rotation's stage (nil also when the Secret is not the operator's).
	CASecret *corev1.Secret
	CA       *resources.RedisCA
}

// Keeper keeps the TLS Secrets, generated CAs and cert-manager Certificates of
// RedisClusters, and remembers, per cluster, the certificates it read and the Certificate it
// last kept. Its zero value needs Client, Scheme, Recorder, APIReader and UserObject set.
type Keeper struct {
	// Client reads the operator's own Secrets (from the cache) and writes.
	Client client.Client
	Scheme *runtime.Scheme
	// Recorder sends the events of renewals, rotations and refused certificates.
	Recorder events.EventRecorder
	// APIReader reads cert-manager's Certificates (not cached).
	APIReader client.Reader
	// UserObject reads a Secret the user names (spec.tls.secretName) or cert-manager
	// writes: not the operator's, so not in its cache.
	UserObject func(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
	// ClusterIssuers are the ClusterIssuers spec.tls.issuerRef may name
	// (ClusterIssuerAllowed); none when empty.
	ClusterIssuers []string

	issued issuedCerts
	kept   keptCertificates
}

// Forget drops what k keeps of a cluster that is gone.
func (k *Keeper) Forget(key types.NamespacedName) {
	k.issued.forget(key)
	k.kept.forget(key)
}

// Trust is f.Config that also accepts a node presenting one of the cluster's latest
// certificates (trustingIssued): an earlier one, after a CA rotation dropped its CA, shows
// as stale and can be reloaded.
func (k *Keeper) Trust(rc *redisv1alpha1.RedisCluster, f *Facts) *tls.Config {
	cluster := client.ObjectKeyFromObject(rc)
	return trustingIssued(f.Config, func(der []byte) bool { return k.issued.has(cluster, der) })
}

// Remember records der as one of rc's certificates, which Trust accepts.
func (k *Keeper) Remember(rc *redisv1alpha1.RedisCluster, der []byte) {
	k.issued.add(client.ObjectKeyFromObject(rc), der)
}

// record reports a child write's outcome as child.RecordOutcome does.
func (k *Keeper) record(rc *redisv1alpha1.RedisCluster, live client.Object, outcome child.Outcome, err error) {
	child.RecordOutcome(k.Recorder, rc, rc.Status.Conditions, live, outcome, err)
}
