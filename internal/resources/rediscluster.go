package resources

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/objectlabels"
)

// Redis ports and file locations inside a Redis pod.
const (
	RedisPort = 6379
	// RedisBusPort is the Redis Cluster bus port: the client port plus 10000.
	RedisBusPort      = RedisPort + 10000
	RedisExporterPort = 9121
	RedisConfigDir    = "/etc/redis"
	RedisConfigFile   = "redis.conf"
	RedisDataDir      = "/data"
	// RedisPasswordKey is the Secret key holding the password.
	RedisPasswordKey = "password"
	// RedisContainer is the name of the Redis container.
	RedisContainer = "redis"
	// RedisDataVolume is the name of the data volume (and of the volumeClaimTemplate).
	RedisDataVolume = "data"
	// RedisUserConfigKey is the key of the user's ConfigMap merged into redis.conf.
	RedisUserConfigKey = "redis.conf"
	// RedisMembersDir is where the members ConfigMap (see RedisMembersConfigMapName) is
	// mounted: one file per member pod, named after the pod, holding its node id.
	RedisMembersDir = "/etc/redis-members"
	// RedisMembersVolume is the name of the members ConfigMap volume.
	RedisMembersVolume = "members"
	// RedisAuthDir is an in-memory emptyDir where RedisStartScript writes the password as
	// redis.conf directives (RedisAuthFile), included by redis-server: the password is in
	// no process's arguments, and redis-server's environment does not hold it.
	RedisAuthDir = "/run/redis-auth"
	// RedisAuthFile is the file in RedisAuthDir.
	RedisAuthFile = RedisAuthDir + "/auth.conf"
	// RedisAuthVolume is the name of that emptyDir.
	RedisAuthVolume = "auth"
	// RedisPasswordDir is where the password Secret is mounted (RedisPasswordVolume): the
	// start script and the readiness probe read the password from RedisPasswordFile there.
	// The kubelet refreshes a Secret volume when the Secret changes, so a probe keeps
	// working across a password rotation.
	RedisPasswordDir = "/etc/redis-password"
	// RedisPasswordFile is the password file in RedisPasswordDir.
	RedisPasswordFile = RedisPasswordDir + "/" + RedisPasswordKey
	// RedisPasswordVolume is the name of the password Secret's volume.
	RedisPasswordVolume = "password"
	// RedisExporterAddr is the address the exporter sidecar scrapes.
	RedisExporterAddr = "redis://localhost:6379"
	// RedisExporterPasswordFileKey is the key of the applied-password Secret that holds the
	// exporter's password file (RedisExporterPasswordJSON).
	RedisExporterPasswordFileKey = "exporter-password-file.json"
	// RedisExporterAuthDir is where the exporter container mounts that key
	// (RedisExporterAuthVolume), as RedisExporterPasswordFile.
	RedisExporterAuthDir = "/etc/redis-exporter"
	// RedisExporterPasswordFile is the exporter's password file in RedisExporterAuthDir.
	RedisExporterPasswordFile = RedisExporterAuthDir + "/password-file.json"
	// RedisExporterAuthVolume is the name of the exporter's password file volume.
	RedisExporterAuthVolume = "exporter-auth"
	// RedisExporterReloadPath is redis_exporter's endpoint (v1.50.0 and later) that reads
	// its password file again.
	RedisExporterReloadPath = "/-/reload"
)

// RedisStartScript is the redis container's command (run as sh -c RedisStartScript
// redis-server ARGS...). It first writes the password from RedisPasswordFile into
// RedisAuthFile as requirepass and masterauth (quoted for redis.conf), so the password
// reaches redis-server through a file it includes, never its arguments or environment; with
// no password file it does not start. A pod whose data volume has no cluster state
// (nodes.conf missing or empty) but which the operator still records as a member (a non-empty file named after the
// pod in RedisMembersDir) has lost its data: started at its address as a fresh node, it
// would make its old replica full-sync from it and flush its copy. So it waits until the
// operator has settled the old role and released the pod (deleted its key), then execs
// redis-server with the args. POSIX sh only; no "$(" or "$$", which the kubelet would expand.
const RedisStartScript = redisStartHead + redisPasswordAuth + redisStartGuard

// redisStartHead makes the start script exit on TERM and create files for itself only.
const redisStartHead = `trap 'exit 143' TERM
umask 077
`

// redisPasswordAuth writes the password as requirepass and masterauth into RedisAuthFile.
const redisPasswordAuth = redisPasswordFunc + `password ` + RedisPasswordFile + ` || exit 1
{ printf 'requirepass "'; quoted ` + RedisPasswordFile + `
  printf '"\nmasterauth "'; quoted ` + RedisPasswordFile + `; printf '"\n'; } > ` + RedisAuthFile + `
`

// redisStartGuard holds a recorded member whose data is gone until the operator releases
// it, then starts redis-server.
const redisStartGuard = `member="` + RedisMembersDir + `/$POD_NAME"
if [ ! -s ` + RedisDataDir + `/nodes.conf ] && [ -n "$POD_NAME" ] && [ -f "$member" ] && [ -s "$member" ]; then
  read -r node < "$member"
  echo "data directory ` + RedisDataDir + ` has no cluster state (nodes.conf missing or empty) but pod $POD_NAME is a recorded cluster member (node id $node); waiting for the operator to settle its old role" >&2
  while [ -f "$member" ] && [ -s "$member" ]; do sleep 1; done
fi
exec redis-server "$@"
`

// RedisReadinessScript is the readiness probe: a pod is ready when its node belongs to the
// cluster (it knows other nodes), and, for a replica, its link to its master is up and no
// full sync is in progress. So the PodDisruptionBudget counts real redundancy: a replica
// still loading its first copy does not let a drain take its master. The password is read
// from the Secret volume each time, so the probe follows a password rotation, and reaches
// redis-cli on its standard input (--askpass, written by the shell's printf builtin): it is
// in no process's arguments or environment.
const RedisReadinessScript = redisPasswordFunc + `password ` + RedisPasswordFile + ` || exit 1
cluster=` + "`" + redisProbeCLI + ` cluster info` + "`" + ` || exit 1
replication=` + "`" + redisProbeCLI + ` info replication` + "`" + ` || exit 1
echo "$cluster" | grep -q '^cluster_known_nodes:[2-9]\|^cluster_known_nodes:[1-9][0-9]' || { echo "not in a cluster"; exit 1; }
case "$replication" in
*role:slave*)
  echo "$replication" | grep -q '^master_link_status:up' || { echo "link to the master is down"; exit 1; }
  echo "$replication" | grep -q '^master_sync_in_progress:0' || { echo "full sync in progress"; exit 1; } ;;
esac
`

// redisProbeCLI runs redis-cli against the pod's own node with the password $pw on its
// standard input. redisReadinessScript adds the TLS options after "redis-cli".
const redisProbeCLI = `printf '%s\n' "$pw" | redis-cli ` + redisProbeAddr + ` --askpass`

// RedisHeadlessServiceName is the headless Service that gives each pod a stable DNS name,
// <pod>.<cluster>.<namespace>.svc, as in the seed.
func RedisHeadlessServiceName(rc *redisv1alpha1.RedisCluster) string { return rc.Name }

// RedisClientServiceName is the Service clients connect to.
func RedisClientServiceName(rc *redisv1alpha1.RedisCluster) string { return rc.Name + "-client" }

// RedisConfigMapName holds the generated redis.conf.
func RedisConfigMapName(rc *redisv1alpha1.RedisCluster) string { return rc.Name + "-config" }

// RedisPasswordSecretName is the Secret with the password: the user's, or a generated one.
func RedisPasswordSecretName(rc *redisv1alpha1.RedisCluster) string {
	if rc.Spec.PasswordSecret != "" {
		return rc.Spec.PasswordSecret
	}
	return rc.Name + "-password"
}

// RedisAppliedPasswordSecretName is the operator's record of the password the nodes run
// with (and, during a rotation, the one they are leaving), so that a changed password
// Secret is rotated onto the nodes instead of locking the operator out.
func RedisAppliedPasswordSecretName(rc *redisv1alpha1.RedisCluster) string {
	return rc.Name + "-password-applied"
}

// RedisAppliedPasswordSecret is that record: RedisPasswordKey holds the password every node
// accepts, RedisPreviousPasswordKey (during a rotation) the one being retired, and
// RedisPasswordSwitchedAnnotation when every node started accepting the new one.
// RedisExporterPasswordFileKey holds the same password as the exporter's password file: the
// exporter sidecar mounts it, so it moves to a rotation's new password only once every node
// accepts it, and the grace period leaves the kubelet time to refresh the volume before the
// old one stops working. name is the record's: RedisAppliedPasswordSecretName for the
// default user, RedisUserAppliedSecretName for the users of spec.acl.
func RedisAppliedPasswordSecret(rc *redisv1alpha1.RedisCluster, name, password, previous string, switchedAt time.Time) *corev1.Secret {
	secret := &corev1.Secret{
		ObjectMeta: redisMeta(rc, name),
		Type:       corev1.SecretTypeOpaque,
		Data: map[string][]byte{
			RedisPasswordKey:             []byte(password),
			RedisExporterPasswordFileKey: RedisExporterPasswordJSON(password),
		},
	}
	if previous != "" {
		secret.Data[RedisPreviousPasswordKey] = []byte(previous)
		secret.Annotations = map[string]string{RedisPasswordSwitchedAnnotation: switchedAt.UTC().Format(time.RFC3339)}
	}
	return secret
}

// RedisExporterPasswordJSON is redis_exporter's password file (its --redis.password-file,
// or REDIS_PASSWORD_FILE): a JSON object from the address it scrapes, RedisExporterAddr or
// with TLS RedisExporterTLSAddr (both are listed), to the password.
func RedisExporterPasswordJSON(password string) []byte {
	data, _ := json.Marshal(map[string]string{RedisExporterAddr: password, RedisExporterTLSAddr: password, RedisExporterSocketAddr: password}) //nolint:errchkjson // a map of strings always encodes
	return data
}

const (
	// RedisPreviousPasswordKey holds the password a rotation retires.
	RedisPreviousPasswordKey = "previous"
	// RedisPasswordSwitchedAnnotation is when every node began to accept the new password.
	RedisPasswordSwitchedAnnotation = "redis.middleware-operator.io/password-switched-at"
)

// RedisMembersConfigMapName is the ConfigMap the operator keeps of the pods that joined
// the cluster: pod name -> Redis node id.
func RedisMembersConfigMapName(rc *redisv1alpha1.RedisCluster) string { return rc.Name + "-members" }

// RedisPodSpec is the first pod[] entry, or an empty one.
func RedisPodSpec(rc *redisv1alpha1.RedisCluster) redisv1alpha1.PodSpec {
	if len(rc.Spec.Pod) > 0 {
		return rc.Spec.Pod[0]
	}
	return redisv1alpha1.PodSpec{}
}

// RedisImage is pod[0].middlewareImage, else repository:version.
func RedisImage(rc *redisv1alpha1.RedisCluster) string {
	if img := RedisPodSpec(rc).MiddlewareImage; img != "" {
		return img
	}
	repo, version := rc.Spec.Repository, rc.Spec.Version
	if repo == "" {
		repo = "redis"
	}
	if version == "" {
		version = "7.0.15"
	}
	return repo + ":" + version
}

// RedisReplicasPerMaster is spec.replicasPerMaster, 1 when unset.
func RedisReplicasPerMaster(rc *redisv1alpha1.RedisCluster) int {
	return int(ptr.Deref(rc.Spec.ReplicasPerMaster, 1))
}

// RedisMasters is the number of masters the cluster runs: replicas / (1 +
// replicasPerMaster), or with spec.autoscale the autoscaler's (AutoscaleMasters).
func RedisMasters(rc *redisv1alpha1.RedisCluster) int {
	if rc.Spec.Autoscale != nil {
		return AutoscaleMasters(rc)
	}
	return int(rc.Spec.Replicas) / (1 + RedisReplicasPerMaster(rc))
}

// RedisNodes is the number of Redis nodes the cluster runs: spec.replicas, or with
// spec.autoscale the autoscaler's masters with their replicas.
func RedisNodes(rc *redisv1alpha1.RedisCluster) int32 {
	if rc.Spec.Autoscale != nil {
		return int32(AutoscaleMasters(rc) * (1 + RedisReplicasPerMaster(rc))) //nolint:gosec // at most 1000 (CEL)
	}
	return rc.Spec.Replicas
}

// AutoscaleMasters is the number of masters the autoscaler asks for: status.autoscale.masters
// once it decided, spec.replicas' masters before; within minMasters and maxMasters.
func AutoscaleMasters(rc *redisv1alpha1.RedisCluster) int {
	a := rc.Spec.Autoscale
	m := int(rc.Spec.Replicas) / (1 + RedisReplicasPerMaster(rc))
	if rc.Status.Autoscale != nil && rc.Status.Autoscale.Masters > 0 {
		m = int(rc.Status.Autoscale.Masters)
	}
	return min(max(m, int(a.MinMasters)), int(a.MaxMasters))
}

// RedisConf is the generated redis.conf: the user's configuration first, then the cluster
// settings the operator depends on, which win (Redis keeps the last value of a directive).
// protected-mode is on: Redis then refuses connections from other hosts only while the
// default user has no password, and the start scripts never start a node without one (the
// password Secret's, as requirepass or as the default user's ACL password), so it refuses
// nothing in normal operation and closes the node should it ever run without a password.
// The password and the announced IP come from the environment at start (see the
// StatefulSet's args), so they are never in the ConfigMap. With tls, 6379 speaks TLS only,
// and so do replication and the cluster bus (see redisTLSConf). tlsClientAuth is
// RedisTLSClientAuth: "" without TLS. cluster-require-full-coverage is the user's value when
// their redis.conf sets one, else RedisDefaultFullCoverage.
func RedisConf(userConf, tlsClientAuth string) string {
	var b strings.Builder
	if userConf = strings.TrimSpace(userConf); userConf != "" {
		b.WriteString(userConfHeader)
		b.WriteString(userConf)
		b.WriteString("\n\n")
	}
	b.WriteString(managedConfHeader + `port 6379
bind 0.0.0.0
protected-mode yes
cluster-enabled yes
cluster-config-file nodes.conf
cluster-node-timeout 5000
cluster-migration-barrier ` + redisMigrationBarrier + `
cluster-require-full-coverage ` + redisUserFullCoverage(userConf) + `
dir /data
appendonly yes
`)
	if _, set := confDirective(userConf, "appendfsync"); !set {
		b.WriteString(redisAOFSync)
	}
	if _, set := confDirective(userConf, "save"); !set {
		b.WriteString(redisNoSnapshots)
	}
	if tlsClientAuth != "" {
		b.WriteString(redisTLSConf(tlsClientAuth))
	}
	return b.String()
}

// redisMigrationBarrier turns off Redis's own replica migration (a replica of a master with
// more than cluster-migration-barrier replicas moves to a master left with none): the
// operator's planner places replicas (balanced, and apart from their master's Kubernetes
// node), and Redis moving one back between the two REPLICATE commands of a swap undid the
// planner's move, look after look. An emptied master's replicas still follow its slots
// (cluster-allow-replica-migration stays yes).
const redisMigrationBarrier = "999"

// redisAOFSync is the AOF's fsync policy unless the user's redis.conf sets one: once a
// second, Redis's default. A user who would rather lose no acknowledged write to a killed
// container than keep the write throughput sets appendfsync always.
const redisAOFSync = "appendfsync everysec\n"

// redisNoSnapshots turns off Redis's periodic RDB snapshots (its default save points) unless
// the user's redis.conf sets its own: with appendonly a restart loads the AOF, never
// dump.rdb, and backups stream their own snapshot, so the snapshots were forks and disk
// writes nothing read. Every node took one about each minute under writes, all at once; on
// a busy disk they stalled masters past cluster-node-timeout, and Redis then failed a master
// over by itself, dropping the writes its replica had not received yet.
const redisNoSnapshots = "save \"\"\n"

// managedConfHeader starts the operator's part of the generated redis.conf.
const managedConfHeader = "# managed by middleware-operator\n"

// RedisLockdownConf closes the commands no client, and no step of the operator, needs: DEBUG
// (it can crash or stall a node and read any key's internals), MODULE (it loads any shared
// library on the node's disk) and CONFIG SET of the protected settings (dir, dbfilename and
// the like, which point the node's writes at any file). Redis 7.0 keeps them closed by
// default, but a user's redis.conf could open them: these lines come last in the generated
// redis.conf, after the user's configuration, and Redis keeps the last value of a
// directive. The three cannot be changed at run time (CONFIG SET refuses them); the
// --include of RedisAuthFile after the file carries only the start script's password lines.
const RedisLockdownConf = "enable-debug-command no\nenable-module-command no\nenable-protected-configs no\n"

// RedisConfigMap holds redis.conf; userConf is the user ConfigMap's redis.conf (may be
// empty). The memory directives (redisMemoryConf) and the write-safety ones
// (redisWriteSafetyConf) come after the cluster settings, and RedisLockdownConf last of all.
func RedisConfigMap(rc *redisv1alpha1.RedisCluster, userConf string) *corev1.ConfigMap {
	conf := RedisConf(userConf, RedisTLSClientAuth(rc)) + redisMemoryConf(rc, userConf) + redisWriteSafetyConf(rc) +
		redisReplicaSyncConf(rc, userConf)
	if rc.Spec.ExternalAccess != nil {
		conf += redisExternalConf
	}
	conf += redisLockdownHeader + RedisLockdownConf
	return &corev1.ConfigMap{
		ObjectMeta: redisMeta(rc, RedisConfigMapName(rc)),
		Data:       map[string]string{RedisConfigFile: conf},
	}
}

// redisReplicaSyncConf lets a master start a replica's full sync as soon as all of its
// replicasPerMaster replicas ask for one, instead of waiting out repl-diskless-sync-delay
// (5 s) for more that will not come: a new cluster's replicas, a restored cluster's (its
// load waits for them) and a healed replica are in sync that much sooner. With fewer replicas
// asking (one of two back after a restart), the master still waits the delay for the other.
// A user redis.conf that sets repl-diskless-sync-max-replicas keeps its own value; nothing
// without replicas.
func redisReplicaSyncConf(rc *redisv1alpha1.RedisCluster, userConf string) string {
	n := RedisReplicasPerMaster(rc)
	if _, set := confDirective(userConf, "repl-diskless-sync-max-replicas"); set || n == 0 {
		return ""
	}
	return fmt.Sprintf("repl-diskless-sync-max-replicas %d\n", n)
}

// redisLockdownHeader starts RedisLockdownConf in the generated redis.conf.
const redisLockdownHeader = "# closed whatever the configuration above says (middleware-operator)\n"

// RedisMembersConfigMap records members (pod name -> node id); pods see it in
// RedisMembersDir, and RedisStartScript reads it.
func RedisMembersConfigMap(rc *redisv1alpha1.RedisCluster, members map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: redisMeta(rc, RedisMembersConfigMapName(rc)), Data: members}
}

// RedisPasswordSecret is the generated password Secret.
func RedisPasswordSecret(rc *redisv1alpha1.RedisCluster, password string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: redisMeta(rc, RedisPasswordSecretName(rc)),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{RedisPasswordKey: []byte(password)},
	}
}

// RedisHeadlessService gives each pod a DNS name and publishes not-ready pods, so nodes can
// find each other while the cluster forms. With an exporter it also names its port: every
// pod is a scrape target of its own (a ServiceMonitor on this Service scrapes each endpoint),
// where the client Service would hand each scrape to any one pod.
func RedisHeadlessService(rc *redisv1alpha1.RedisCluster) *corev1.Service {
	ports := []corev1.ServicePort{
		{Name: "redis", Port: RedisPort, TargetPort: intstr.FromInt32(RedisPort), Protocol: corev1.ProtocolTCP},
		{Name: "bus", Port: RedisBusPort, TargetPort: intstr.FromInt32(RedisBusPort), Protocol: corev1.ProtocolTCP},
	}
	if RedisOnNodePorts(rc) {
		ports = nil // each pod has its own ports (RedisClientPort): the names give addresses only
	}
	if RedisPodSpec(rc).MonitorImage != "" {
		ports = append(ports, corev1.ServicePort{Name: "metrics", Port: RedisExporterPort, TargetPort: intstr.FromInt32(RedisExporterPort), Protocol: corev1.ProtocolTCP})
	}
	return &corev1.Service{
		ObjectMeta: redisMeta(rc, RedisHeadlessServiceName(rc)),
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 objectlabels.SelectorLabels(objectlabels.RedisClusterKind, rc.Name),
			Ports:                    ports,
		},
	}
}

// RedisClientService is the ClusterIP Service clients use to reach any node: the Redis
// port only (the exporter's is on the headless Service).
func RedisClientService(rc *redisv1alpha1.RedisCluster) *corev1.Service {
	ports := []corev1.ServicePort{{Name: "redis", Port: RedisPort, TargetPort: intstr.FromInt32(RedisPort), Protocol: corev1.ProtocolTCP}}
	return &corev1.Service{
		ObjectMeta: redisMeta(rc, RedisClientServiceName(rc)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: objectlabels.SelectorLabels(objectlabels.RedisClusterKind, rc.Name),
			Ports:    ports,
		},
	}
}

// RedisPodDisruptionBudget lets at most one Redis pod be evicted at a time.
func RedisPodDisruptionBudget(rc *redisv1alpha1.RedisCluster) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: redisMeta(rc, rc.Name),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchLabels: objectlabels.SelectorLabels(objectlabels.RedisClusterKind, rc.Name)},
		},
	}
}

// RedisStatefulSet runs the Redis nodes. replicas is what the controller wants now (it
// differs from spec.replicas while scaling). Pods are replaced by the operator (OnDelete),
// one at a time, so a master fails over before its pod restarts.
func RedisStatefulSet(rc *redisv1alpha1.RedisCluster, replicas int32) *appsv1.StatefulSet {
	pod := RedisPodSpec(rc)
	selector := objectlabels.SelectorLabels(objectlabels.RedisClusterKind, rc.Name)
	sts := &appsv1.StatefulSet{
		ObjectMeta: redisMeta(rc, rc.Name),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			ServiceName:         RedisHeadlessServiceName(rc),
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Selector:            &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      merge(pod.Labels, objectlabels.ObjectLabels(objectlabels.RedisClusterKind, rc.Name)),
					Annotations: pod.Annotations,
				},
				Spec: corev1.PodSpec{
					Affinity:                      redisAffinity(rc, pod.Affinity),
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					// Neither Redis nor the exporter talks to the API server: no token.
					AutomountServiceAccountToken: ptr.To(false),
					Containers:                   redisContainers(rc, pod),
					Volumes:                      redisVolumes(rc, pod),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](999), FSGroup: ptr.To[int64](999),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
				},
			},
		},
	}
	if redisVolumeType(pod) == "pvc" {
		size, _ := RedisVolumeSize(rc)
		var class *string
		if pod.Volumes != nil && pod.Volumes.StorageClassName != "" {
			class = ptr.To(pod.Volumes.StorageClassName)
		}
		sts.Spec.VolumeClaimTemplates = []corev1.PersistentVolumeClaim{{
			ObjectMeta: metav1.ObjectMeta{Name: RedisDataVolume, Labels: objectlabels.ObjectLabels(objectlabels.RedisClusterKind, rc.Name)},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName: class,
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			},
		}}
		sts.Spec.PersistentVolumeClaimRetentionPolicy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
			WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
		}
	}
	return sts
}

func redisVolumeType(pod redisv1alpha1.PodSpec) redisv1alpha1.VolumeType {
	if pod.Volumes == nil || pod.Volumes.Type == "" {
		return "pvc"
	}
	return pod.Volumes.Type
}

func redisContainers(rc *redisv1alpha1.RedisCluster, pod redisv1alpha1.PodSpec) []corev1.Container {
	env := append([]corev1.EnvVar{
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
	}, pod.Env...)
	redis := corev1.Container{
		Name:  RedisContainer,
		Image: RedisImage(rc),
		// The script writes the password file and guards against starting a member whose
		// data was lost; the args pass through to redis-server. $(VAR) is expanded by the
		// kubelet; the password stays out of the ConfigMap and of every argument.
		Command: []string{"sh", "-c", redisStartScript(rc), "redis-server"},
		Args: []string{
			RedisConfigDir + "/" + RedisConfigFile,
			"--cluster-announce-ip", "$(POD_IP)",
			"--include", RedisAuthFile,
		},
		Env:       env,
		Resources: pod.Resources,
		Ports: []corev1.ContainerPort{
			{Name: "redis", ContainerPort: RedisPort, Protocol: corev1.ProtocolTCP},
			{Name: "bus", ContainerPort: RedisBusPort, Protocol: corev1.ProtocolTCP},
		},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{
				"sh", "-c", redisReadinessScript(RedisTLSClientAuth(rc)),
			}}},
			PeriodSeconds: 5, TimeoutSeconds: 3,
		},
		LivenessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(RedisPort)}},
			InitialDelaySeconds: 15, PeriodSeconds: 10,
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "config", MountPath: RedisConfigDir},
			{Name: RedisDataVolume, MountPath: RedisDataDir},
			{Name: RedisMembersVolume, MountPath: RedisMembersDir, ReadOnly: true},
			{Name: RedisAuthVolume, MountPath: RedisAuthDir},
			{Name: RedisPasswordVolume, MountPath: RedisPasswordDir, ReadOnly: true},
		},
		SecurityContext: redisContainerSecurityContext(),
	}
	if t := redisVolumeType(pod); t == "hostPath" || t == "nfs" {
		// Pods share the volume: each keeps its files in a folder named after itself.
		redis.VolumeMounts[1].SubPathExpr = "$(POD_NAME)"
	}
	if RedisTLSEnabled(rc) {
		redis.VolumeMounts = append(redis.VolumeMounts, redisTLSMount())
	}
	if RedisOnNodePorts(rc) {
		// Each pod listens on its own port: the template names none, and the probes use the
		// node's Unix socket.
		redis.Env = append(redis.Env, redisNodePortEnv(rc)...)
		redis.Ports = nil
		redis.ReadinessProbe, redis.LivenessProbe = redisNodePortProbes()
		redis.VolumeMounts = append(redis.VolumeMounts, corev1.VolumeMount{Name: RedisSocketVolume, MountPath: RedisSocketDir})
	}
	if RedisACLEnabled(rc) {
		redis.VolumeMounts = append(redis.VolumeMounts, redisUsersMount())
		redis.Env = append(redis.Env, redisACLEnv(rc)...)
		if len(rc.Spec.ACL.Users) > 0 {
			redis.VolumeMounts = append(redis.VolumeMounts, corev1.VolumeMount{Name: RedisACLUsersVolume, MountPath: RedisACLUsersDir, ReadOnly: true})
		}
	}
	containers := []corev1.Container{redis}
	if pod.MonitorImage != "" {
		containers = append(containers, redisExporterContainer(rc, pod.MonitorImage))
	}
	return containers
}

// redisContainerSecurityContext is the security context of the redis and the exporter
// containers: no privilege escalation, no capability, and a read-only root file system.
// redis-server writes only to its data volume (RedisDataDir: nodes.conf, the AOF, a
// replica's or a BGSAVE's RDB) and the start script only to the in-memory RedisAuthDir;
// the exporter writes nothing.
func redisContainerSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		ReadOnlyRootFilesystem:   ptr.To(true),
	}
}

// redisExporterContainer is the Prometheus exporter sidecar (oliver006/redis_exporter). It
// reads the password from its password file (REDIS_PASSWORD_FILE, the applied-password
// Secret's RedisExporterPasswordFileKey), never from its arguments or environment. The
// exporter reads that file at start and again on each request to RedisExporterReloadPath;
// its readiness probe makes that request every 10 s, so after a rotation it picks up the new
// password within 10 s of the kubelet refreshing the volume, without a restart. An exporter
// older than v1.50.0 has no such endpoint (its index page answers the probe) and keeps the
// password it started with. With tls it scrapes RedisExporterTLSAddr and verifies the node
// against the CA (REDIS_EXPORTER_TLS_CA_CERT_FILE, its --tls-ca-cert-file); the certificate
// names localhost; with tlsClientAuth "yes" it presents the node's certificate
// (REDIS_EXPORTER_TLS_CLIENT_CERT_FILE and _KEY_FILE). With acl it authenticates as
// RedisExporterUser (REDIS_USER), its password file then from the users Secret.
func redisExporterContainer(rc *redisv1alpha1.RedisCluster, image string) corev1.Container {
	tlsClientAuth, acl := RedisTLSClientAuth(rc), RedisACLEnabled(rc)
	if RedisOnNodePorts(rc) {
		tlsClientAuth = "" // the node's Unix socket: plain text, it never leaves the pod
	}
	c := corev1.Container{
		Name:  "exporter",
		Image: image,
		Env: []corev1.EnvVar{
			{Name: "REDIS_ADDR", Value: RedisExporterAddr},
			{Name: "REDIS_PASSWORD_FILE", Value: RedisExporterPasswordFile},
		},
		Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: RedisExporterPort, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: RedisExporterReloadPath, Port: intstr.FromInt32(RedisExporterPort),
			}},
			PeriodSeconds: 10, TimeoutSeconds: 3,
		},
		VolumeMounts: []corev1.VolumeMount{{Name: RedisExporterAuthVolume, MountPath: RedisExporterAuthDir, ReadOnly: true}},
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
		},
		SecurityContext: redisContainerSecurityContext(),
	}
	if tlsClientAuth != "" {
		c.Env[0].Value = RedisExporterTLSAddr
		c.Env = append(c.Env, corev1.EnvVar{Name: "REDIS_EXPORTER_TLS_CA_CERT_FILE", Value: RedisTLSCAFile})
		c.VolumeMounts = append(c.VolumeMounts, redisTLSMount())
	}
	if tlsClientAuth == tlsAuthClientsRequired {
		c.Env = append(c.Env,
			corev1.EnvVar{Name: "REDIS_EXPORTER_TLS_CLIENT_CERT_FILE", Value: RedisTLSCertFile},
			corev1.EnvVar{Name: "REDIS_EXPORTER_TLS_CLIENT_KEY_FILE", Value: RedisTLSKeyFile})
	}
	if acl {
		c.Env = append(c.Env, corev1.EnvVar{Name: "REDIS_USER", Value: RedisExporterUser})
	}
	if RedisOnNodePorts(rc) {
		c.Env[0].Value = RedisExporterSocketAddr
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: RedisSocketVolume, MountPath: RedisSocketDir})
	}
	return c
}

func redisVolumes(rc *redisv1alpha1.RedisCluster, pod redisv1alpha1.PodSpec) []corev1.Volume {
	volumes := []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: RedisConfigMapName(rc)},
	}}}, {Name: RedisMembersVolume, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		// Optional: a new cluster's pods start before the operator writes it.
		LocalObjectReference: corev1.LocalObjectReference{Name: RedisMembersConfigMapName(rc)}, Optional: ptr.To(true),
	}}}, {Name: RedisAuthVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
		Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Mi")),
	}}}, {Name: RedisPasswordVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: RedisPasswordSecretName(rc), Items: []corev1.KeyToPath{{Key: RedisPasswordKey, Path: RedisPasswordKey}},
		DefaultMode: ptr.To[int32](0o440), // readable by the pod's fsGroup only
	}}}}
	if pod.MonitorImage != "" {
		// The exporter follows its user's password through that user's applied-password
		// record: the default user's, or with users its own.
		passwords := RedisAppliedPasswordSecretName(rc)
		if RedisACLEnabled(rc) {
			passwords = RedisUserAppliedSecretName(rc, RedisUsersExporterKey)
		}
		volumes = append(volumes, corev1.Volume{Name: RedisExporterAuthVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  passwords,
			Items:       []corev1.KeyToPath{{Key: RedisExporterPasswordFileKey, Path: "password-file.json"}},
			DefaultMode: ptr.To[int32](0o440),
		}}})
	}
	if RedisTLSEnabled(rc) {
		volumes = append(volumes, redisTLSVolume(rc))
	}
	if RedisOnNodePorts(rc) {
		volumes = append(volumes, corev1.Volume{Name: RedisSocketVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: ptr.To(resource.MustParse("1Mi")),
		}}})
	}
	if RedisACLEnabled(rc) {
		volumes = append(volumes, redisUsersVolume(rc))
		if v := redisACLUsersVolume(rc); v != nil {
			volumes = append(volumes, *v)
		}
	}
	switch redisVolumeType(pod) {
	case "hostPath":
		volumes = append(volumes, corev1.Volume{Name: RedisDataVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: "/var/lib/middleware-operator/redis/" + rc.Namespace + "/" + rc.Name, Type: ptr.To(corev1.HostPathDirectoryOrCreate),
		}}})
	case "nfs":
		volumes = append(volumes, corev1.Volume{Name: RedisDataVolume, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: pod.Volumes.PersistentVolumeClaimName,
		}}})
	}
	return volumes
}

// redisAffinity is the user's affinity, or by default a preference to spread pods over nodes.
func redisAffinity(rc *redisv1alpha1.RedisCluster, user *corev1.Affinity) *corev1.Affinity {
	if user != nil && (user.NodeAffinity != nil || user.PodAffinity != nil || user.PodAntiAffinity != nil) {
		return user
	}
	return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 100,
			PodAffinityTerm: corev1.PodAffinityTerm{
				TopologyKey:   "kubernetes.io/hostname",
				LabelSelector: &metav1.LabelSelector{MatchLabels: objectlabels.SelectorLabels(objectlabels.RedisClusterKind, rc.Name)},
			},
		}},
	}}
}

func redisMeta(rc *redisv1alpha1.RedisCluster, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: rc.Namespace, Labels: objectlabels.ObjectLabels(objectlabels.RedisClusterKind, rc.Name)}
}

// RedisPodDNSName is a pod's stable DNS name through the headless Service.
func RedisPodDNSName(rc *redisv1alpha1.RedisCluster, pod string) string {
	return fmt.Sprintf("%s.%s.%s.svc.cluster.local", pod, RedisHeadlessServiceName(rc), rc.Namespace)
}
