package resources_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

func tlsCluster(tls *redisv1alpha1.TLSSpec, monitor string) *redisv1alpha1.RedisCluster {
	rc := redisCluster(nil)
	rc.Spec.TLS = tls
	rc.Spec.Pod[0].MonitorImage = monitor
	return rc
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func TestRedisTLSPodTemplate(t *testing.T) {
	cases := map[string]struct {
		tls        *redisv1alpha1.TLSSpec
		secret     string // the Secret the pods mount, "" for none
		exporterTo string
		clientCert bool // the probe and the exporter present the node's certificate
	}{
		"no tls field":          {exporterTo: "redis://localhost:6379"},
		"enabled false":         {tls: &redisv1alpha1.TLSSpec{}, exporterTo: "redis://localhost:6379"},
		"generated certificate": {tls: &redisv1alpha1.TLSSpec{Enabled: true}, secret: "cache-tls", exporterTo: "rediss://localhost:6379"},
		"user certificate":      {tls: &redisv1alpha1.TLSSpec{Enabled: true, SecretName: "mine"}, secret: "mine", exporterTo: "rediss://localhost:6379"},
		"client certificates required": {tls: &redisv1alpha1.TLSSpec{Enabled: true, RequireClientCertificates: true}, secret: "cache-tls",
			exporterTo: "rediss://localhost:6379", clientCert: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rc := tlsCluster(tc.tls, "oliver006/redis_exporter:v1.62.0")
			spec := resources.RedisStatefulSet(rc, 6).Spec.Template.Spec
			var volume *corev1.Volume
			for i := range spec.Volumes {
				if spec.Volumes[i].Name == resources.RedisTLSVolume {
					volume = &spec.Volumes[i]
				}
			}
			redis, exporter := container(t, spec, resources.RedisContainer), container(t, spec, "exporter")
			mounted := func(c corev1.Container) bool {
				for _, m := range c.VolumeMounts {
					if m.Name == resources.RedisTLSVolume {
						return m.MountPath == resources.RedisTLSDir && m.ReadOnly
					}
				}
				return false
			}
			probe := strings.Join(redis.ReadinessProbe.Exec.Command, " ")
			if tc.secret == "" {
				if volume != nil || mounted(redis) || mounted(exporter) {
					t.Error("a TLS volume without TLS")
				}
				if strings.Contains(probe, "--tls") {
					t.Errorf("the probe uses TLS without TLS: %s", probe)
				}
			} else {
				if volume == nil || volume.Secret == nil || volume.Secret.SecretName != tc.secret {
					t.Fatalf("TLS volume %+v, want Secret %s", volume, tc.secret)
				}
				if *volume.Secret.DefaultMode != 0o440 || len(volume.Secret.Items) != 3 {
					t.Errorf("TLS volume mode %o items %v, want 0440 and ca.crt, tls.crt, tls.key", *volume.Secret.DefaultMode, volume.Secret.Items)
				}
				if !mounted(redis) || !mounted(exporter) {
					t.Errorf("TLS volume mounted read-only at %s: redis %v, exporter %v", resources.RedisTLSDir, mounted(redis), mounted(exporter))
				}
				cli := "redis-cli --tls --cacert /etc/redis-tls/ca.crt -h 127.0.0.1 -p 6379"
				if tc.clientCert {
					cli = "redis-cli --tls --cacert /etc/redis-tls/ca.crt --cert /etc/redis-tls/tls.crt --key /etc/redis-tls/tls.key -h 127.0.0.1 -p 6379"
				}
				if n := strings.Count(probe, cli); n != 2 {
					t.Errorf("the probe runs %q %d times, want 2: %s", cli, n, probe)
				}
				certFile, keyFile := envValue(exporter, "REDIS_EXPORTER_TLS_CLIENT_CERT_FILE"), envValue(exporter, "REDIS_EXPORTER_TLS_CLIENT_KEY_FILE")
				if presents := certFile == resources.RedisTLSCertFile && keyFile == resources.RedisTLSKeyFile; presents != tc.clientCert {
					t.Errorf("exporter client certificate %q key %q, want presented: %v", certFile, keyFile, tc.clientCert)
				}
				if got := envValue(exporter, "REDIS_EXPORTER_TLS_CA_CERT_FILE"); got != resources.RedisTLSCAFile {
					t.Errorf("exporter CA file %q, want %q", got, resources.RedisTLSCAFile)
				}
			}
			if got := envValue(exporter, "REDIS_ADDR"); got != tc.exporterTo {
				t.Errorf("exporter scrapes %q, want %q", got, tc.exporterTo)
			}
			if strings.Count(probe, "--askpass") != 2 || strings.Contains(probe, "REDISCLI_AUTH") {
				t.Errorf("the probe does not give both redis-cli runs the password on their standard input (--askpass), or puts it in an environment: %s", probe)
			}
		})
	}
}

func TestRedisTLSConf(t *testing.T) {
	plain := resources.RedisConfigMap(tlsCluster(nil, ""), "").Data[resources.RedisConfigFile]
	if !strings.Contains(plain, "\nport 6379\n") || strings.Contains(plain, "tls-") {
		t.Errorf("redis.conf without TLS:\n%s", plain)
	}
	for authClients, spec := range map[string]redisv1alpha1.TLSSpec{
		"optional": {Enabled: true},
		"yes":      {Enabled: true, RequireClientCertificates: true},
	} {
		conf := resources.RedisConfigMap(tlsCluster(&spec, ""), "tls-port 7000\nport 6380\ntls-auth-clients no").Data[resources.RedisConfigFile]
		// Redis keeps the last value of a directive: the operator's come after the user's.
		last := map[string]string{}
		for _, line := range strings.Split(conf, "\n") {
			if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(f[0], "#") {
				last[f[0]] = f[1]
			}
		}
		for directive, want := range map[string]string{
			"port": "0", "tls-port": "6379", "tls-cluster": "yes", "tls-replication": "yes", "tls-auth-clients": authClients,
			"tls-cert-file": "/etc/redis-tls/tls.crt", "tls-key-file": "/etc/redis-tls/tls.key", "tls-ca-cert-file": "/etc/redis-tls/ca.crt",
		} {
			if last[directive] != want {
				t.Errorf("%s is %q, want %q in:\n%s", directive, last[directive], want, conf)
			}
		}
	}
}

// TestRedisTLSNames: a certificate made for RedisTLSDNSNames verifies for the name the
// operator checks, every pod's DNS name and localhost, and not for another cluster's pods.
func TestRedisTLSNames(t *testing.T) {
	rc := tlsCluster(&redisv1alpha1.TLSSpec{Enabled: true}, "")
	now := time.Now()
	ca, err := certs.NewCA("ca", now, certs.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	server, err := certs.NewServer(ca, resources.RedisTLSDNSNames(rc), resources.RedisTLSIPs(), now, certs.ServerValidity)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{
		resources.RedisTLSServerName(rc), resources.RedisPodDNSName(rc, "cache-0"), resources.RedisPodDNSName(rc, "cache-17"),
		"cache-3.cache.ns.svc", "cache-client", "cache-client.ns.svc.cluster.local", "localhost", "127.0.0.1",
	} {
		if err := certs.Check(ca.Cert, server, host, now); err != nil {
			t.Errorf("%s: %v", host, err)
		}
	}
	for _, host := range []string{"other-0.other.ns.svc", "cache-0.cache.elsewhere.svc", "127.1.0.4"} {
		if err := certs.Check(ca.Cert, server, host, now); err == nil {
			t.Errorf("%s verifies", host)
		}
	}
	secret := resources.RedisTLSSecret(rc, ca.Cert, server)
	if secret.Type != corev1.SecretTypeTLS || secret.Name != "cache-tls" || string(secret.Data["ca.crt"]) != string(ca.Cert) {
		t.Errorf("certificate Secret %s of type %s", secret.Name, secret.Type)
	}
	if caSecret := resources.RedisTLSCASecret(rc, resources.RedisCA{Signer: ca}); caSecret.Name != "cache-tls-ca" || len(caSecret.Data["tls.key"]) == 0 {
		t.Errorf("CA Secret %s without its key", caSecret.Name)
	}
}

// TestRedisTLSNamesExternalHosts: with spec.externalAccess, the certificate names each
// node's load-balancer address (an IP as an IP SAN, a name as a DNS SAN), so a client
// outside verifies the host it dials; without TLS or external access no host is asked.
func TestRedisTLSNamesExternalHosts(t *testing.T) {
	rc := tlsCluster(&redisv1alpha1.TLSSpec{Enabled: true}, "")
	byPod := map[string]string{"cache-0": "203.0.113.10", "cache-1": "lb-1.example.com", "cache-2": "203.0.113.10", "cache-3": ""}
	if got := resources.RedisTLSExternalHosts(rc, byPod); got != nil {
		t.Errorf("without spec.externalAccess the hosts are %v, want none", got)
	}
	rc.Spec.ExternalAccess = &redisv1alpha1.ExternalAccessSpec{Type: redisv1alpha1.ExternalAccessLoadBalancer}
	hosts := resources.RedisTLSExternalHosts(rc, byPod)
	if want := []string{"203.0.113.10", "lb-1.example.com"}; !slices.Equal(hosts, want) {
		t.Errorf("hosts %v, want %v (sorted, once each, none empty)", hosts, want)
	}
	now := time.Now()
	ca, err := certs.NewCA("ca", now, certs.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	server, err := certs.NewServer(ca, resources.RedisTLSDNSNames(rc, hosts...), resources.RedisTLSIPs(hosts...), now, certs.ServerValidity)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"203.0.113.10", "lb-1.example.com", resources.RedisTLSServerName(rc), "127.0.0.1"} {
		if err := certs.Check(ca.Cert, server, host, now); err != nil {
			t.Errorf("%s: %v", host, err)
		}
	}
	for _, host := range []string{"203.0.113.11", "lb-2.example.com"} {
		if err := certs.Check(ca.Cert, server, host, now); err == nil {
			t.Errorf("%s verifies", host)
		}
	}
	if slices.Contains(resources.RedisTLSDNSNames(rc, hosts...), "203.0.113.10") {
		t.Errorf("an IP address is listed as a DNS name")
	}
	rc.Spec.TLS = nil
	if got := resources.RedisTLSExternalHosts(rc, byPod); got != nil {
		t.Errorf("without TLS the hosts are %v, want none", got)
	}
}

func TestRedisExporterPasswordFileNamesBothAddresses(t *testing.T) {
	file := map[string]string{}
	if err := json.Unmarshal(resources.RedisExporterPasswordJSON("pw"), &file); err != nil {
		t.Fatal(err)
	}
	if file[resources.RedisExporterAddr] != "pw" || file[resources.RedisExporterTLSAddr] != "pw" {
		t.Errorf("password file %v, want the password for %s and %s", file, resources.RedisExporterAddr, resources.RedisExporterTLSAddr)
	}
}
