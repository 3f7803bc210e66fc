package resources

import (
	"cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// CertificateGVK is cert-manager's Certificate kind, which the operator keeps (as an
// unstructured object: cert-manager's Go module is not a dependency) for a RedisCluster
// with spec.tls.issuerRef.
var CertificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// RedisTLSIssued reports whether cert-manager issues the nodes' certificate
// (spec.tls.issuerRef).
func RedisTLSIssued(rc *redisv1alpha1.RedisCluster) bool {
	return RedisTLSEnabled(rc) && rc.Spec.TLS.IssuerRef != nil
}

// RedisIssuer describes spec.tls.issuerRef for messages: "Issuer redis-ca".
func RedisIssuer(rc *redisv1alpha1.RedisCluster) string {
	ref := rc.Spec.TLS.IssuerRef
	group := cmp.Or(ref.Group, CertificateGVK.Group)
	kind := cmp.Or(ref.Kind, "Issuer")
	if group != CertificateGVK.Group {
		kind += "." + group
	}
	return kind + " " + ref.Name
}

// RedisCertificate is the cert-manager Certificate of a RedisCluster with spec.tls.issuerRef:
// the names and addresses of the generated certificate, server and client authentication
// (each node presents it on the cluster bus, as a client too), an ECDSA P-256 key made anew
// at each renewal, written to the Secret the pods mount with the label that makes the
// operator see its renewals (watchLabels), naming also the external hosts given
// (RedisTLSExternalHosts). Named like that Secret.
func RedisCertificate(rc *redisv1alpha1.RedisCluster, watchLabels map[string]string, external ...string) *unstructured.Unstructured {
	ref := rc.Spec.TLS.IssuerRef
	var dnsNames, ips []any
	for _, n := range RedisTLSDNSNames(rc, external...) {
		dnsNames = append(dnsNames, n)
	}
	for _, ip := range RedisTLSIPs(external...) {
		ips = append(ips, ip.String())
	}
	meta := redisMeta(rc, RedisTLSSecretName(rc))
	secretLabels := map[string]any{}
	for k, v := range watchLabels {
		secretLabels[k] = v
	}
	for k, v := range meta.Labels {
		secretLabels[k] = v
	}
	cert := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"secretName":     RedisTLSSecretName(rc),
			"secretTemplate": map[string]any{"labels": secretLabels},
			"commonName":     RedisTLSServerName(rc),
			"dnsNames":       dnsNames,
			"ipAddresses":    ips,
			"usages":         []any{"server auth", "client auth", "digital signature"},
			"privateKey":     map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"},
			"issuerRef": map[string]any{
				"name":  ref.Name,
				"kind":  cmp.Or(ref.Kind, "Issuer"),
				"group": cmp.Or(ref.Group, CertificateGVK.Group),
			},
		},
	}}
	cert.SetGroupVersionKind(CertificateGVK)
	cert.SetName(meta.Name)
	cert.SetNamespace(meta.Namespace)
	cert.SetLabels(meta.Labels)
	return cert
}

// CertificateReady is the Ready condition of a cert-manager Certificate as it is on the
// server: its status and message, "" when it has none yet.
func CertificateReady(cert *unstructured.Unstructured) (metav1.ConditionStatus, string) {
	conds, _, _ := unstructured.NestedSlice(cert.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		status, _ := m["status"].(string)
		msg, _ := m["message"].(string)
		return metav1.ConditionStatus(status), msg
	}
	return "", ""
}
