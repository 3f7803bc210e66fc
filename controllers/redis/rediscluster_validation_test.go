package redis_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/report"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
	"github.com/middleware-operator/middleware-operator/tests/testenv"
)

// TestRedisClusterSeedSampleApplies creates seed 000's RedisCluster, unchanged but for the
// API group, including its string pipeline "100" and its 7 nodes.
func TestRedisClusterSeedSampleApplies(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	u := createSeed(t, ns, func(*unstructured.Unstructured) {})
	rc := &redisv1alpha1.RedisCluster{}
	if err := env.Client.Get(t.Context(), clientKey(ns, u.GetName()), rc); err != nil {
		t.Fatal(err)
	}
	if rc.Spec.Replicas != 7 || rc.Spec.UpdateStrategy.Pipeline.String() != "100" || len(rc.Spec.UpdateStrategy.AssignStrategies) != 2 || !rc.Spec.Pause {
		t.Errorf("the sample did not round-trip: %+v", rc.Spec)
	}
	// It is paused: the status says so and no StatefulSet is made.
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, clientKey(ns, u.GetName()), cur); err != nil {
			return false, err.Error()
		}
		return strings.Contains(cur.Status.Reason, "paused"), "reason " + cur.Status.Reason
	})
	if err := env.Client.Get(t.Context(), clientKey(ns, u.GetName()), &appsv1.StatefulSet{}); !apierrors.IsNotFound(err) {
		t.Errorf("a paused cluster got a StatefulSet: %v", err)
	}
}

// createSeed creates the seed's RedisCluster sample in ns, changed by edit.
func createSeed(t *testing.T, ns string, edit func(*unstructured.Unstructured)) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "redis_v1alpha1_rediscluster_seed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetNamespace(ns) // the seed puts it in kube-system
	edit(u)
	if err := env.Client.Create(t.Context(), u); err != nil {
		t.Fatalf("the seed's sample was rejected: %v", err)
	}
	return u
}

// TestRedisClusterSeedSampleUnpausedNamesTheSupportedVersions: the seed's version 3.2.8 is
// accepted, but with pause false nothing is created that could half-work, and the status
// and an event say which version is needed.
func TestRedisClusterSeedSampleUnpausedNamesTheSupportedVersions(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	u := createSeed(t, ns, func(u *unstructured.Unstructured) {
		if err := unstructured.SetNestedField(u.Object, false, "spec", "pause"); err != nil {
			t.Fatal(err)
		}
	})
	var msg string
	testenv.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, string) {
		cur := &redisv1alpha1.RedisCluster{}
		if err := env.Client.Get(ctx, clientKey(ns, u.GetName()), cur); err != nil {
			return false, err.Error()
		}
		c := meta.FindStatusCondition(cur.Status.Conditions, "Degraded")
		if c == nil {
			return false, "no Degraded condition"
		}
		msg = c.Message
		return c.Reason == report.ReasonUnsupportedVersion, "Degraded " + c.Reason + ": " + c.Message
	})
	for _, want := range []string{"Redis 3.2", "Redis 7.0 or later", "set spec.version to 7.0.15 or later"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the condition says %q, which lacks %q", msg, want)
		}
	}
	if !hasEvent(t.Context(), ns, report.ReasonUnsupportedVersion) {
		t.Error("no event says the version is unsupported")
	}
	for _, obj := range []client.Object{&appsv1.StatefulSet{}, &corev1.ConfigMap{}, &corev1.Service{}} {
		if err := env.Client.Get(t.Context(), clientKey(ns, u.GetName()), obj); !apierrors.IsNotFound(err) {
			t.Errorf("a %T was made for an unsupported version: %v", obj, err)
		}
	}
}

// TestRedisClusterTLSAndACLCannotBeSwitched: spec.tls.enabled and spec.acl.enabled are
// fixed at creation, both ways.
func TestRedisClusterTLSAndACLCannotBeSwitched(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	fields := map[string]func(rc *redisv1alpha1.RedisCluster, enabled bool){
		"tls": func(rc *redisv1alpha1.RedisCluster, enabled bool) {
			rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: enabled}
		},
		"acl": func(rc *redisv1alpha1.RedisCluster, enabled bool) {
			rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: enabled}
		},
	}
	for field, set := range fields {
		for _, enabled := range []bool{false, true} {
			name := fmt.Sprintf("%s-%t", field, enabled)
			rc := redistest.NewCluster(ns, name, 6)
			rc.Spec.Pause = true // no pods: only the API is under test
			set(rc, enabled)
			if err := env.Client.Create(t.Context(), rc); err != nil {
				t.Fatal(err)
			}
			patch := fmt.Sprintf(`{"spec":{%q:{"enabled":%t}}}`, field, !enabled)
			err := env.Client.Patch(t.Context(), rc, client.RawPatch("application/merge-patch+json", []byte(patch)))
			if want := "spec." + field + ".enabled cannot change"; !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: switching %s: %v, want Invalid saying %q", name, field, err, want)
			}
			err = env.Client.Patch(t.Context(), rc, client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"spec":{%q:null}}`, field))))
			if enabled && !apierrors.IsInvalid(err) {
				t.Errorf("%s: removing spec.%s from a cluster with it on: %v, want Invalid", name, field, err)
			} else if !enabled && err != nil {
				t.Errorf("%s: removing spec.%s (off): %v", name, field, err)
			}
		}
	}
	for _, issued := range []bool{false, true} {
		rc := redistest.NewCluster(ns, fmt.Sprintf("issuer-%t", issued), 6)
		rc.Spec.Pause = true
		rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true}
		patch := `{"spec":{"tls":{"issuerRef":{"name":"redis-ca"}}}}`
		if issued {
			rc.Spec.TLS.IssuerRef = &redisv1alpha1.IssuerReference{Name: "redis-ca"}
			patch = `{"spec":{"tls":{"issuerRef":null}}}`
		}
		if err := env.Client.Create(t.Context(), rc); err != nil {
			t.Fatal(err)
		}
		err := env.Client.Patch(t.Context(), rc, client.RawPatch("application/merge-patch+json", []byte(patch)))
		if want := "spec.tls.issuerRef can be set or removed only when the RedisCluster is created"; !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("issuerRef set %t, then the other way: %v, want Invalid saying %q", issued, err, want)
		}
		if issued {
			if err := env.Client.Patch(t.Context(), rc, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"tls":{"issuerRef":{"name":"other-ca"}}}}`))); err != nil {
				t.Errorf("pointing issuerRef at another issuer: %v, want it accepted", err)
			}
		}
	}
	for _, required := range []bool{false, true} {
		rc := redistest.NewCluster(ns, fmt.Sprintf("client-certs-%t", required), 6)
		rc.Spec.Pause = true
		rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, RequireClientCertificates: required}
		if err := env.Client.Create(t.Context(), rc); err != nil {
			t.Fatal(err)
		}
		patch := fmt.Sprintf(`{"spec":{"tls":{"requireClientCertificates":%t}}}`, !required)
		err := env.Client.Patch(t.Context(), rc, client.RawPatch("application/merge-patch+json", []byte(patch)))
		if want := "spec.tls.requireClientCertificates cannot change"; !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("switching requireClientCertificates from %t: %v, want Invalid saying %q", required, err, want)
		}
	}
}

func TestRedisClusterInvalidSpecsAreRejected(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	cases := map[string]admissionCase{
		"client certificates without TLS": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.TLS = &redisv1alpha1.TLSSpec{RequireClientCertificates: true}
			},
			want: []string{"spec.tls.requireClientCertificates", "client certificates need TLS"},
		},
		"a CA rotation overlap of half a second": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, CARotationOverlap: &metav1.Duration{Duration: 500 * time.Millisecond}}
			},
			want: []string{"spec.tls.caRotationOverlap", "between 1s and 24h"},
		},
		"an issuer without TLS": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.TLS = &redisv1alpha1.TLSSpec{IssuerRef: &redisv1alpha1.IssuerReference{Name: "redis-ca"}}
			},
			want: []string{"spec.tls.issuerRef", "set enabled: true"},
		},
		"an issuer and a Secret of one's own": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, SecretName: "mine", IssuerRef: &redisv1alpha1.IssuerReference{Name: "redis-ca"}}
			},
			want: []string{"spec.tls.issuerRef", "both set"},
		},
		"an issuer of an unknown kind": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, IssuerRef: &redisv1alpha1.IssuerReference{Name: "redis-ca", Kind: "Vault"}}
			},
			want: []string{"spec.tls.issuerRef.kind", "Issuer", "ClusterIssuer"},
		},
		"an issuer name with capitals": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, IssuerRef: &redisv1alpha1.IssuerReference{Name: "Redis_CA"}}
			},
			want: []string{"spec.tls.issuerRef.name", "an issuer's name"},
		},
		"fewer than 3 masters": {
			change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Replicas = 4 },
			want:   []string{"spec.replicas", "at least 3 masters"},
		},
		"AssignReceive without assignStrategies": {
			change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.UpdateStrategy.Type = redisv1alpha1.AssignReceive },
			want:   []string{"spec.updateStrategy", "assignStrategies is required"},
		},
		"pipeline above 10000": {
			change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.UpdateStrategy.Pipeline = intOrString("20000") },
			want:   []string{"spec.updateStrategy.pipeline", "1 to 10000"},
		},
		"pipeline zero": {
			change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.UpdateStrategy.Pipeline = intOrString("0") },
			want:   []string{"spec.updateStrategy.pipeline", "1 to 10000"},
		},
		"replicasPerMaster 2 with 6 nodes": {
			change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.ReplicasPerMaster = ptr.To[int32](2) },
			want:   []string{"spec.replicas", "at least 3 masters"},
		},
		"a version with a space": {
			change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Version = "7 0" },
			want:   []string{"spec.version", "must be an image tag"},
		},
		"a password Secret that cannot exist": {
			change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.PasswordSecret = "Bad_Name" },
			want:   []string{"spec.passwordSecret", "must be a Secret's name"},
		},
		"a volume of size 0": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				zero := resource.MustParse("0")
				rc.Spec.Pod = []redisv1alpha1.PodSpec{{Volumes: &redisv1alpha1.Volumes{Size: &zero}}}
			},
			want: []string{"spec.pod[0].volumes.size", "greater than zero"},
		},
		"a repository with capitals": {
			change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Repository = "Library/Redis" },
			want:   []string{"spec.repository", "must be an image repository"},
		},
		"a metrics namespace that cannot exist": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.NetworkPolicy = &redisv1alpha1.NetworkPolicySpec{MetricsNamespace: "Monitoring"}
			},
			want: []string{"spec.networkPolicy.metricsNamespace", "must be a namespace's name"},
		},
		"an env entry with an empty name": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Pod = []redisv1alpha1.PodSpec{{Env: []corev1.EnvVar{{Name: "", Value: "x"}}}}
			},
			want: []string{"spec.pod[0].env", "name must be set"},
		},
		"a middlewareImage with a space": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Pod = []redisv1alpha1.PodSpec{{MiddlewareImage: "redis 7"}}
			},
			want: []string{"spec.pod[0].middlewareImage", "must be an image reference"},
		},
		"a monitorImage with a tab": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Pod = []redisv1alpha1.PodSpec{{MonitorImage: "oliver006/redis_exporter:\tv1.62.0"}}
			},
			want: []string{"spec.pod[0].monitorImage", "must be an image reference"},
		},
		"an initImage with a newline": {
			change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Pod = []redisv1alpha1.PodSpec{{InitImage: "busybox\n"}} },
			want:   []string{"spec.pod[0].initImage", "must be an image reference"},
		},
		"a hostPath volume without the opt-in": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Pod = []redisv1alpha1.PodSpec{{Volumes: &redisv1alpha1.Volumes{Type: "hostPath"}}}
			},
			want: []string{"spec.pod[0].volumes.type", "allowHostPath: true"},
		},
		"a configmap that cannot exist": {
			change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Pod = []redisv1alpha1.PodSpec{{Configmap: "Redis Conf"}} },
			want:   []string{"spec.pod[0].configmap", "must be a ConfigMap's name"},
		},
		"a storage class that cannot exist": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.Pod = []redisv1alpha1.PodSpec{{Volumes: &redisv1alpha1.Volumes{StorageClassName: "Fast SSD"}}}
			},
			want: []string{"spec.pod[0].volumes.storageClassName", "must be a StorageClass's name"},
		},
		"a TLS Secret with TLS off": {
			change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.TLS = &redisv1alpha1.TLSSpec{SecretName: "cache-tls"} },
			want:   []string{"spec.tls.secretName", "set enabled: true"},
		},
		"a TLS Secret that cannot exist": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.TLS = &redisv1alpha1.TLSSpec{Enabled: true, SecretName: "Cache TLS"}
			},
			want: []string{"spec.tls.secretName", "must be a Secret's name"},
		},
		"ACL users without ACL": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Users: []redisv1alpha1.ACLUser{aclUser("app", "+@read")}}
			},
			want: []string{"spec.acl.defaultUserRules and spec.acl.users need spec.acl.enabled: true"},
		},
		"default user rules without ACL": {
			change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.ACL = &redisv1alpha1.ACLSpec{DefaultUserRules: "+@all"} },
			want:   []string{"spec.acl.defaultUserRules and spec.acl.users need spec.acl.enabled: true"},
		},
		"a password in the default user's rules": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, DefaultUserRules: "~* +@all >secret"}
			},
			want: []string{"spec.acl.defaultUserRules", "must not set the password", "remove that rule"},
		},
		"nopass in a user's rules": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{aclUser("app", "~* +@read NOPASS")}}
			},
			want: []string{"spec.acl.users[].rules", "must not set the password"},
		},
		"a password hash in a user's rules": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{aclUser("app", "#5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8 +@read")}}
			},
			want: []string{"spec.acl.users[].rules", "must not set the password"},
		},
		"a second line in a user's rules": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{aclUser("app", "+@read\nuser evil on nopass +@all")}}
			},
			want: []string{"spec.acl.users[].rules", "on one line"},
		},
		"a quote in the default user's rules": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, DefaultUserRules: `~"* +@all`}
			},
			want: []string{"spec.acl.defaultUserRules", "without quotes or backslashes"},
		},
		"a user named default": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{aclUser("default", "+@read")}}
			},
			want: []string{"spec.acl.users[].name must not be default", "spec.acl.defaultUserRules"},
		},
		"a user named like the operator's": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{aclUser("mwo-operator", "+@all")}}
			},
			want: []string{"spec.acl.users[].name", "nor start with mwo-"},
		},
		"a user name with a space": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{aclUser("app reader", "+@read")}}
			},
			want: []string{"spec.acl.users[].name must be letters, digits"},
		},
		"two users of the same name": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{aclUser("app", "+@read"), aclUser("app", "+@write")}}
			},
			want: []string{"spec.acl.users[1]", "Duplicate value"},
		},
		"a user's Secret that cannot exist": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				u := aclUser("app", "+@read")
				u.PasswordSecret.Name = "App_PW"
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{u}}
			},
			want: []string{"passwordSecret.name must be a Secret's name"},
		},
		"a user without rules": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{aclUser("app", "")}}
			},
			want: []string{"spec.acl.users[0].rules"},
		},
		"a key pattern with a space after ~": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{aclUser("app", "~ * +@read")}}
			},
			want: []string{`spec.acl.users[0].rules`, "spec.acl.users[].rules has ~, %R~, &, +, -, +@ or -@ followed by a space", "~* not ~ *"},
		},
		"a bare word in the default user's rules": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, DefaultUserRules: "~* &* +@all get"}
			},
			want: []string{"spec.acl.defaultUserRules must be ACL rules separated by spaces", "+command", "+@category", "allkeys"},
		},
		"a command sign without a name": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{aclUser("app", "~* + get")}}
			},
			want: []string{"spec.acl.users[].rules has ~, %R~, &, +, -, +@ or -@ followed by a space", "+get not + get"},
		},
		"an unknown keyword": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{aclUser("app", "allkey +@read")}}
			},
			want: []string{"spec.acl.users[].rules must be ACL rules separated by spaces", "resetkeys"},
		},
		"a category sign without a name": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, DefaultUserRules: "~* +@"}
			},
			want: []string{"spec.acl.defaultUserRules has ~, %R~, &, +, -, +@ or -@ followed by a space"},
		},
		"Strict write safety without a replica": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.WriteSafety, rc.Spec.ReplicasPerMaster = redisv1alpha1.WriteSafetyStrict, ptr.To[int32](0)
			},
			want: []string{"spec.writeSafety", "Strict needs at least one replica per master", "replicasPerMaster"},
		},
		"an unknown write safety": {
			change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.WriteSafety = "Sync" },
			want:   []string{"spec.writeSafety", `"Default", "Strict"`},
		},
		"rules of spaces only": {
			change: func(rc *redisv1alpha1.RedisCluster) {
				rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{aclUser("app", "   ")}}
			},
			want: []string{"spec.acl.users[0].rules", "spec.acl.users[].rules must be ACL rules separated by spaces"},
		},
	}
	checkAdmission(t, ns, "invalid", cases)
}

// aclUser is a user of spec.acl.users with its password in the Secret <name>-pw.
func aclUser(name, rules string) redisv1alpha1.ACLUser {
	return redisv1alpha1.ACLUser{Name: name, Rules: rules, PasswordSecret: redisv1alpha1.SecretKeyRef{Name: name + "-pw"}}
}

// TestRedisClusterACLUsersAccepted: users with rules, a key of their Secret, and rules for
// the default user are accepted; the Secret's key defaults to "password".
func TestRedisClusterACLUsersAccepted(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	rc := redistest.NewCluster(ns, "acl-valid", 6)
	rc.Spec.Pause = true
	rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, DefaultUserRules: "~* &* +@all -@dangerous +info -flushall", Users: []redisv1alpha1.ACLUser{
		aclUser("app-reader", "~cache:* %R~shared:* -@all +@read +ping (~other:* +get)"),
		aclUser("every-form", "resetkeys ~a:* %W~b:* %RW~c:* resetchannels &news:* nocommands +@read -@dangerous +cluster|info +select|0 +json.get -debug clearselectors (%R~d:* +get) ALLKEYS allchannels allcommands sanitize-payload"),
		{Name: "writer.2", Rules: "allkeys +@write -@dangerous", PasswordSecret: redisv1alpha1.SecretKeyRef{Name: "writer", Key: "pw.txt"}},
	}}
	if err := env.Client.Create(t.Context(), rc); err != nil {
		t.Fatalf("valid users were rejected: %v", err)
	}
	if rc.Spec.ACL.Users[0].PasswordSecret.Key != "password" {
		t.Errorf("passwordSecret.key defaulted to %q, want password", rc.Spec.ACL.Users[0].PasswordSecret.Key)
	}
}

// admissionCase is a RedisCluster changed by change, and the words the API server's
// refusal must contain (none: it is accepted).
type admissionCase struct {
	change func(*redisv1alpha1.RedisCluster)
	want   []string
}

// checkAdmission creates, paused, one 6-node RedisCluster per case in ns (named prefix-N)
// and checks that the API server accepts it or refuses it as Invalid with the words wanted.
func checkAdmission(t *testing.T, ns, prefix string, cases map[string]admissionCase) {
	t.Helper()
	i := 0
	for name, tc := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			rc := redistest.NewCluster(ns, fmt.Sprintf("%s-%d", prefix, i), 6)
			rc.Spec.Pause = true
			tc.change(rc)
			assertAdmission(t, env.Client.Create(t.Context(), rc), tc.want)
		})
	}
}

// assertAdmission checks the API server's answer err to a create: accepted when want is
// empty, else refused as Invalid with a message holding every word of want.
func assertAdmission(t *testing.T, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("rejected: %v", err)
		}
		return
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want Invalid, got %v", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message %q does not contain %q", err.Error(), w)
		}
	}
}
