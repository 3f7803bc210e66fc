package resources_test

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// TestRedisStatefulSetWithACL: the pods of a cluster with users start with the ACL script
// and mount the users Secret's passwords; the exporter is its own user with its own password
// file. Without users nothing of it appears.
func TestRedisStatefulSetWithACL(t *testing.T) {
	rc := &redisv1alpha1.RedisCluster{}
	rc.Name, rc.Namespace = "cache", "prod"
	rc.Spec.Replicas = 6
	rc.Spec.Pod = []redisv1alpha1.PodSpec{{MonitorImage: "oliver006/redis_exporter:v1.62.0"}}
	plain := resources.RedisStatefulSet(rc, 6).Spec.Template.Spec
	rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true}
	acl := resources.RedisStatefulSet(rc, 6).Spec.Template.Spec

	if got := plain.Containers[0].Command[2]; got != resources.RedisStartScript {
		t.Errorf("without users the start script changed:\n%s", got)
	}
	if got := acl.Containers[0].Command[2]; got != resources.RedisACLStartScript {
		t.Errorf("with users the start script is not the ACL one:\n%s", got)
	}
	usersMounted := func(spec corev1.PodSpec) bool {
		return slices.ContainsFunc(spec.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == resources.RedisUsersVolume && m.MountPath == resources.RedisUsersDir && m.ReadOnly
		})
	}
	if usersMounted(plain) || !usersMounted(acl) {
		t.Errorf("users mounted without ACL %v, with ACL %v; want false, true", usersMounted(plain), usersMounted(acl))
	}
	secretOf := func(spec corev1.PodSpec, volume string) string {
		for _, v := range spec.Volumes {
			if v.Name == volume && v.Secret != nil {
				return v.Secret.SecretName
			}
		}
		return ""
	}
	if got := secretOf(acl, resources.RedisUsersVolume); got != "cache-users" {
		t.Errorf("users volume from Secret %q, want cache-users", got)
	}
	if got := secretOf(acl, resources.RedisExporterAuthVolume); got != "cache-exporter-applied" {
		t.Errorf("with users the exporter's password file comes from Secret %q, want cache-exporter-applied", got)
	}
	if got := secretOf(plain, resources.RedisExporterAuthVolume); got != "cache-password-applied" {
		t.Errorf("without users the exporter's password file comes from Secret %q, want cache-password-applied", got)
	}
	exporterUser := func(spec corev1.PodSpec) string {
		for _, e := range spec.Containers[1].Env {
			if e.Name == "REDIS_USER" {
				return e.Value
			}
		}
		return ""
	}
	if exporterUser(plain) != "" || exporterUser(acl) != resources.RedisExporterUser {
		t.Errorf("exporter user without ACL %q, with ACL %q; want \"\", %q", exporterUser(plain), exporterUser(acl), resources.RedisExporterUser)
	}
	envOf := func(spec corev1.PodSpec, name string) (string, bool) {
		for _, e := range spec.Containers[0].Env {
			if e.Name == name {
				return e.Value, true
			}
		}
		return "", false
	}
	if _, ok := envOf(plain, resources.RedisDefaultUserRulesEnv); ok {
		t.Errorf("without users the default user's rules are in the environment")
	}
	if got, _ := envOf(acl, resources.RedisDefaultUserRulesEnv); got != resources.RedisDefaultUserRules {
		t.Errorf("default user's rules %q, want %q", got, resources.RedisDefaultUserRules)
	}
	if _, ok := envOf(acl, resources.RedisACLUsersEnv); ok || slices.ContainsFunc(acl.Volumes, func(v corev1.Volume) bool { return v.Name == resources.RedisACLUsersVolume }) {
		t.Errorf("without spec.acl.users the users' environment or volume is there")
	}

	// Users of spec.acl.users: one line each in the environment, their Secrets' keys in one
	// projected volume, a file per user; defaultUserRules replaces the default rules.
	rc.Spec.ACL.DefaultUserRules = "~* &* +@all"
	rc.Spec.ACL.Users = []redisv1alpha1.ACLUser{
		{Name: "reader", Rules: " ~c:* +@read ", PasswordSecret: redisv1alpha1.SecretKeyRef{Name: "reader-pw"}},
		{Name: "writer", Rules: "~* +@write", PasswordSecret: redisv1alpha1.SecretKeyRef{Name: "shared", Key: "w"}},
	}
	users := resources.RedisStatefulSet(rc, 6).Spec.Template.Spec
	if got, _ := envOf(users, resources.RedisDefaultUserRulesEnv); got != "~* &* +@all" {
		t.Errorf("default user's rules %q, want spec.acl.defaultUserRules", got)
	}
	if got, _ := envOf(users, resources.RedisACLUsersEnv); got != "reader ~c:* +@read\nwriter ~* +@write\n" {
		t.Errorf("users' environment %q", got)
	}
	var projected []string
	for _, v := range users.Volumes {
		if v.Name == resources.RedisACLUsersVolume && v.Projected != nil {
			for _, src := range v.Projected.Sources {
				projected = append(projected, src.Secret.Name+"/"+src.Secret.Items[0].Key+"->"+src.Secret.Items[0].Path)
			}
		}
	}
	if want := []string{"reader-pw/password->reader", "shared/w->writer"}; !slices.Equal(projected, want) {
		t.Errorf("users' volume %v, want %v", projected, want)
	}
	secret := resources.RedisUsersSecret(rc, "op", "ex")
	if string(secret.Data[resources.RedisUsersOperatorKey]) != "op" || string(secret.Data[resources.RedisUsersExporterKey]) != "ex" {
		t.Errorf("users Secret data: %q", secret.Data)
	}
}

// TestRedisUserConfConflict: with users, a user redis.conf that sets aclfile is refused with
// the field and the fix; without users, or without the directive, nothing is.
func TestRedisUserConfConflict(t *testing.T) {
	rc := &redisv1alpha1.RedisCluster{}
	rc.Name = "cache"
	conf := "maxmemory 1gb\n  ACLFILE /data/users.acl\n"
	if got := resources.RedisUserConfConflict(rc, conf); got != "" {
		t.Errorf("without users: %q, want no conflict", got)
	}
	rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true}
	if got := resources.RedisUserConfConflict(rc, conf); !strings.Contains(got, "spec.pod[0].configmap") || !strings.Contains(got, "remove the line") {
		t.Errorf("with users and aclfile: %q, want the field and the fix", got)
	}
	if got := resources.RedisUserConfConflict(rc, "maxmemory 1gb\n# aclfile /data/users.acl\nrequirepass x\n"); got != "" {
		t.Errorf("with users, a comment and requirepass: %q, want no conflict", got)
	}
}

// TestRedisACLUserAppliedSecretName: the record of a user of spec.acl.users is a valid
// Secret name whatever the user's name holds, and users whose names differ only in case or
// punctuation get records of their own.
func TestRedisACLUserAppliedSecretName(t *testing.T) {
	rc := &redisv1alpha1.RedisCluster{}
	rc.Name = "cache"
	seen := map[string]string{}
	for _, user := range []string{"reader", "Reader", "app.v2", "app_v2", "App-V2"} {
		name := resources.RedisACLUserAppliedSecretName(rc, user)
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("user %q: record %q is no Secret name: %v", user, name, errs)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("users %q and %q share the record %q", user, other, name)
		}
		seen[name] = user
	}
}

// TestRedisACLRulesInTemplate: a StatefulSet built from a spec runs its rules; a change of
// the default user's rules, of a user's rules or of the list of users is seen, a change of
// anything else is not; RedisACLRuleSets names each field.
func TestRedisACLRulesInTemplate(t *testing.T) {
	rc := &redisv1alpha1.RedisCluster{}
	rc.Name, rc.Namespace = "cache", "prod"
	rc.Spec.Replicas = 6
	rc.Spec.ACL = &redisv1alpha1.ACLSpec{Enabled: true, Users: []redisv1alpha1.ACLUser{
		{Name: "app", Rules: " ~a:* +@read ", PasswordSecret: redisv1alpha1.SecretKeyRef{Name: "app-pw"}},
	}}
	sts := resources.RedisStatefulSet(rc, 6)
	cases := map[string]struct {
		change func(*redisv1alpha1.RedisCluster)
		same   bool
	}{
		"unchanged":              {change: func(*redisv1alpha1.RedisCluster) {}, same: true},
		"more replicas":          {change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.Replicas = 8 }, same: true},
		"default rules":          {change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.ACL.DefaultUserRules = "~* +@all" }},
		"a user's rules":         {change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.ACL.Users[0].Rules = "~a:* +gett" }},
		"a user removed":         {change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.ACL.Users = nil }},
		"the same rules, spaced": {change: func(rc *redisv1alpha1.RedisCluster) { rc.Spec.ACL.Users[0].Rules = "~a:* +@read" }, same: true},
	}
	for name, tc := range cases {
		changed := rc.DeepCopy()
		tc.change(changed)
		if got := resources.RedisACLRulesInTemplate(changed, sts); got != tc.same {
			t.Errorf("%s: in the template %v, want %v", name, got, tc.same)
		}
	}
	sets := resources.RedisACLRuleSets(rc)
	want := []resources.RedisACLRuleSet{
		{Field: "spec.acl.defaultUserRules", User: "default", Rules: resources.RedisDefaultUserRules},
		{Field: "spec.acl.users[0].rules", User: "app", Rules: "~a:* +@read"},
	}
	if !slices.Equal(sets, want) {
		t.Errorf("rule sets %+v, want %+v", sets, want)
	}
}
