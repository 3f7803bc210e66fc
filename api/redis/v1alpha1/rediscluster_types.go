package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// UpdateStrategyType says how new masters receive slots when the cluster scales out.
// +kubebuilder:validation:Enum=AutoReceive;AssignReceive
type UpdateStrategyType string

const (
	// AutoReceive rebalances slots evenly over every master.
	AutoReceive UpdateStrategyType = "AutoReceive"
	// AssignReceive moves exactly the slots listed in assignStrategies.
	AssignReceive UpdateStrategyType = "AssignReceive"
)

// RedisClusterSpec is the desired Redis Cluster.
// +kubebuilder:validation:XValidation:rule="self.replicas / (1 + (has(self.replicasPerMaster) ? self.replicasPerMaster : 1)) >= 3",message="spec.replicas is too small: Redis Cluster needs at least 3 masters, so replicas must be at least 3 * (1 + replicasPerMaster) (6 with one replica per master)",fieldPath=".replicas"
// +kubebuilder:validation:XValidation:rule="!has(self.updateStrategy) || self.updateStrategy.type != 'AssignReceive' || (has(self.updateStrategy.assignStrategies) && size(self.updateStrategy.assignStrategies) > 0)",message="spec.updateStrategy.assignStrategies is required when spec.updateStrategy.type is AssignReceive: list the slots to move and the nodes to take them from",fieldPath=".updateStrategy"
// +kubebuilder:validation:XValidation:rule="(has(self.acl) && has(self.acl.enabled) && self.acl.enabled) == (has(oldSelf.acl) && has(oldSelf.acl.enabled) && oldSelf.acl.enabled)",message="spec.acl.enabled cannot change on an existing RedisCluster: running nodes keep the users they started with and replicas authenticate as them; create a new RedisCluster with the setting you want",fieldPath=".acl"
// +kubebuilder:validation:XValidation:rule="(has(self.tls) && has(self.tls.enabled) && self.tls.enabled) == (has(oldSelf.tls) && has(oldSelf.tls.enabled) && oldSelf.tls.enabled)",message="spec.tls.enabled cannot change on an existing RedisCluster: nodes with and without TLS cannot reach each other, so a running cluster cannot switch; create a new RedisCluster with the setting you want",fieldPath=".tls"
// +kubebuilder:validation:XValidation:rule="(has(self.tls) && has(self.tls.requireClientCertificates) && self.tls.requireClientCertificates) == (has(oldSelf.tls) && has(oldSelf.tls.requireClientCertificates) && oldSelf.tls.requireClientCertificates)",message="spec.tls.requireClientCertificates cannot change on an existing RedisCluster: the nodes read it at start; create a new RedisCluster with the setting you want (and restore a backup into it)",fieldPath=".tls"
// +kubebuilder:validation:XValidation:rule="has(self.restore) == has(oldSelf.restore) && (!has(self.restore) || self.restore == oldSelf.restore)",message="spec.restore cannot be added, changed or removed on an existing RedisCluster: only a new cluster restores; create a new RedisCluster with spec.restore",fieldPath=".restore"
// +kubebuilder:validation:XValidation:rule="!has(self.memory) || !has(self.memory.maxMemory) || !has(self.pod) || size(self.pod) == 0 || !has(self.pod[0].resources) || !has(self.pod[0].resources.limits) || !('memory' in self.pod[0].resources.limits) || quantity(string(self.memory.maxMemory)).isLessThan(quantity(string(self.pod[0].resources.limits['memory'])))",message="spec.memory.maxMemory must be below the redis container's memory limit (spec.pod[0].resources.limits.memory), which must also hold fork copy-on-write, replication and client buffers: lower maxMemory, raise the limit, or use maxMemoryPercent",fieldPath=".memory.maxMemory"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscale) || !has(self.updateStrategy) || self.updateStrategy.type != 'AssignReceive'",message="spec.autoscale needs spec.updateStrategy.type AutoReceive: the shards the autoscaler adds get their slots by rebalancing, not by assignStrategies",fieldPath=".autoscale"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscale) || self.autoscale.maxMasters * (1 + (has(self.replicasPerMaster) ? self.replicasPerMaster : 1)) <= 1000",message="spec.autoscale.maxMasters is too large: maxMasters x (1 + replicasPerMaster) nodes must stay at most 1000",fieldPath=".autoscale.maxMasters"
// +kubebuilder:validation:XValidation:rule="!has(self.writeSafety) || self.writeSafety != 'Strict' || !has(self.replicasPerMaster) || self.replicasPerMaster >= 1",message="spec.writeSafety Strict needs at least one replica per master (spec.replicasPerMaster 1 or more): a master with no replica would refuse every write; set replicasPerMaster or use writeSafety Default",fieldPath=".writeSafety"
// +kubebuilder:validation:XValidation:rule="(has(self.externalAccess) && self.externalAccess.type == 'NodePort') == (has(oldSelf.externalAccess) && oldSelf.externalAccess.type == 'NodePort') && (!has(self.externalAccess) || !has(oldSelf.externalAccess) || self.externalAccess.type != 'NodePort' || self.externalAccess.firstNodePort == oldSelf.externalAccess.firstNodePort)",message="spec.externalAccess type NodePort and its firstNodePort cannot be set, changed or removed on an existing RedisCluster: its nodes listen on their node ports, which replicas and the cluster bus use too; create a new RedisCluster with the setting you want (and restore a backup into it)",fieldPath=".externalAccess"
// +kubebuilder:validation:XValidation:rule="!has(self.externalAccess) || self.externalAccess.type != 'NodePort' || !has(self.externalAccess.firstNodePort) || self.externalAccess.firstNodePort + (has(self.autoscale) ? self.autoscale.maxMasters * (1 + (has(self.replicasPerMaster) ? self.replicasPerMaster : 1)) : self.replicas) <= 55536",message="spec.externalAccess.firstNodePort is too high for the cluster's nodes: pod i listens on firstNodePort + i and its cluster bus on that + 10000, which must stay at most 65535; lower firstNodePort (the ports must also be inside the node port range, 30000-32767 by default)",fieldPath=".externalAccess.firstNodePort"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.pod) || size(oldSelf.pod) == 0 || !has(oldSelf.pod[0].volumes) || !has(oldSelf.pod[0].volumes.size) || !has(self.pod) || size(self.pod) == 0 || !has(self.pod[0].volumes) || !has(self.pod[0].volumes.size) || !quantity(string(self.pod[0].volumes.size)).isLessThan(quantity(string(oldSelf.pod[0].volumes.size)))",message="spec.pod[0].volumes.size cannot shrink: a claim can only grow; set it back to at least its old size, or create a new RedisCluster with smaller volumes and restore a backup into it",fieldPath=".pod"
type RedisClusterSpec struct {
	// Replicas is the total number of Redis nodes, masters and replicas together.
	// +kubebuilder:validation:Minimum=3
	// +kubebuilder:validation:Maximum=1000
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Redis Nodes",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Replicas int32 `json:"replicas"`

	// ReplicasPerMaster is the number of replicas each master gets. Masters are
	// replicas / (1 + replicasPerMaster); leftover nodes become extra replicas, as
	// `redis-cli --cluster create` does.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=5
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replicas per Master"
	ReplicasPerMaster *int32 `json:"replicasPerMaster,omitempty"`

	// Pause stops every change to the cluster (scaling, healing, upgrades) until it is false
	// again; the status says the cluster is paused.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pause",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:booleanSwitch"}
	Pause bool `json:"pause,omitempty"`

	// Finalizers says what happens to the data: foreground deletes the PersistentVolumeClaims
	// of the nodes a scale in removes, and all of them when the RedisCluster is deleted;
	// anything else keeps them.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Data on Deletion"
	Finalizers string `json:"finalizers,omitempty"`

	// Repository is the Redis image repository, for example library/redis.
	// +kubebuilder:default="redis"
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([a-z0-9._/:-]*[a-z0-9])?$')",message="spec.repository must be an image repository (lowercase letters, digits, '.', '_', '-', '/' and a registry port), for example redis or registry.example.com:5000/redis"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image Repository"
	Repository string `json:"repository,omitempty"`

	// Version is the Redis image tag.
	// +kubebuilder:default="7.0.15"
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9_][A-Za-z0-9_.-]*$')",message="spec.version must be an image tag (letters, digits, '_', '.', '-'), for example 7.0.15"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Redis Version"
	Version string `json:"version,omitempty"`

	// UpdateStrategy says how slots move when masters are added.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Update Strategy"
	UpdateStrategy UpdateStrategy `json:"updateStrategy,omitempty"`

	// Pod configures the Redis pods. Only the first entry is used (the seed's list form is
	// kept so its manifests apply unchanged).
	// +kubebuilder:validation:MaxItems=1
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Pod"
	Pod []PodSpec `json:"pod,omitempty"`

	// PasswordSecret names a Secret in the same namespace whose key "password" is the Redis
	// password. When empty, a Secret named <name>-password is generated once and kept.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="spec.passwordSecret must be a Secret's name (lowercase letters, digits, '-' and '.'), for example cache-auth"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Password Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	PasswordSecret string `json:"passwordSecret,omitempty"`

	// NetworkPolicy limits who may reach the Redis pods. On unless enabled is false: clients
	// (those listed, else the pods of the cluster's own namespace) reach the client port
	// 6379, only the cluster's own pods reach the cluster bus port 16379, the operator's
	// namespace reaches 6379 for its admin commands, and the exporter port 9121 only from
	// metricsNamespace.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Network Policy"
	NetworkPolicy *NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// ExternalAccess exposes each Redis node on an address of its own for clients outside
	// the Kubernetes cluster network (a Service per node), and makes the nodes announce those
	// addresses in CLUSTER SLOTS, MOVED and ASK. Off when absent. See
	// docs/rediscluster.md#external-access.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="External Access"
	ExternalAccess *ExternalAccessSpec `json:"externalAccess,omitempty"`

	// TLS encrypts client connections, replication and the cluster bus. Off unless enabled
	// is true; when on, the nodes refuse plain-text connections.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="TLS"
	TLS *TLSSpec `json:"tls,omitempty"`

	// ACL gives the operator and the exporter Redis users of their own, each allowed only
	// the commands it needs, and restricts the application's default user. Off unless
	// enabled is true.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="ACL users"
	ACL *ACLSpec `json:"acl,omitempty"`

	// Memory sets how much memory Redis fills with data (maxmemory) and what it does when
	// full (maxmemory-policy). With a memory limit on the redis container
	// (spec.pod[0].resources.limits.memory), maxmemory is a share of it (45% unless
	// maxMemoryPercent or maxMemory says otherwise); without one, no maxmemory is set unless
	// maxMemory is given. A redis.conf of spec.pod[0].configmap that sets maxmemory or
	// maxmemory-policy wins over these fields. Changes reach running nodes without a restart.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Memory"
	Memory *MemorySpec `json:"memory,omitempty"`

	// Restore starts a new cluster from a backup: as many masters as the backup has shards,
	// the backup's slot map, and each shard's keys loaded into its master before the cluster
	// is Ready. Only a new cluster restores: the field cannot be added, changed or removed
	// later.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Restore"
	Restore *RestoreSpec `json:"restore,omitempty"`

	// Autoscale lets the operator choose the number of masters from their memory: when the
	// fullest master stays above targetPercent of its maxmemory, a shard (a master and its
	// replicas) is added and slots move to it; with scaleIn, a shard is removed when the
	// data would stay well below the target on one master fewer. While it is set, the
	// operator owns the number of nodes: spec.replicas gives the starting number of
	// masters (bounded by minMasters and maxMasters), status.autoscale.masters the current
	// one, and the cluster runs masters x (1 + replicasPerMaster) nodes. It needs a
	// maxmemory (a memory limit on the redis container, or spec.memory.maxMemory).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Autoscale"
	Autoscale *AutoscaleSpec `json:"autoscale,omitempty"`

	// WriteSafety says what an acknowledged write is worth when a master is cut off from
	// the rest of the cluster. Default keeps Redis's behaviour: a master in the minority
	// of a network partition goes on acknowledging writes until cluster-node-timeout (5 s)
	// has passed, and those writes are lost when its replica is promoted on the other side
	// (docs/rediscluster.md, "Network partitions"). Strict sets min-replicas-to-write 1 and
	// min-replicas-max-lag 2 on every node (replicas too, as a replica becomes a master by
	// a failover): a master stops acknowledging writes within about 3 s of losing its last
	// replica, so a cut-off master loses at most those seconds of writes; the cost is that
	// a shard refuses writes (NOREPLICAS) while its master has no live replica: while a
	// replica restarts, during an upgrade's failover until the old master is back as a
	// replica, after a failure until a replica rejoins. An application that needs no
	// acknowledged write lost follows each write with WAIT 1 (in either mode). Changes
	// reach running nodes without a restart. Unset is Default (no server-side default: an
	// upgrade of the operator leaves existing specs as they were).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Write Safety"
	WriteSafety WriteSafety `json:"writeSafety,omitempty"`

	// Archive keeps a continuous archive of every shard's writes in an object store, for
	// restores to any second (spec.restore.archive of a new cluster): per shard a base
	// snapshot, then the shard's replication stream in segments closed every 500 ms. The
	// operator follows a replica of each shard where there is one (the master otherwise),
	// costing it about 33 MiB of memory per shard. Off unless set.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Archive"
	Archive *ArchiveSpec `json:"archive,omitempty"`
}

// ArchiveSpec says where a cluster's continuous archive goes.
type ArchiveSpec struct {
	// Destination is the object store of the archive: the folder <cluster>/archive under
	// destination.path (the cluster's namespace when empty) holds, per shard, its timelines:
	// each a base snapshot and the segments that continue it.
	// +required
	Destination ObjectStore `json:"destination"`
	// BaseEvery is how often each shard's archive starts again from a new base snapshot (a
	// new timeline), the old timeline going on until the new base is taken, so every second
	// stays restorable: a restore replays at most this much of the archive after its base,
	// and retention can delete what came before. 24h when unset.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('720h')",message="spec.archive.baseEvery must be a duration between 10s and 720h, for example 24h"
	// +optional
	BaseEvery *metav1.Duration `json:"baseEvery,omitempty"`
	// Retention is how far back restores must reach: each shard keeps the newest timeline
	// whose base is at least this old and every later one, and the older timelines (base
	// and segments) are deleted from the object store after each new base.
	// status.archive.recoverableFrom says the earliest time a restore can target. Everything
	// is kept when unset.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="spec.archive.retention must be a duration of at least 10s, for example 168h"
	// +optional
	Retention *metav1.Duration `json:"retention,omitempty"`
}

// WriteSafety is what a master does with writes when it cannot reach its replicas.
// +kubebuilder:validation:Enum=Default;Strict
type WriteSafety string

// The write-safety modes.
const (
	// WriteSafetyDefault keeps Redis's behaviour: a master acknowledges writes whether or not
	// a replica receives them.
	WriteSafetyDefault WriteSafety = "Default"
	// WriteSafetyStrict makes a master refuse writes while no replica has acknowledged its
	// replication stream within the last 2 seconds.
	WriteSafetyStrict WriteSafety = "Strict"
)

// AutoscaleSpec is the memory autoscaler's target and bounds.
// +kubebuilder:validation:XValidation:rule="self.maxMasters >= self.minMasters",message="spec.autoscale.maxMasters must be at least minMasters",fieldPath=".maxMasters"
type AutoscaleSpec struct {
	// TargetPercent is the share of maxmemory the fullest master should stay below, in
	// percent (70 when unset).
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=95
	// +optional
	TargetPercent *int32 `json:"targetPercent,omitempty"`
	// MinMasters is the fewest masters the autoscaler leaves (at least 3).
	// +kubebuilder:validation:Minimum=3
	// +kubebuilder:validation:Maximum=500
	// +required
	MinMasters int32 `json:"minMasters"`
	// MaxMasters is the most masters the autoscaler adds up to.
	// +kubebuilder:validation:Minimum=3
	// +kubebuilder:validation:Maximum=500
	// +required
	MaxMasters int32 `json:"maxMasters"`
	// Sustain is how long the masters must stay past a threshold before the autoscaler acts,
	// so that a burst is no reason to scale (5m when unset).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="spec.autoscale.sustain must be a duration between 0s and 24h, for example 5m"
	// +optional
	Sustain *metav1.Duration `json:"sustain,omitempty"`
	// CoolDown is how long after a change the autoscaler changes nothing else, so that the
	// slot moves and the new nodes' memory settle first (10m when unset).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="spec.autoscale.coolDown must be a duration between 0s and 24h, for example 10m"
	// +optional
	CoolDown *metav1.Duration `json:"coolDown,omitempty"`
	// ScaleIn lets the autoscaler remove a shard when the data would stay below 80% of the
	// target once spread over one master fewer. Off unless true.
	// +optional
	ScaleIn bool `json:"scaleIn,omitempty"`
}

// RestoreSpec names the backup a new RedisCluster starts from: a RedisBackup of the same
// namespace, or a backup's folder in an object store (a backup of another namespace, or one
// whose RedisBackup is gone).
// +kubebuilder:validation:XValidation:rule="has(self.archive) || has(self.backup) != has(self.source)",message="spec.restore needs exactly one of backup (a RedisBackup's name) and source (the backup's folder in an object store)"
// +kubebuilder:validation:XValidation:rule="!has(self.archive) || (!has(self.backup) && !has(self.source))",message="spec.restore.archive restores from the archive's own base snapshots: remove spec.restore.backup and spec.restore.source"
type RestoreSpec struct {
	// Backup is the name of a Completed RedisBackup in the same namespace.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="spec.restore.backup must be a RedisBackup's name (lowercase letters, digits, '-' and '.'), for example cache-nightly"
	// +optional
	Backup string `json:"backup,omitempty"`
	// Source is the backup's folder: source.path is the path of the backup's
	// status.location (the folder holding manifest.json).
	// +optional
	Source *ObjectStore `json:"source,omitempty"`
	// Archive restores from a cluster's continuous archive (spec.archive) to a target time:
	// each shard's base snapshot, then its archived writes replayed up to the target.
	// +optional
	Archive *ArchiveRestoreSpec `json:"archive,omitempty"`
}

// ArchiveRestoreSpec names an archive and the time to restore to.
type ArchiveRestoreSpec struct {
	// Source is the archive's object store: the spec.archive.destination of the archived
	// cluster, with the same path.
	// +required
	Source ObjectStore `json:"source"`
	// Cluster is the name of the archived RedisCluster (its archive's folder under
	// source.path).
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="spec.restore.archive.cluster must be the archived RedisCluster's name (lowercase letters, digits and '-'), for example cache"
	// +required
	Cluster string `json:"cluster"`
	// TargetTime is the time to restore to, RFC 3339 (every write the archive received up
	// to it, none after), or latest: everything archived.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self == 'latest' || self.matches('^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})$')",message="spec.restore.archive.targetTime must be latest or an RFC 3339 time, for example 2026-11-28T23:15:00Z or 2026-11-28T23:15:00.250+01:00"
	// +required
	TargetTime string `json:"targetTime"`
}

// MaxMemoryPolicy is a Redis maxmemory-policy: what a node does when a write would take it
// above maxmemory.
// +kubebuilder:validation:Enum=noeviction;allkeys-lru;allkeys-lfu;allkeys-random;volatile-lru;volatile-lfu;volatile-random;volatile-ttl
type MaxMemoryPolicy string

// MaxMemoryPolicyNoEviction refuses writes with an OOM error when maxmemory is reached.
const MaxMemoryPolicyNoEviction MaxMemoryPolicy = "noeviction"

// MemorySpec configures maxmemory and maxmemory-policy.
// +kubebuilder:validation:XValidation:rule="!(has(self.maxMemoryPercent) && has(self.maxMemory))",message="spec.memory: set maxMemoryPercent or maxMemory, not both"
type MemorySpec struct {
	// MaxMemoryPercent is maxmemory as a share of the redis container's memory limit, in
	// percent (45 when unset). The rest of the limit holds what maxmemory does not count:
	// the pages a fork for an RDB snapshot or an AOF rewrite copies while writes go on (up
	// to as much again as the data), replication and client output buffers, and
	// fragmentation. Without a memory limit it has no effect.
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=95
	// +optional
	MaxMemoryPercent *int32 `json:"maxMemoryPercent,omitempty"`
	// MaxMemory is maxmemory itself, for example 700Mi. It must be below the memory limit
	// when there is one.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity('1Mi')) >= 0",message="spec.memory.maxMemory must be at least 1Mi, for example 700Mi"
	// +optional
	MaxMemory *resource.Quantity `json:"maxMemory,omitempty"`
	// Policy is maxmemory-policy: noeviction (the default) refuses writes with an OOM
	// error when maxmemory is reached, so no key is ever dropped; a cache opts in to
	// eviction with allkeys-lru or another policy.
	// +optional
	Policy MaxMemoryPolicy `json:"policy,omitempty"`
}

// ACLSpec configures the Redis users of a RedisCluster.
// +kubebuilder:validation:XValidation:rule="(has(self.enabled) && self.enabled) || ((!has(self.defaultUserRules) || size(self.defaultUserRules) == 0) && (!has(self.users) || size(self.users) == 0))",message="spec.acl.defaultUserRules and spec.acl.users need spec.acl.enabled: true (without it Redis has no users, only the password of spec.passwordSecret)"
type ACLSpec struct {
	// Enabled turns the users on. The application keeps the default user and the password
	// Secret's password, with defaultUserRules. The operator authenticates as mwo-operator
	// (the cluster topology, slot moves, replication, backups, restores, memory settings,
	// TLS reloads and password rotations: no command of the application's), replicas
	// authenticate to their masters as mwo-operator, and the exporter as mwo-exporter
	// (statistics only, no keys). Their passwords are generated into the Secret
	// <name>-users. It is set when the RedisCluster is created and cannot change
	// afterwards.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// DefaultUserRules are the ACL rules of the application's default user, as ACL SETUSER
	// takes them, for example "~* &* +@all -@dangerous +info -flushall". When empty:
	// "~* &* +@all -@dangerous +info", every key, channel and command but the dangerous ones
	// (CONFIG, ACL changes, CLUSTER changes, KEYS, FLUSHALL, FLUSHDB, MIGRATE, RESTORE,
	// MONITOR, DEBUG, SHUTDOWN, REPLICAOF, CLIENT KILL/LIST, SORT...), with INFO kept for
	// the readiness probe and the clients that read it. "+@all" gives them back. The
	// password comes from spec.passwordSecret, never from the rules. Changing them restarts
	// the pods one at a time, as an upgrade does.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.matches('^[ -~]*$') && !self.contains('\"') && !self.contains(\"'\") && !self.contains('\\\\')",message="spec.acl.defaultUserRules must be ACL rules on one line, without quotes or backslashes, for example ~* &* +@all -@dangerous +info"
	// +kubebuilder:validation:XValidation:rule="self.matches('^ *([(]?((?i:allkeys|resetkeys|allchannels|resetchannels|allcommands|nocommands|clearselectors|sanitize-payload|skip-sanitize-payload)|(~|%[RWrw]{1,2}~|&)[!-~]+|[+-]@?[A-Za-z0-9_][!-~]*)[)]?( +|$))*$')",message="spec.acl.defaultUserRules must be ACL rules separated by spaces, each one of ~pattern, %R~pattern, %W~pattern, %RW~pattern, &pattern, +command, -command, +@category, -@category, allkeys, resetkeys, allchannels, resetchannels, allcommands, nocommands, (selector), without a space after ~, & or +; for example ~* &* +@all -@dangerous +info"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^| )[(]?(~|%[RWrw]{1,2}~|&|[+-]@?)[)]?( |$)')",message="spec.acl.defaultUserRules has ~, %R~, &, +, -, +@ or -@ followed by a space: write the pattern, command or category right after it, for example ~* not ~ *, +get not + get"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^| )([<>#!]|(?i:nopass|resetpass|reset|on|off)( |$))')",message="spec.acl.defaultUserRules must not set the password or switch the user (>, <, #, !, nopass, resetpass, reset, on, off): the password comes from spec.passwordSecret; remove that rule"
	// +optional
	DefaultUserRules string `json:"defaultUserRules,omitempty"`

	// Users are more Redis users for the application, each with its own rules and its
	// password in a Secret. A changed password is rotated onto the running nodes as the
	// others are; changing the list or a user's rules restarts the pods one at a time, as
	// an upgrade does.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	// +optional
	Users []ACLUser `json:"users,omitempty"`
}

// ACLUser is a Redis user of the application.
type ACLUser struct {
	// Name is the Redis user name. "default" is configured by defaultUserRules, and the
	// names starting with "mwo-" are the operator's.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9][A-Za-z0-9._-]*$')",message="spec.acl.users[].name must be letters, digits, '.', '_' and '-', starting with a letter or digit, for example app-reader"
	// +kubebuilder:validation:XValidation:rule="self != 'default' && !self.startsWith('mwo-')",message="spec.acl.users[].name must not be default (set spec.acl.defaultUserRules instead) nor start with mwo- (the operator's users)"
	// +required
	Name string `json:"name"`

	// Rules are the user's ACL rules, as ACL SETUSER takes them, for example
	// "~cache:* +@read +@write -@dangerous". The user starts from nothing: no key, channel
	// or command it is not given here.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.matches('^[ -~]*$') && !self.contains('\"') && !self.contains(\"'\") && !self.contains('\\\\')",message="spec.acl.users[].rules must be ACL rules on one line, without quotes or backslashes, for example ~cache:* +@read +@write"
	// +kubebuilder:validation:XValidation:rule="self.matches('^ *([(]?((?i:allkeys|resetkeys|allchannels|resetchannels|allcommands|nocommands|clearselectors|sanitize-payload|skip-sanitize-payload)|(~|%[RWrw]{1,2}~|&)[!-~]+|[+-]@?[A-Za-z0-9_][!-~]*)[)]?( +|$))+$')",message="spec.acl.users[].rules must be ACL rules separated by spaces, each one of ~pattern, %R~pattern, %W~pattern, %RW~pattern, &pattern, +command, -command, +@category, -@category, allkeys, resetkeys, allchannels, resetchannels, allcommands, nocommands, (selector), without a space after ~, & or +; for example ~cache:* +@read +@write"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^| )[(]?(~|%[RWrw]{1,2}~|&|[+-]@?)[)]?( |$)')",message="spec.acl.users[].rules has ~, %R~, &, +, -, +@ or -@ followed by a space: write the pattern, command or category right after it, for example ~* not ~ *, +get not + get"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^| )([<>#!]|(?i:nopass|resetpass|reset|on|off)( |$))')",message="spec.acl.users[].rules must not set the password or switch the user (>, <, #, !, nopass, resetpass, reset, on, off): the password comes from passwordSecret; remove that rule"
	// +required
	Rules string `json:"rules"`

	// PasswordSecret is the Secret in the same namespace, and its key, holding the user's
	// password.
	// +required
	PasswordSecret SecretKeyRef `json:"passwordSecret"`
}

// SecretKeyRef names a key of a Secret in the RedisCluster's namespace.
type SecretKeyRef struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="passwordSecret.name must be a Secret's name (lowercase letters, digits, '-' and '.'), for example app-reader-password"
	// +required
	Name string `json:"name"`
	// Key is the key of the Secret holding the password.
	// +kubebuilder:default=password
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="passwordSecret.key must be a Secret key (letters, digits, '-', '_' and '.'), for example password"
	// +optional
	Key string `json:"key,omitempty"`
}

// TLSSpec configures TLS for a RedisCluster.
// +kubebuilder:validation:XValidation:rule="!has(self.secretName) || size(self.secretName) == 0 || (has(self.enabled) && self.enabled)",message="spec.tls.secretName is set but spec.tls.enabled is not true: set enabled: true to use the certificate, or remove secretName",fieldPath=".secretName"
// +kubebuilder:validation:XValidation:rule="!has(self.requireClientCertificates) || !self.requireClientCertificates || (has(self.enabled) && self.enabled)",message="spec.tls.requireClientCertificates is true but spec.tls.enabled is not: client certificates need TLS; set enabled: true (on a new RedisCluster) or remove requireClientCertificates",fieldPath=".requireClientCertificates"
// +kubebuilder:validation:XValidation:rule="!has(self.issuerRef) || (has(self.enabled) && self.enabled)",message="spec.tls.issuerRef is set but spec.tls.enabled is not true: set enabled: true (on a new RedisCluster) or remove issuerRef",fieldPath=".issuerRef"
// +kubebuilder:validation:XValidation:rule="!has(self.issuerRef) || !has(self.secretName) || size(self.secretName) == 0",message="spec.tls.issuerRef and spec.tls.secretName are both set: keep issuerRef for a certificate cert-manager issues, or secretName for your own Secret",fieldPath=".issuerRef"
// +kubebuilder:validation:XValidation:rule="has(self.issuerRef) == has(oldSelf.issuerRef)",message="spec.tls.issuerRef can be set or removed only when the RedisCluster is created (the nodes would stop trusting each other's certificates): create a new RedisCluster, or keep it as it was",fieldPath=".issuerRef"
type TLSSpec struct {
	// Enabled turns TLS on: redis-server listens on 6379 with TLS only (plain text is
	// refused), and replication, the cluster bus, slot migration, the operator's admin
	// connections and the exporter use TLS. It is set when the RedisCluster is created and
	// cannot change afterwards.
	// +kubebuilder:default=false
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// SecretName names a Secret of type kubernetes.io/tls in the same namespace with the keys
	// ca.crt, tls.crt and tls.key: the certificate every node presents (to clients, and to
	// other nodes as a client certificate, so it needs both server and client
	// authentication usages) and the CA that signed it. It must name
	// <name>-client.<namespace>.svc, and its keys and its chain's must be at least RSA 2048
	// bits or ECDSA P-256; the operator verifies both. When empty, the operator
	// generates a CA (<name>-tls-ca) and a certificate (<name>-tls) and renews the
	// certificate before it expires. Changing it rolls the pods one at a time: keep the same
	// CA (or list the old and the new CA in ca.crt) so that rolled and waiting nodes still
	// trust each other on the cluster bus.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="spec.tls.secretName must be a Secret's name (lowercase letters, digits, '-' and '.'), for example cache-tls"
	// +optional
	SecretName string `json:"secretName,omitempty"`

	// RequireClientCertificates makes every node refuse a client that presents no
	// certificate signed by the cluster's CA (redis.conf tls-auth-clients yes); off, a client
	// needs only the CA and the password, and a certificate it presents must be valid
	// (tls-auth-clients optional). The operator, the readiness probe and the exporter present
	// the nodes' certificate; applications need a certificate of that CA with the client
	// authentication usage. It is set when the RedisCluster is created and cannot change
	// afterwards.
	// +optional
	RequireClientCertificates bool `json:"requireClientCertificates,omitempty"`

	// CARotationOverlap is how long each stage of a rotation of the generated CA lasts at
	// least: first the new CA is added to ca.crt of <name>-tls next to the old one, then the
	// nodes present a certificate of the new CA while ca.crt still lists both, then the old
	// CA is dropped. Clients that read ca.crt from the Secret (a mounted volume is refreshed
	// within about a minute) must pick up each change within it. A rotation starts when the
	// CA is two thirds through its life, or when the annotation
	// redis.middleware-operator.io/rotate-ca is given a new value. It has no effect with
	// secretName (the user rotates that CA).
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="spec.tls.caRotationOverlap must be between 1s and 24h, for example 5m"
	// +optional
	CARotationOverlap *metav1.Duration `json:"caRotationOverlap,omitempty"`

	// IssuerRef names a cert-manager Issuer or ClusterIssuer that issues the nodes'
	// certificate instead of the operator's CA: the operator keeps a cert-manager
	// Certificate <name>-tls (the names of the generated certificate, server and client
	// authentication usages, an ECDSA P-256 key) whose Secret <name>-tls the pods mount;
	// cert-manager renews it and the nodes load each renewal without a restart. No CA key
	// is then kept by the operator. cert-manager must be installed (its Certificate kind
	// served): without it the TLS condition says so and nothing is created. It cannot be
	// combined with secretName, and it can be set or removed only when the RedisCluster is
	// created.
	// +optional
	IssuerRef *IssuerReference `json:"issuerRef,omitempty"`
}

// IssuerReference names a cert-manager issuer.
type IssuerReference struct {
	// Name is the issuer's name.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="spec.tls.issuerRef.name must be an issuer's name (lowercase letters, digits, '-' and '.'), for example redis-ca"
	// +required
	Name string `json:"name"`
	// Kind is Issuer (in the RedisCluster's namespace) or ClusterIssuer.
	// +kubebuilder:default=Issuer
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	// +optional
	Kind string `json:"kind,omitempty"`
	// Group is the issuer's API group: cert-manager.io, or an external issuer's.
	// +kubebuilder:default=cert-manager.io
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="spec.tls.issuerRef.group must be an API group, for example cert-manager.io"
	// +optional
	Group string `json:"group,omitempty"`
}

// NetworkPolicySpec configures the NetworkPolicy the operator keeps for a RedisCluster.
type NetworkPolicySpec struct {
	// Enabled keeps the NetworkPolicy (the default); false deletes it, so any pod may reach
	// every port of the Redis pods.
	// +kubebuilder:default=true
	// +optional
	Enabled *bool `json:"enabled,omitempty"`

	// Clients may reach the client port 6379, as NetworkPolicy peers (pods, namespaces or
	// address blocks). When empty, only the pods of the cluster's own namespace may; listed
	// peers replace that default, so list that namespace too if its pods connect. The
	// cluster's own pods and the operator's pods always may.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Clients []networkingv1.NetworkPolicyPeer `json:"clients,omitempty"`

	// MetricsNamespace names the namespace (your Prometheus's) whose pods may reach the
	// exporter port 9121 (spec.pod[0].monitorImage). When empty, no pod may scrape it.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="spec.networkPolicy.metricsNamespace must be a namespace's name (lowercase letters, digits and '-'), for example monitoring"
	// +optional
	MetricsNamespace string `json:"metricsNamespace,omitempty"`
}

// UpdateStrategy says how new masters receive slots.
type UpdateStrategy struct {
	// Type is AutoReceive (rebalance evenly) or AssignReceive (move the slots listed in
	// assignStrategies).
	// +kubebuilder:default=AutoReceive
	// +optional
	Type UpdateStrategyType `json:"type,omitempty"`

	// Pipeline is how many keys one MIGRATE moves, 1 to 10000. The seed writes it as a
	// string ("100"); a number works too.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? (self >= 1 && self <= 10000) : (self.matches('^[0-9]{1,5}$') && int(self) >= 1 && int(self) <= 10000)",message="spec.updateStrategy.pipeline must be a number from 1 to 10000"
	// +optional
	Pipeline *intstr.IntOrString `json:"pipeline,omitempty"`

	// AssignStrategies list the slots new masters take, and from which nodes.
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +optional
	AssignStrategies []AssignStrategy `json:"assignStrategies,omitempty"`
}

// AssignStrategy moves Slots slots to the new masters from the nodes in FromReplicas.
type AssignStrategy struct {
	// Slots is how many slots to move.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16384
	// +required
	Slots int32 `json:"slots"`

	// FromReplicas are the node ids (comma-separated) the slots are taken from.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +required
	FromReplicas string `json:"fromReplicas"`
}

// VolumeType is where a Redis node keeps its data.
// +kubebuilder:validation:Enum=hostPath;nfs;pvc
type VolumeType string

// PodSpec configures the Redis pods (the seed's pod[] entry).
type PodSpec struct {
	// Labels are extra pod labels.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are extra pod annotations.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
	// Env are extra environment variables of the Redis container, each with a name.
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:XValidation:rule="self.all(e, size(e.name) > 0)",message="spec.pod[].env[].name must be set: name each variable, for example MAXMEMORY"
	// +optional
	Env []corev1.EnvVar `json:"env,omitempty"`
	// Affinity of the pods. When empty, pods are spread over nodes (preferred).
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// Resources of the Redis container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`
	// UpdateStrategy is accepted for compatibility with the seed; the operator always rolls
	// pods itself, one at a time, failing masters over first.
	// +optional
	UpdateStrategy *UpdateStrategyHint `json:"updateStrategy,omitempty"`
	// Volumes says where data lives.
	// +optional
	Volumes *Volumes `json:"volumes,omitempty"`
	// Configmap names a ConfigMap whose "redis.conf" key is merged into the generated
	// configuration (the operator's cluster settings win).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.pod[].configmap must be a ConfigMap's name (lowercase letters, digits, '-' and '.'), for example cache-conf"
	// +optional
	Configmap string `json:"configmap,omitempty"`
	// MonitorImage, when set, adds a Prometheus exporter sidecar.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^(([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)([.][a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@[a-z0-9]+([+._-][a-z0-9]+)*:[a-fA-F0-9]{32,})?$')",message="spec.pod[].monitorImage must be an image reference ([registry[:port]/]lowercase/path[:tag][@digest], no spaces or control characters), for example oliver006/redis_exporter:v1.62.0"
	// +optional
	MonitorImage string `json:"monitorImage,omitempty"`
	// InitImage is accepted for compatibility with the seed and used for the init container.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^(([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)([.][a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@[a-z0-9]+([+._-][a-z0-9]+)*:[a-fA-F0-9]{32,})?$')",message="spec.pod[].initImage must be an image reference ([registry[:port]/]lowercase/path[:tag][@digest], no spaces or control characters), for example busybox:1.36"
	// +optional
	InitImage string `json:"initImage,omitempty"`
	// MiddlewareImage overrides repository:version for the Redis container.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^(([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)([.][a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@[a-z0-9]+([+._-][a-z0-9]+)*:[a-fA-F0-9]{32,})?$')",message="spec.pod[].middlewareImage must be an image reference ([registry[:port]/]lowercase/path[:tag][@digest], no spaces or control characters), for example redis:7.2.5"
	// +optional
	MiddlewareImage string `json:"middlewareImage,omitempty"`
}

// UpdateStrategyHint is the seed's pod update strategy.
type UpdateStrategyHint struct {
	// Type is RollingUpdate or OnDelete.
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Type string `json:"type,omitempty"`
}

// Volumes says where a Redis node keeps its data.
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type != 'nfs' || (has(self.persistentVolumeClaimName) && size(self.persistentVolumeClaimName) > 0)",message="spec.pod[].volumes.persistentVolumeClaimName is required when the volume type is nfs"
// +kubebuilder:validation:XValidation:rule="!has(self.type) || self.type != 'hostPath' || (has(self.allowHostPath) && self.allowHostPath)",message="spec.pod[].volumes.type hostPath needs spec.pod[].volumes.allowHostPath: true: a hostPath volume writes to the Kubernetes node's disk, outside any quota, and pod security standards above privileged refuse it; use pvc (the default) or nfs, or opt in",fieldPath=".type"
type Volumes struct {
	// Type is hostPath, nfs (an existing claim) or pvc (a claim per pod, the default).
	// hostPath needs allowHostPath.
	// +kubebuilder:default=pvc
	// +optional
	Type VolumeType `json:"type,omitempty"`
	// AllowHostPath opts in to type hostPath: the data lives in a directory of the Kubernetes
	// node (/var/lib/middleware-operator/redis/<namespace>/<name>), outside any storage quota,
	// and the namespace must admit privileged pods. Without it a hostPath volume is refused.
	// +optional
	AllowHostPath bool `json:"allowHostPath,omitempty"`
	// PersistentVolumeClaimName is the existing claim of the nfs type.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	PersistentVolumeClaimName string `json:"persistentVolumeClaimName,omitempty"`
	// Size of each pod's claim (pvc type), default 1Gi.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.pod[].volumes.size must be greater than zero, for example 1Gi"
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// StorageClassName of each pod's claim (pvc type); empty uses the default class.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="spec.pod[].volumes.storageClassName must be a StorageClass's name (lowercase letters, digits, '-' and '.'), for example standard"
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`
}

// Phase is the lifecycle stage of a RedisCluster.
// +kubebuilder:validation:Enum=None;Creating;Running;Scaling;Upgrading;Healing;Failed
type Phase string

// The phases of a RedisCluster: the seed's, and Healing (every slot is served while the
// operator repairs the rest: re-introductions, failovers, forgotten nodes, replica layout).
// Failed means some slot is not served, or the cluster was lost.
const (
	PhaseNone      Phase = "None"
	PhaseCreating  Phase = "Creating"
	PhaseRunning   Phase = "Running"
	PhaseScaling   Phase = "Scaling"
	PhaseUpgrading Phase = "Upgrading"
	PhaseHealing   Phase = "Healing"
	PhaseFailed    Phase = "Failed"
)

// RedisNode is the observed state of one Redis node (the seed's conditions[] entry).
type RedisNode struct {
	// Name is the pod name.
	Name string `json:"name"`
	// Instance is ip:port.
	// +optional
	Instance string `json:"instance,omitempty"`
	// Type is master or slave.
	// +optional
	Type string `json:"type,omitempty"`
	// NodeID is the Redis Cluster node id.
	// +optional
	NodeID string `json:"nodeId,omitempty"`
	// MasterNodeID is the node id of its master (its own id for a master).
	// +optional
	MasterNodeID string `json:"masterNodeId,omitempty"`
	// DomainName is the pod's stable DNS name.
	// +optional
	DomainName string `json:"domainName,omitempty"`
	// Slots are the slot ranges it serves, for example 0-5460.
	// +optional
	Slots string `json:"slots,omitempty"`
	// Hostname is the Kubernetes node the pod runs on.
	// +optional
	Hostname string `json:"hostname,omitempty"`
	// HostIP is that node's IP.
	// +optional
	HostIP string `json:"hostIP,omitempty"`
	// Status is True when the node is connected and healthy.
	// +optional
	Status corev1.ConditionStatus `json:"status,omitempty"`
	// Reason is a machine-readable reason for Status.
	// +optional
	Reason string `json:"reason,omitempty"`
	// Message explains Status.
	// +optional
	Message string `json:"message,omitempty"`
	// LastTransitionTime is when Status last changed.
	// +optional
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitempty"`
	// MaxMemory is the node's maxmemory in bytes (0: none), as it reports it.
	// +optional
	MaxMemory int64 `json:"maxMemory,omitempty"`
	// ExternalAddress is the host:port clients outside the Kubernetes cluster reach the
	// node at (spec.externalAccess), as its Service assigned it; empty while none is.
	// +optional
	ExternalAddress string `json:"externalAddress,omitempty"`
	// MemoryPercent is the node's used memory as a share of its maxmemory, in whole percent
	// (absent without maxmemory). The bytes, fragmentation and evictions are metrics.
	// +optional
	MemoryPercent *int32 `json:"memoryPercent,omitempty"`
}

// MaxMemorySource says where the nodes' maxmemory comes from.
// +kubebuilder:validation:Enum=Limit;Spec;UserConfig;None
type MaxMemorySource string

// The sources of maxmemory.
const (
	// MaxMemoryFromLimit: a share of the redis container's memory limit.
	MaxMemoryFromLimit MaxMemorySource = "Limit"
	// MaxMemoryFromSpec: spec.memory.maxMemory.
	MaxMemoryFromSpec MaxMemorySource = "Spec"
	// MaxMemoryFromUserConfig: the redis.conf of spec.pod[0].configmap sets it, and wins.
	MaxMemoryFromUserConfig MaxMemorySource = "UserConfig"
	// MaxMemoryNone: no memory limit and no maxMemory: Redis grows without bound.
	MaxMemoryNone MaxMemorySource = "None"
)

// AutoscalePhase is where the memory autoscaler stands.
// +kubebuilder:validation:Enum=BelowTarget;AboveTarget;CoolingDown;AtMaximum;AtMinimum;Waiting;NoMaxMemory;ScalingOut;ScalingIn;Rebalancing;SlotTooBig
type AutoscalePhase string

// AutoscaleStatus is the memory autoscaler's state: the number of masters it asks for, the
// clocks it keeps and its last change.
type AutoscaleStatus struct {
	// Masters is the number of masters the autoscaler asks for.
	// +optional
	Masters int32 `json:"masters,omitempty"`
	// Phase is where the autoscaler stands: BelowTarget, AboveTarget (waiting for sustain),
	// CoolingDown, AtMaximum, AtMinimum, Waiting (the cluster is busy or not healthy),
	// NoMaxMemory, SlotTooBig (the fullest master is past its target with slots too big
	// to move: adding shards cannot relieve it; status.heldSlots names them), or
	// ScalingOut, ScalingIn, Rebalancing right after a decision.
	// +optional
	Phase AutoscalePhase `json:"phase,omitempty"`
	// Message says why, as of the last change of phase.
	// +optional
	Message string `json:"message,omitempty"`
	// AboveSince is since when the fullest master has been past the target.
	// +optional
	AboveSince *metav1.Time `json:"aboveSince,omitempty"`
	// BelowSince is since when the data would fit on one master fewer (with scaleIn).
	// +optional
	BelowSince *metav1.Time `json:"belowSince,omitempty"`
	// LastChange is when the autoscaler last changed the cluster, and LastChangeReason why.
	// +optional
	LastChange *metav1.Time `json:"lastChange,omitempty"`
	// +optional
	LastChangeReason string `json:"lastChangeReason,omitempty"`
	// SlotWeights are the slot weights, by master node ID, that a rebalance by memory set:
	// a master whose slots hold more data gets fewer slots. Cleared when a shard is added
	// or removed.
	// +optional
	SlotWeights map[string]int32 `json:"slotWeights,omitempty"`
}

// HeldSlotStatus is a slot a move left where it is: its data would not fit in the target's
// room.
type HeldSlotStatus struct {
	// Slot is the hash slot.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16383
	Slot int32 `json:"slot"`
	// Master is the node ID of the master that keeps it.
	Master string `json:"master"`
	// Target is the node ID of the master it was to move to.
	// +optional
	Target string `json:"target,omitempty"`
	// Giant: the slot holds more than the target could take even empty (90% of its
	// maxmemory), so no spreading of the data lets it move. Otherwise the target was full,
	// or answered OOM (RolledBack), and the slot waits until a master has room for it
	// besides the room it was held with, or the spec changes.
	// +optional
	Giant bool `json:"giant,omitempty"`
	// RolledBack: the slot was moving when its target refused its keys with OOM (the
	// estimate said they fit), and went back to its owner; Room is the target's room
	// before that move.
	// +optional
	RolledBack bool `json:"rolledBack,omitempty"`
	// Keys is the number of keys in the slot.
	Keys int64 `json:"keys"`
	// Bytes is an estimate of their size (sampled MEMORY USAGE times the keys).
	Bytes int64 `json:"bytes"`
	// Room is what the target could take, in bytes: 90% of its maxmemory minus its used
	// memory, when the slot was held.
	Room int64 `json:"room"`
	// Generation is the RedisCluster's generation when the slot was held.
	Generation int64 `json:"generation"`
	// Message names the slot, its size and what would help.
	// +optional
	Message string `json:"message,omitempty"`
}

// MemoryStatus is the cluster's memory configuration and how full it is.
type MemoryStatus struct {
	// MaxMemory is the maxmemory every node is configured with, in bytes (0: none).
	// +optional
	MaxMemory int64 `json:"maxMemory,omitempty"`
	// Policy is the maxmemory-policy every node is configured with.
	// +optional
	Policy string `json:"policy,omitempty"`
	// Source says where maxmemory comes from: Limit, Spec, UserConfig (the user's redis.conf
	// sets it and wins over spec.memory) or None.
	// +optional
	Source MaxMemorySource `json:"source,omitempty"`
	// FullestMaster is the pod of the master whose used memory is the largest share of its
	// maxmemory.
	// +optional
	FullestMaster string `json:"fullestMaster,omitempty"`
	// FullestMasterPercent is that master's used memory as a share of its maxmemory, in
	// whole percent.
	// +optional
	FullestMasterPercent *int32 `json:"fullestMasterPercent,omitempty"`
}

// RedisVolumesStatus is the size of the pods' claims (spec.pod[0].volumes.size).
type RedisVolumesStatus struct {
	// Size is the size spec.pod[0].volumes.size asks of every claim.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Size string `json:"size,omitempty"`
	// Resizing says what a resize under way waits for; empty when none is.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Resizing string `json:"resizing,omitempty"`
	// Claims are the pods' claims with the size each asks for and the capacity it has.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	Claims []RedisClaimStatus `json:"claims,omitempty"`
}

// RedisClaimStatus is one pod's claim.
type RedisClaimStatus struct {
	// Name is the PersistentVolumeClaim's name.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Requested is the size the claim asks for (spec.resources.requests.storage).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Requested string `json:"requested,omitempty"`
	// Capacity is the size the volume has (status.capacity.storage).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Capacity string `json:"capacity,omitempty"`
	// FileSystemResizePending: the volume grew and its filesystem grows when the pod
	// restarts (the operator restarts it, one pod at a time).
	// +optional
	FileSystemResizePending bool `json:"fileSystemResizePending,omitempty"`
}

// RedisClusterStatus is the observed state of a RedisCluster.
type RedisClusterStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas is the StatefulSet's current number of pods.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Replicas",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Replicas int32 `json:"replicas,omitempty"`
	// ReadyReplicas is the number of Ready Redis pods.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Ready Replicas"
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Masters is the number of masters serving slots.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Masters"
	Masters int32 `json:"masters,omitempty"`
	// Phase is the lifecycle stage.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Phase",xDescriptors={"urn:alm:descriptor:io.kubernetes.phase"}
	Phase Phase `json:"phase,omitempty"`
	// Reason explains the phase, for example why the cluster is paused or failed.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Reason"
	Reason string `json:"reason,omitempty"`
	// SlotsAssigned is how many of the 16384 slots a master serves.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Slots Assigned"
	SlotsAssigned int32 `json:"slotsAssigned,omitempty"`
	// SlotsOK is how many slots are served by a healthy master.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Slots OK"
	SlotsOK int32 `json:"slotsOk,omitempty"`
	// AssignTargets are the node IDs of the new masters an AssignReceive scale out gives
	// slots to: strategy i goes to target i modulo their number. Recorded before the first
	// slot moves, so a restarted operator resumes each strategy exactly where it stopped.
	// +kubebuilder:validation:MaxItems=1000
	// +listType=atomic
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Assign Targets"
	AssignTargets []string `json:"assignTargets,omitempty"`
	// AssignGeneration is the generation whose scale out AssignTargets belong to.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Assign Generation"
	AssignGeneration int64 `json:"assignGeneration,omitempty"`
	// Nodes are the Redis nodes (the seed's conditions[]).
	// +listType=map
	// +listMapKey=name
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Nodes"
	Nodes []RedisNode `json:"nodes,omitempty"`
	// Memory is the nodes' maxmemory, where it comes from, and the fullest master's share.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Memory"
	Memory *MemoryStatus `json:"memory,omitempty"`
	// Autoscale is what the memory autoscaler decided (with spec.autoscale).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Autoscale"
	Autoscale *AutoscaleStatus `json:"autoscale,omitempty"`
	// HeldSlots are slots a slot move left where they are because their data would not fit
	// in the target: giant ones (a few hash tags holding most of a master's keys) fit in no
	// master of their size; the others met a full target, or one that answered OOM (rolled
	// back). The moves plan around them (a scale in they keep from ending says so), the
	// SlotsMovable condition names the giant ones, and the autoscaler does not add shards
	// for a master they alone keep past its target. A change of spec (a larger memory
	// limit, say) lets them be tried again, and so does a change of room (a master with
	// room for a slot besides the room it was held with). At most 64 are kept: the giant
	// ones first, then the rolled back, then the largest; a slot left out is measured and
	// held again by the next move that plans it.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=slot
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Held Slots"
	HeldSlots []HeldSlotStatus `json:"heldSlots,omitempty"`
	// Conditions are Ready, Progressing and Degraded.
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Restore is what the restore of spec.restore has done.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Restore"
	Restore *RestoreStatus `json:"restore,omitempty"`
	// Archive is the continuous archive of spec.archive: each shard's timeline, base and
	// how far it is archived.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Archive"
	Archive *ArchiveStatus `json:"archive,omitempty"`
	// Reload is the reload of lost shards' slots from a backup under way (the annotation
	// redis.middleware-operator.io/restore-lost-shards-from), nil when none is.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Shard Reload"
	Reload *ShardReloadStatus `json:"reload,omitempty"`
	// Volumes is the size of each pod's claim and any resize under way (volumes of type
	// pvc only).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Volumes"
	Volumes *RedisVolumesStatus `json:"volumes,omitempty"`
}

// ShardReloadStatus is the progress of a reload of lost slots from a backup.
type ShardReloadStatus struct {
	// Backup is the RedisBackup the slots are reloaded from.
	Backup string `json:"backup"`
	// Slots are the lost slots, for example 0-5460.
	Slots string `json:"slots"`
	// LoadedShards are the indexes of the backup's shards whose keys in those slots are
	// loaded.
	// +kubebuilder:validation:MaxItems=1000
	// +listType=set
	// +optional
	LoadedShards []int32 `json:"loadedShards,omitempty"`
	// StartedAt is when the loss was recorded.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// LostAt is when the rest of the cluster last heard from the lost masters (the earliest
	// of them): a reload from the archive takes each shard's timeline that served then, not
	// one begun later from a node that came back empty.
	// +optional
	LostAt *metav1.Time `json:"lostAt,omitempty"`
	// StartedLoads are the shards whose load from the archive was begun, each with the
	// operator run that began it, recorded before the load starts: a load found begun by
	// another run (an operator restarted during it) empties its slots before it starts
	// again, so no archived command (an INCR, an RPUSH) is applied twice.
	// +kubebuilder:validation:MaxItems=1000
	// +listType=map
	// +listMapKey=shard
	// +optional
	StartedLoads []ShardLoadStart `json:"startedLoads,omitempty"`
}

// ShardLoadStart records that a shard's load was begun, and by which operator run.
type ShardLoadStart struct {
	// Shard is the shard's index in the backup or archive.
	// +kubebuilder:validation:Minimum=0
	Shard int32 `json:"shard"`
	// Run names the operator process that began the load (random, new at each start).
	// +kubebuilder:validation:MaxLength=64
	Run string `json:"run"`
}

// ArchiveStatus is where a cluster's continuous archive stands.
type ArchiveStatus struct {
	// Location is the archive's folder, s3://bucket/path/<cluster>/archive.
	// +optional
	Location string `json:"location,omitempty"`
	// Shards are the shards archived, in slot order.
	// +kubebuilder:validation:MaxItems=1000
	// +listType=map
	// +listMapKey=shard
	// +optional
	Shards []ArchiveShardStatus `json:"shards,omitempty"`
	// RecoverableFrom is the earliest time a restore can target: every shard has a base
	// captured at or before it (the latest of the shards' oldestBase). Empty until every
	// shard has one.
	// +optional
	RecoverableFrom *metav1.Time `json:"recoverableFrom,omitempty"`
}

// ArchiveShardStatus is the archive of one shard.
type ArchiveShardStatus struct {
	// Shard names the shard in the archive (shard-000 is the one with the first slots).
	Shard string `json:"shard"`
	// Slots are the shard's slot ranges, for example 0-5460.
	// +optional
	Slots string `json:"slots,omitempty"`
	// Timeline is the shard's current timeline: 1 from the first base, one more after each
	// gap (a history the archive could not continue, which a new base starts again) and
	// each scheduled base (spec.archive.baseEvery).
	// +optional
	Timeline int32 `json:"timeline,omitempty"`
	// BaseOffset is the replication offset of the timeline's base snapshot, BaseCapturedAt
	// when it was taken: a restore to a time of this timeline starts from it.
	// +optional
	BaseOffset int64 `json:"baseOffset,omitempty"`
	// +optional
	BaseCapturedAt *metav1.Time `json:"baseCapturedAt,omitempty"`
	// OldestBase is the earliest time the shard's oldest timeline kept in the archive serves
	// restores (its base's capture, or for a scheduled base the time its reader had caught
	// up): a restore cannot reach further back (spec.archive.retention deletes older
	// timelines).
	// +optional
	OldestBase *metav1.Time `json:"oldestBase,omitempty"`
	// Source is the pod the archive follows (a replica of the shard where there is one).
	// +optional
	Source string `json:"source,omitempty"`
	// ArchivedOffset is the replication offset the archive holds up to, and ArchivedUpTo
	// the time the last archived write was received (empty while none was).
	// +optional
	ArchivedOffset int64 `json:"archivedOffset,omitempty"`
	// +optional
	ArchivedUpTo *metav1.MicroTime `json:"archivedUpTo,omitempty"`
	// LastError is the last failure of the shard's follower, "" when none.
	// +optional
	LastError string `json:"lastError,omitempty"`
	// LastFlush is when the archive received the shard's last FLUSHALL or FLUSHDB (since
	// the operator started following it): a restore to a time just before it (one
	// millisecond) undoes it.
	// +optional
	LastFlush *metav1.MicroTime `json:"lastFlush,omitempty"`
}

// RestoreArchiveShard is how far a restore from an archive replayed one shard.
type RestoreArchiveShard struct {
	// Shard names the shard in the archive, and Timeline the timeline replayed.
	Shard    string `json:"shard"`
	Timeline int32  `json:"timeline"`
	// Reached is the receive time of the last write replayed (empty when none was), and
	// Offset the replication offset reached.
	// +optional
	Reached *metav1.MicroTime `json:"reached,omitempty"`
	// +optional
	Offset int64 `json:"offset,omitempty"`
	// Commands is the number of commands replayed onto the base.
	// +optional
	Commands int64 `json:"commands,omitempty"`
}

// RestoreStatus is the progress of a restore.
type RestoreStatus struct {
	// Location is the backup's folder, s3://bucket/path.
	// +optional
	Location string `json:"location,omitempty"`
	// BackupCompletedAt is when the backup was completed: the restored data is the
	// source's as of its shards' capture times, each at or before it.
	// +optional
	BackupCompletedAt *metav1.Time `json:"backupCompletedAt,omitempty"`
	// Shards is the backup's number of shards; LoadedShards the masters (node ids) whose
	// shard is loaded.
	// +optional
	Shards int32 `json:"shards,omitempty"`
	// +kubebuilder:validation:MaxItems=1000
	// +listType=set
	// +optional
	LoadedShards []string `json:"loadedShards,omitempty"`
	// Keys is the number of keys loaded so far.
	// +optional
	Keys int64 `json:"keys,omitempty"`
	// CompletedAt is when the last shard was loaded.
	// +optional
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Target is the target time of a restore from an archive (RFC 3339, or latest).
	// +optional
	Target string `json:"target,omitempty"`
	// ArchiveShards say, for a restore from an archive, how far each loaded shard was
	// replayed.
	// +kubebuilder:validation:MaxItems=1000
	// +listType=map
	// +listMapKey=shard
	// +optional
	ArchiveShards []RestoreArchiveShard `json:"archiveShards,omitempty"`
}

// RedisCluster is Redis in cluster mode on a StatefulSet.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas
// +kubebuilder:resource:shortName=rec,categories=all;middleware
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Masters",type=integer,JSONPath=`.status.masters`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Slots OK",type=integer,JSONPath=`.status.slotsOk`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Redis Cluster",resources={{StatefulSet,v1},{Service,v1},{ConfigMap,v1},{Secret,v1},{PodDisruptionBudget,v1},{NetworkPolicy,v1}}
type RedisCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired cluster.
	// +required
	Spec RedisClusterSpec `json:"spec"`
	// Status is what the operator observed.
	// +optional
	Status RedisClusterStatus `json:"status,omitempty"`
}

// RedisClusterList is a list of RedisClusters.
// +kubebuilder:object:root=true
type RedisClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the RedisClusters.
	Items []RedisCluster `json:"items"`
}
