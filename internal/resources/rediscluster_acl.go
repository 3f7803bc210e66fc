package resources

import (
	"fmt"
	"hash/fnv"
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
)

// The Redis users of a RedisCluster with spec.acl.enabled, and where their passwords live.
const (
	// RedisOperatorUser is the operator's user: the cluster topology, slot moves, the
	// password rotation and the TLS reload, and replication (replicas authenticate to their
	// masters as this user).
	RedisOperatorUser = "mwo-operator"
	// RedisExporterUser is the exporter sidecar's user: statistics, no keys.
	RedisExporterUser = "mwo-exporter"
	// RedisUsersOperatorKey and RedisUsersExporterKey are the keys of the users Secret
	// holding each user's password, and the file names in RedisUsersDir.
	RedisUsersOperatorKey = "operator"
	RedisUsersExporterKey = "exporter"
	// RedisUsersDir is where the redis container mounts the users Secret (RedisUsersVolume).
	RedisUsersDir = "/etc/redis-users"
	// RedisUsersVolume is the name of the users Secret's volume.
	RedisUsersVolume = "users"
)

// ACL rules of each user, after its password. Each starts from nothing (a user line resets
// the user), so these are all it may do. The README's Security section and docs/security.md
// say the same; TestRedisUsersMustAndMustNot runs each command named here, and the ones each
// user must not run, against a real redis-server.
const (
	// RedisDefaultUserRules is the application's default user when spec.acl.defaultUserRules
	// is empty: every key, channel and command but the @dangerous ones (CONFIG, ACL changes,
	// CLUSTER changes, KEYS, FLUSHALL, FLUSHDB, MIGRATE, RESTORE, SWAPDB, MONITOR, DEBUG,
	// SHUTDOWN, REPLICAOF, FAILOVER, CLIENT KILL/LIST, SLOWLOG, SORT...). INFO stays: the
	// readiness probe reads INFO replication as this user, and clients read it. CLUSTER
	// SLOTS, SHARDS, NODES and INFO are not dangerous; cluster clients need them.
	RedisDefaultUserRules = "~* &* +@all -@dangerous +info"
	// RedisOperatorUserRules: the commands the operator sends, and those the nodes send as
	// this user on its behalf; nothing else. Each one and the step that needs it:
	//   - PING, INFO, DBSIZE, CLUSTER NODES/INFO/COUNTKEYSINSLOT: the snapshot, and the
	//     checks before a node joins;
	//   - CLUSTER MEET/ADDSLOTSRANGE/REPLICATE/SET-CONFIG-EPOCH/FORGET/RESET/FAILOVER/
	//     SETSLOT/BUMPEPOCH: forming, scaling, upgrading and healing the cluster;
	//   - CLUSTER GETKEYSINSLOT, MIGRATE, and ASKING + DUMP (comparing a key both nodes hold
	//     before MIGRATE REPLACE) for slot moves, and on the target the SELECT and
	//     RESTORE-ASKING that MIGRATE sends as this user (AUTH2); these need every key (~*);
	//   - MEMORY USAGE of a few keys per slot (a size, never a value): sizing the slots a
	//     move would send to a nearly full master;
	//   - PSYNC and REPLCONF (with PING): replicas replicate as this user, and a backup
	//     streams each master's RDB the same way;
	//   - RESTORE and FUNCTION LOAD: loading a backup into a restoring cluster;
	//   - CONFIG SET: maxmemory and maxmemory-policy (spec.memory), tls-cert-file (a renewed
	//     certificate), masterauth (a rotated password of this user), appendonly (a
	//     restore's large load, see rdbload.PauseAppendOnly; INFO tells its rewrite's end);
	//   - ACL SETUSER: rotating the passwords of every user without a restart.
	// It runs no read or write command of the application's (GET, SET, SCAN, KEYS,
	// FLUSHALL...), no CONFIG GET, no ACL read, and no channel.
	RedisOperatorUserRules = "~* resetchannels -@all +ping +info +dbsize " +
		"+cluster|nodes +cluster|info +cluster|countkeysinslot +cluster|getkeysinslot " +
		"+cluster|meet +cluster|addslotsrange +cluster|replicate +cluster|set-config-epoch +cluster|forget " +
		"+cluster|reset +cluster|failover +cluster|setslot +cluster|bumpepoch " +
		"+migrate +asking +dump +memory|usage +select +restore-asking +psync +replconf +restore +function|load " +
		"+config|set +acl|setuser"
	// RedisExporterUserRules: the statistics redis_exporter reads, no key, no channel, no
	// CONFIG (CONFIG GET masterauth would reveal the operator's password) and no SLOWLOG GET
	// (its entries are commands with their arguments: key names and values). The exporter
	// asks for both on every scrape, has no option to stop, and goes on without them when
	// refused (no CONFIG metrics, no last slow command); SLOWLOG LEN, a count, stays.
	RedisExporterUserRules = "resetkeys resetchannels -@all +ping +info +dbsize +select +cluster|info +cluster|nodes " +
		"+slowlog|len +latency|latest +client|list"
)

// Where the rules and the passwords of the application's users reach the start script.
const (
	// RedisACLUsersDir is where the redis container mounts the passwords of spec.acl.users,
	// one file per user named after it (RedisACLUsersVolume).
	RedisACLUsersDir    = "/etc/redis-acl-users"
	RedisACLUsersVolume = "acl-users"
	// RedisDefaultUserRulesEnv and RedisACLUsersEnv carry the rules to the start script:
	// the default user's, and one line "<name> <rules>" per user of spec.acl.users.
	RedisDefaultUserRulesEnv = "REDIS_DEFAULT_USER_RULES"
	RedisACLUsersEnv         = "REDIS_ACL_USERS"
)

// RedisDefaultUserRulesOf is the default user's rules: spec.acl.defaultUserRules, or
// RedisDefaultUserRules when it is empty.
func RedisDefaultUserRulesOf(rc *redisv1alpha1.RedisCluster) string {
	if rc.Spec.ACL != nil && strings.TrimSpace(rc.Spec.ACL.DefaultUserRules) != "" {
		return strings.TrimSpace(rc.Spec.ACL.DefaultUserRules)
	}
	return RedisDefaultUserRules
}

// RedisACLUserSecretKey is the key of a user's password Secret: passwordSecret.key, or
// RedisPasswordKey.
func RedisACLUserSecretKey(u redisv1alpha1.ACLUser) string {
	if u.PasswordSecret.Key != "" {
		return u.PasswordSecret.Key
	}
	return RedisPasswordKey
}

// redisACLEnv is what the ACL start script reads besides the password files: the default
// user's rules and the users of spec.acl.users.
func redisACLEnv(rc *redisv1alpha1.RedisCluster) []corev1.EnvVar {
	var users strings.Builder
	for _, u := range rc.Spec.ACL.Users {
		users.WriteString(u.Name + " " + strings.TrimSpace(u.Rules) + "\n")
	}
	env := []corev1.EnvVar{{Name: RedisDefaultUserRulesEnv, Value: RedisDefaultUserRulesOf(rc)}}
	if users.Len() > 0 {
		env = append(env, corev1.EnvVar{Name: RedisACLUsersEnv, Value: users.String()})
	}
	return env
}

// RedisACLRuleSet is one field of ACL rules of a RedisCluster.
type RedisACLRuleSet struct {
	// Field is the field's path in the spec, for example spec.acl.users[0].rules.
	Field string
	// User is the Redis user the rules are for ("default" for spec.acl.defaultUserRules).
	User string
	// Rules are the rules the pods start the user with.
	Rules string
}

// RedisACLRuleSets are the rules the pods start the application's users with: the default
// user's (RedisDefaultUserRulesOf), then those of spec.acl.users in order. None without
// spec.acl.enabled.
func RedisACLRuleSets(rc *redisv1alpha1.RedisCluster) []RedisACLRuleSet {
	if !RedisACLEnabled(rc) {
		return nil
	}
	sets := []RedisACLRuleSet{{Field: "spec.acl.defaultUserRules", User: "default", Rules: RedisDefaultUserRulesOf(rc)}}
	for i, u := range rc.Spec.ACL.Users {
		sets = append(sets, RedisACLRuleSet{Field: fmt.Sprintf("spec.acl.users[%d].rules", i), User: u.Name, Rules: strings.TrimSpace(u.Rules)})
	}
	return sets
}

// RedisACLRulesInTemplate reports whether the pod template of sts starts the users with the
// rules rc asks for: its containers carry the same rules for the start script (both none
// without spec.acl.enabled).
func RedisACLRulesInTemplate(rc *redisv1alpha1.RedisCluster, sts *appsv1.StatefulSet) bool {
	want := map[string]string{}
	if RedisACLEnabled(rc) {
		for _, e := range redisACLEnv(rc) {
			want[e.Name] = e.Value
		}
	}
	have := map[string]string{}
	for _, c := range sts.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == RedisDefaultUserRulesEnv || e.Name == RedisACLUsersEnv {
				have[e.Name] = e.Value
			}
		}
	}
	return maps.Equal(want, have)
}

// redisACLUsersVolume holds the passwords of spec.acl.users, or is nil when there is none.
func redisACLUsersVolume(rc *redisv1alpha1.RedisCluster) *corev1.Volume {
	if len(rc.Spec.ACL.Users) == 0 {
		return nil
	}
	sources := make([]corev1.VolumeProjection, 0, len(rc.Spec.ACL.Users))
	for _, u := range rc.Spec.ACL.Users {
		sources = append(sources, corev1.VolumeProjection{Secret: &corev1.SecretProjection{
			LocalObjectReference: corev1.LocalObjectReference{Name: u.PasswordSecret.Name},
			Items:                []corev1.KeyToPath{{Key: RedisACLUserSecretKey(u), Path: u.Name}},
		}})
	}
	return &corev1.Volume{Name: RedisACLUsersVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: sources, DefaultMode: ptr.To[int32](0o440),
	}}}
}

// RedisACLEnabled reports whether spec.acl.enabled is true.
func RedisACLEnabled(rc *redisv1alpha1.RedisCluster) bool {
	return rc.Spec.ACL != nil && rc.Spec.ACL.Enabled
}

// RedisUsersSecretName is the Secret with the passwords of the operator's and the
// exporter's users, generated by the operator.
func RedisUsersSecretName(rc *redisv1alpha1.RedisCluster) string { return rc.Name + "-users" }

// RedisUsersSecret holds the operator's and the exporter's passwords. A changed password is
// rotated onto the nodes as the application's is.
func RedisUsersSecret(rc *redisv1alpha1.RedisCluster, operatorPassword, exporterPassword string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: redisMeta(rc, RedisUsersSecretName(rc)),
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			RedisUsersOperatorKey: []byte(operatorPassword),
			RedisUsersExporterKey: []byte(exporterPassword),
		},
	}
}

// RedisUserAppliedSecretName is the applied-password record (see RedisAppliedPasswordSecret)
// of the user whose password is key of the users Secret (RedisUsersOperatorKey or
// RedisUsersExporterKey). The exporter's record carries its password file, which its
// sidecar mounts.
func RedisUserAppliedSecretName(rc *redisv1alpha1.RedisCluster, key string) string {
	return rc.Name + "-" + key + "-applied"
}

// RedisACLStartScript is RedisStartScript for a cluster with ACL users: instead of
// requirepass it writes one user line per user into RedisAuthFile (the default user with
// the password Secret's password and the rules of RedisDefaultUserRulesEnv, the operator's
// and the exporter's with the users Secret's, and each line of RedisACLUsersEnv with its
// password file in RedisACLUsersDir), and makes replicas authenticate to their masters as
// RedisOperatorUser. A password file that is missing or not a password stops it.
const RedisACLStartScript = redisStartHead + redisUsersAuth + redisStartGuard

// redisUsersAuth writes the users into RedisAuthFile, each password quoted for redis.conf.
// The users' loop reads a here-document, so it runs in this shell and its exit stops the
// script.
const redisUsersAuth = redisPasswordFunc + `for f in ` + RedisPasswordFile + ` ` + redisOperatorPasswordFile + ` ` + redisExporterPasswordFile + `; do
  password "$f" || exit 1
done
{ printf 'user default on ">'; quoted ` + RedisPasswordFile + `; printf '" %s\n' "$` + RedisDefaultUserRulesEnv + `"
  printf 'user ` + RedisOperatorUser + ` on ">'; quoted ` + redisOperatorPasswordFile + `; printf '" ` + RedisOperatorUserRules + `\n'
  printf 'user ` + RedisExporterUser + ` on ">'; quoted ` + redisExporterPasswordFile + `; printf '" ` + RedisExporterUserRules + `\n'
  while read -r name rules; do
    [ -n "$name" ] || continue
    printf 'user %s on ">' "$name"; quoted "` + RedisACLUsersDir + `/$name"; printf '" %s\n' "$rules"
  done <<EOF
$` + RedisACLUsersEnv + `
EOF
  printf 'masteruser ` + RedisOperatorUser + `\nmasterauth "'; quoted ` + redisOperatorPasswordFile + `; printf '"\n'; } > ` + RedisAuthFile + `
`

const (
	redisOperatorPasswordFile = RedisUsersDir + "/" + RedisUsersOperatorKey
	redisExporterPasswordFile = RedisUsersDir + "/" + RedisUsersExporterKey
)

// redisStartScript is the start script for rc.
func redisStartScript(rc *redisv1alpha1.RedisCluster) string {
	auth := redisPasswordAuth
	if RedisACLEnabled(rc) {
		auth = redisUsersAuth
	}
	if RedisOnNodePorts(rc) {
		return redisStartHead + auth + redisNodePortAtStart(RedisTLSEnabled(rc)) + redisStartGuard
	}
	if rc.Spec.ExternalAccess != nil {
		return redisStartHead + auth + redisAnnounceAtStart + redisStartGuard
	}
	return redisStartHead + auth + redisStartGuard
}

// redisUsersMount mounts the operator's and the exporter's passwords in the redis container.
func redisUsersMount() corev1.VolumeMount {
	return corev1.VolumeMount{Name: RedisUsersVolume, MountPath: RedisUsersDir, ReadOnly: true}
}

// redisUsersVolume is the users Secret's volume for the redis container: the two passwords.
func redisUsersVolume(rc *redisv1alpha1.RedisCluster) corev1.Volume {
	return corev1.Volume{Name: RedisUsersVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: RedisUsersSecretName(rc),
		Items: []corev1.KeyToPath{
			{Key: RedisUsersOperatorKey, Path: RedisUsersOperatorKey},
			{Key: RedisUsersExporterKey, Path: RedisUsersExporterKey},
		},
		DefaultMode: ptr.To[int32](0o440),
	}}}
}

// RedisUserConfConflict names a directive of the user's redis.conf (spec.pod[0].configmap)
// that cannot work with the cluster's users, with the fix, or returns "": an aclfile
// conflicts with the user lines the start script writes (redis-server refuses to start with
// both). requirepass, masteruser and masterauth need no check: the start script's
// directives come later and win.
func RedisUserConfConflict(rc *redisv1alpha1.RedisCluster, userConf string) string {
	if !RedisACLEnabled(rc) {
		return ""
	}
	for line := range strings.Lines(userConf) {
		if fields := strings.Fields(line); len(fields) > 0 && strings.EqualFold(fields[0], "aclfile") {
			return fmt.Sprintf("spec.pod[0].configmap: redis.conf sets aclfile, which cannot work with spec.acl (the operator writes the users, their passwords from Secrets %s and %s): remove the line",
				RedisPasswordSecretName(rc), RedisUsersSecretName(rc))
		}
	}
	return ""
}

// RedisACLUserAppliedSecretName is the applied-password record (see
// RedisAppliedPasswordSecret) of the user of spec.acl.users named user: named after a digest
// of the name, which may hold characters a Secret's name cannot.
func RedisACLUserAppliedSecretName(rc *redisv1alpha1.RedisCluster, user string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(user))
	return fmt.Sprintf("%s-acl-%08x-applied", rc.Name, h.Sum32())
}

// RedisACLNamesSecret reports whether a user of rc's spec.acl.users has its password in the
// Secret name.
func RedisACLNamesSecret(rc *redisv1alpha1.RedisCluster, name string) bool {
	if !RedisACLEnabled(rc) {
		return false
	}
	for _, u := range rc.Spec.ACL.Users {
		if u.PasswordSecret.Name == name {
			return true
		}
	}
	return false
}
