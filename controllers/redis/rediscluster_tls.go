package redis

import (
	"context"
	"crypto/tls"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/execute"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// readTLS reads the facts of the cluster's TLS without changing anything (nodetls.Keeper.Read).
func (r *RedisClusterReconciler) readTLS(ctx context.Context, s *state) error {
	return r.certKeeper().Read(ctx, s.rc, &s.certs)
}

// ensureTLS keeps the cluster's certificate and its TLS condition (nodetls.Keeper.Ensure);
// a missing Secret of the user's or cert-manager's is looked for again after plan.LookIdle.
func (r *RedisClusterReconciler) ensureTLS(ctx context.Context, s *state) error {
	return r.certKeeper().Ensure(ctx, s.rc, &s.next.Status.Conditions, &s.certs, s.tlsExternalHosts())
}

// checkCertificates marks, in the snapshot, the answering nodes that serve another
// certificate than the TLS Secret's (execute.ServesCertificate: a TLS handshake each). A
// node already seen serving this certificate since its process started is not asked again
// (certsSeen), so a converged cluster costs no handshake.
func (r *RedisClusterReconciler) checkCertificates(ctx context.Context, s *state) {
	if s.certs.Config == nil || s.certs.Cert == nil {
		return
	}
	cluster := client.ObjectKeyFromObject(s.rc)
	var trust *tls.Config // made at the first handshake: a converged cluster needs none
	for i := range s.snap.Nodes {
		o := &s.snap.Nodes[i]
		if !o.Answered() || r.certsSeen.has(cluster, string(s.certs.Cert), o) {
			continue
		}
		if trust == nil {
			trust = r.ownCertsTLS(s)
		}
		ok, err := execute.ServesCertificate(ctx, o.Addr, trust, s.certs.Cert)
		switch {
		case err != nil: // gone since it answered, or no certificate of the cluster's: no evidence either way
			o.CertificateUnknown = true
			logf.FromContext(ctx).V(1).Info("certificate not checked", "pod", o.Pod, "error", err.Error())
		case ok:
			r.certsSeen.mark(cluster, string(s.certs.Cert), o)
		default:
			o.StaleCertificate = true
		}
	}
}

// ownCertsTLS is the configuration of TLS connections to the nodes that also accepts a node
// presenting one of the cluster's latest certificates (nodetls.Keeper.Trust).
func (r *RedisClusterReconciler) ownCertsTLS(s *state) *tls.Config {
	return r.certKeeper().Trust(s.rc, &s.certs)
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
		if ok, err := execute.ServesCertificate(ctx, addr, s.certs.Config, s.certs.Cert); err == nil && ok {
			reloaded = append(reloaded, addr)
		}
	}
	if len(reloaded) > 0 {
		r.event(s, corev1.EventTypeNormal, report.ReasonTLSReloaded, "Reload",
			"%d nodes now serve the certificate of Secret %s (%s)", len(reloaded), resources.RedisTLSSecretName(s.rc), strings.Join(reloaded, ", "))
	}
	return nil
}

// renewCertificate issues the generated certificate again, as the step planned
// (StepRenewCertificate).
func (r *RedisClusterReconciler) renewCertificate(ctx context.Context, s *state) error {
	return r.certKeeper().Renew(ctx, s.rc, &s.certs, s.tlsExternalHosts())
}

// startCARotation starts the rotation of the generated CA the step planned
// (StepStartCARotation); the children are kept again at the next look.
func (r *RedisClusterReconciler) startCARotation(ctx context.Context, s *state) error {
	wrote, err := r.certKeeper().StartCARotation(ctx, s.rc, &s.certs, s.step.Reason)
	if wrote {
		r.changes.touch(client.ObjectKeyFromObject(s.rc))
	}
	return err
}

// advanceCA moves the CA rotation a stage on, as the step planned (StepRotateCA); the
// children are kept again at the next look.
func (r *RedisClusterReconciler) advanceCA(ctx context.Context, s *state) error {
	wrote, err := r.certKeeper().AdvanceCA(ctx, s.rc, &s.certs, s.step.CAStage)
	if wrote {
		r.changes.touch(client.ObjectKeyFromObject(s.rc))
	}
	return err
}

// tlsExternalHosts are the external hosts the nodes' certificate must name
// (resources.RedisTLSExternalHosts): none without TLS or external access.
func (s *state) tlsExternalHosts() []string {
	return resources.RedisTLSExternalHosts(s.rc, s.external)
}
