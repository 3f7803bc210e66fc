package resources

import (
	"net"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/certs"
)

// TLS files inside a Redis pod, and the keys of the Secrets that hold them (a
// kubernetes.io/tls Secret's, plus ca.crt).
const (
	// RedisTLSDir is where the TLS Secret is mounted (RedisTLSVolume).
	RedisTLSDir = "/etc/redis-tls"
	// RedisTLSVolume is the name of the TLS Secret's volume.
	RedisTLSVolume = "tls"
	// RedisTLSCAKey, RedisTLSCertKey and RedisTLSKeyKey are the Secret keys (and file names).
	RedisTLSCAKey   = "ca.crt"
	RedisTLSCertKey = corev1.TLSCertKey
	RedisTLSKeyKey  = corev1.TLSPrivateKeyKey
	// RedisTLSCAFile, RedisTLSCertFile and RedisTLSKeyFile are the files in RedisTLSDir.
	RedisTLSCAFile   = RedisTLSDir + "/" + RedisTLSCAKey
	RedisTLSCertFile = RedisTLSDir + "/" + RedisTLSCertKey
	RedisTLSKeyFile  = RedisTLSDir + "/" + RedisTLSKeyKey
	// RedisExporterTLSAddr is the address the exporter sidecar scrapes when TLS is on.
	RedisExporterTLSAddr = "rediss://localhost:6379"
)

// RedisTLSEnabled reports whether spec.tls.enabled is true.
func RedisTLSEnabled(rc *redisv1alpha1.RedisCluster) bool {
	return rc.Spec.TLS != nil && rc.Spec.TLS.Enabled
}

// RedisTLSUserSecret reports whether the certificate is the user's (spec.tls.secretName).
func RedisTLSUserSecret(rc *redisv1alpha1.RedisCluster) bool {
	return rc.Spec.TLS != nil && rc.Spec.TLS.SecretName != ""
}

// RedisTLSSecretName is the Secret the pods mount: the user's, or the generated <name>-tls.
func RedisTLSSecretName(rc *redisv1alpha1.RedisCluster) string {
	if RedisTLSUserSecret(rc) {
		return rc.Spec.TLS.SecretName
	}
	return rc.Name + "-tls"
}

// RedisTLSCASecretName is the operator's CA of a cluster without a user Secret: its
// certificate and key, which sign RedisTLSSecretName's certificate.
func RedisTLSCASecretName(rc *redisv1alpha1.RedisCluster) string { return rc.Name + "-tls-ca" }

// RedisTLSServerName is the name the operator verifies every node's certificate against:
// the client Service's, which every node serves. Redis Cluster clients reach nodes by IP
// (CLUSTER SLOTS and MOVED name IPs), so a client that checks host names sets this as its
// TLS server name.
func RedisTLSServerName(rc *redisv1alpha1.RedisCluster) string {
	return RedisClientServiceName(rc) + "." + rc.Namespace + ".svc"
}

// RedisTLSDNSNames are the names of the generated certificate: the client Service's and
// the headless Service's (short, namespaced, .svc and .svc.cluster.local), each pod through
// the headless Service as a wildcard, localhost (the exporter and the probe reach their
// own node there), and the external hosts that are names (see RedisTLSExternalHosts). One
// certificate serves every pod. It names no pod IP: a pod comes back at a new IP, and the
// wildcard keeps working where an IP list would have to be reissued and reloaded on every
// node.
func RedisTLSDNSNames(rc *redisv1alpha1.RedisCluster, external ...string) []string {
	var names []string
	for _, svc := range []string{RedisClientServiceName(rc), RedisHeadlessServiceName(rc)} {
		base := svc + "." + rc.Namespace
		names = append(names, svc, base, base+".svc", base+".svc.cluster.local")
	}
	headless := RedisHeadlessServiceName(rc) + "." + rc.Namespace + ".svc"
	names = append(names, "*."+headless, "*."+headless+".cluster.local", "localhost")
	for _, host := range external {
		if net.ParseIP(host) == nil {
			names = append(names, host)
		}
	}
	return names
}

// RedisTLSIPs are the IP addresses of the generated certificate: the loopback addresses,
// and the external hosts that are IP addresses.
func RedisTLSIPs(external ...string) []net.IP {
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	for _, host := range external {
		if ip := net.ParseIP(host); ip != nil {
			ips = append(ips, ip)
		}
	}
	return ips
}

// RedisTLSExternalHosts are the hosts of spec.externalAccess a certificate must name, so
// that clients outside, which verify the host they dial, accept every node: each pod's
// load-balancer address (an IP or a name), sorted, once each. nil without TLS or external
// access.
func RedisTLSExternalHosts(rc *redisv1alpha1.RedisCluster, byPod map[string]string) []string {
	if !RedisTLSEnabled(rc) || rc.Spec.ExternalAccess == nil {
		return nil
	}
	var hosts []string
	for _, host := range byPod {
		if host != "" {
			hosts = append(hosts, host)
		}
	}
	slices.Sort(hosts)
	return slices.Compact(hosts)
}

// RedisTLSSecret is the generated certificate's Secret, with the CA's certificate as ca.crt.
func RedisTLSSecret(rc *redisv1alpha1.RedisCluster, caCert []byte, server certs.Pair) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: redisMeta(rc, RedisTLSSecretName(rc)),
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{RedisTLSCAKey: caCert, RedisTLSCertKey: server.Cert, RedisTLSKeyKey: server.Key},
	}
}

// The values of redis.conf tls-auth-clients the operator writes.
const (
	tlsAuthClientsRequired = "yes"
	tlsAuthClientsOptional = "optional"
)

// RedisTLSClientAuth is rc's redis.conf tls-auth-clients: "yes" with
// spec.tls.requireClientCertificates, else "optional"; "" without TLS.
func RedisTLSClientAuth(rc *redisv1alpha1.RedisCluster) string {
	switch {
	case !RedisTLSEnabled(rc):
		return ""
	case rc.Spec.TLS.RequireClientCertificates:
		return tlsAuthClientsRequired
	}
	return tlsAuthClientsOptional
}

// redisTLSConf are the redis.conf directives of TLS: TLS only on 6379 (port 0 refuses plain
// text), on the cluster bus (whose port follows the TLS port, 16379) and for replication.
// With clientAuth optional, clients authenticate with the password and need only the CA,
// not a certificate of their own; one that presents a certificate must present a valid one.
// With yes, a client without a valid certificate is refused. The cluster bus always demands
// a valid client certificate (Redis accepts bus connections with client authentication
// whatever tls-auth-clients says), so only holders of the cluster's certificate can join
// it; replicas and MIGRATE present it too.
func redisTLSConf(clientAuth string) string {
	return strings.Join([]string{
		"port 0",
		"tls-port 6379",
		"tls-cluster yes",
		"tls-replication yes",
		"tls-auth-clients " + clientAuth,
		"tls-cert-file " + RedisTLSCertFile,
		"tls-key-file " + RedisTLSKeyFile,
		"tls-ca-cert-file " + RedisTLSCAFile,
	}, "\n") + "\n"
}

// redisCLITLS are redis-cli's TLS arguments, verifying the node against the CA.
const redisCLITLS = "--tls --cacert " + RedisTLSCAFile + " "

// redisCLIClientCert are redis-cli's arguments presenting the node's certificate.
const redisCLIClientCert = "--cert " + RedisTLSCertFile + " --key " + RedisTLSKeyFile + " "

// redisReadinessScript is RedisReadinessScript over TLS when clientAuth (RedisTLSClientAuth)
// is set, presenting the node's certificate when it is "yes".
func redisReadinessScript(clientAuth string) string {
	switch clientAuth {
	case "":
		return RedisReadinessScript
	case tlsAuthClientsRequired:
		return strings.ReplaceAll(RedisReadinessScript, "redis-cli -h", "redis-cli "+redisCLITLS+redisCLIClientCert+"-h")
	}
	return strings.ReplaceAll(RedisReadinessScript, "redis-cli -h", "redis-cli "+redisCLITLS+"-h")
}

// redisTLSVolume is the TLS Secret's volume, readable by the pod's fsGroup only.
func redisTLSVolume(rc *redisv1alpha1.RedisCluster) corev1.Volume {
	mode := int32(0o440)
	return corev1.Volume{Name: RedisTLSVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: RedisTLSSecretName(rc),
		Items: []corev1.KeyToPath{
			{Key: RedisTLSCAKey, Path: RedisTLSCAKey}, {Key: RedisTLSCertKey, Path: RedisTLSCertKey}, {Key: RedisTLSKeyKey, Path: RedisTLSKeyKey},
		},
		DefaultMode: &mode,
	}}}
}

func redisTLSMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: RedisTLSVolume, MountPath: RedisTLSDir, ReadOnly: true}
}
