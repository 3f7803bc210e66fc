package resources_test

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

func TestRedisCertificate(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		ref                   redisv1alpha1.IssuerReference
		kind, group, describe string
	}{
		{"defaults", redisv1alpha1.IssuerReference{Name: "redis-ca"}, "Issuer", "cert-manager.io", "Issuer redis-ca"},
		{"cluster issuer", redisv1alpha1.IssuerReference{Name: "ca", Kind: "ClusterIssuer"}, "ClusterIssuer", "cert-manager.io", "ClusterIssuer ca"},
		{"external issuer", redisv1alpha1.IssuerReference{Name: "pca", Kind: "Issuer", Group: "awspca.cert-manager.io"}, "Issuer", "awspca.cert-manager.io", "Issuer.awspca.cert-manager.io pca"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := tlsCluster(&redisv1alpha1.TLSSpec{Enabled: true, IssuerRef: &tc.ref}, "")
			if !resources.RedisTLSIssued(rc) || resources.RedisTLSUserSecret(rc) {
				t.Fatalf("issued %t, user Secret %t: want issued only", resources.RedisTLSIssued(rc), resources.RedisTLSUserSecret(rc))
			}
			if got := resources.RedisIssuer(rc); got != tc.describe {
				t.Errorf("RedisIssuer = %q, want %q", got, tc.describe)
			}
			cert := resources.RedisCertificate(rc, map[string]string{"watched": "true"})
			if cert.GroupVersionKind() != resources.CertificateGVK || cert.GetName() != resources.RedisTLSSecretName(rc) || cert.GetNamespace() != rc.Namespace {
				t.Errorf("Certificate %s %s/%s, want %s %s/%s", cert.GroupVersionKind(), cert.GetNamespace(), cert.GetName(),
					resources.CertificateGVK, rc.Namespace, resources.RedisTLSSecretName(rc))
			}
			str := func(path ...string) string { v, _, _ := unstructured.NestedString(cert.Object, path...); return v }
			strs := func(path ...string) []string {
				v, _, _ := unstructured.NestedStringSlice(cert.Object, path...)
				return v
			}
			if got := str("spec", "secretName"); got != resources.RedisTLSSecretName(rc) {
				t.Errorf("secretName %q, want the Secret the pods mount, %q", got, resources.RedisTLSSecretName(rc))
			}
			if got := [3]string{str("spec", "issuerRef", "name"), str("spec", "issuerRef", "kind"), str("spec", "issuerRef", "group")}; got != [3]string{tc.ref.Name, tc.kind, tc.group} {
				t.Errorf("issuerRef %v, want %s %s %s", got, tc.ref.Name, tc.kind, tc.group)
			}
			if got := strs("spec", "dnsNames"); !slices.Equal(got, resources.RedisTLSDNSNames(rc)) {
				t.Errorf("dnsNames %v, want the generated certificate's %v", got, resources.RedisTLSDNSNames(rc))
			}
			if got := strs("spec", "usages"); !slices.Contains(got, "server auth") || !slices.Contains(got, "client auth") {
				t.Errorf("usages %v, want server and client authentication (the cluster bus)", got)
			}
			if got := str("spec", "privateKey", "algorithm"); got != "ECDSA" {
				t.Errorf("privateKey.algorithm %q, want ECDSA", got)
			}
			labels, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "secretTemplate", "labels")
			if labels["watched"] != "true" || labels["app.kubernetes.io/instance"] != rc.Name {
				t.Errorf("the Secret's labels %v, want the watch label and the cluster's", labels)
			}
			if _, err := cert.MarshalJSON(); err != nil {
				t.Errorf("the Certificate does not serialize: %v", err)
			}
			// With external access, the load balancers' addresses: names and IPs apart.
			withLB := resources.RedisCertificate(rc, nil, "203.0.113.10", "lb-1.example.com")
			dns, _, _ := unstructured.NestedStringSlice(withLB.Object, "spec", "dnsNames")
			ips, _, _ := unstructured.NestedStringSlice(withLB.Object, "spec", "ipAddresses")
			if !slices.Contains(dns, "lb-1.example.com") || slices.Contains(dns, "203.0.113.10") || !slices.Contains(ips, "203.0.113.10") {
				t.Errorf("with external hosts: dnsNames %v, ipAddresses %v; want lb-1.example.com a DNS name and 203.0.113.10 an IP address", dns, ips)
			}
		})
	}
}
