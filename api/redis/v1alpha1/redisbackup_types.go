package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReclaimPolicy says what happens to a backup's files in the bucket when its RedisBackup is
// deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type ReclaimPolicy string

const (
	// ReclaimRetain keeps the files: deleting the RedisBackup only forgets them.
	ReclaimRetain ReclaimPolicy = "Retain"
	// ReclaimDelete deletes the files with the RedisBackup.
	ReclaimDelete ReclaimPolicy = "Delete"
)

// ObjectStore is a bucket and path of an S3-compatible object store (AWS S3, MinIO, Ceph
// RGW, SeaweedFS...), and how to reach it.
type ObjectStore struct {
	// Endpoint is the store's URL, https://host[:port] without a path (a DNS name, an IPv4
	// address or a bracketed IPv6 one). For AWS S3: https://s3.<region>.amazonaws.com. The
	// operator refuses http:// unless started with --object-store-allow-http, and any
	// endpoint outside its --object-store-endpoints when that list is set.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://([A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?([.][A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*|[[][0-9A-Fa-f:.]+[]])(:[0-9]{1,5})?/?$')",message="endpoint must be https://host[:port] (or http:// where the operator allows it), a host name or IP address without user, path, query or fragment, for example https://s3.eu-west-1.amazonaws.com or https://minio.storage:9000"
	// +kubebuilder:validation:XValidation:rule="!isURL(self) || url(self).getPort() == '' || (int(url(self).getPort()) >= 1 && int(url(self).getPort()) <= 65535)",message="endpoint's port must be between 1 and 65535, for example https://minio.storage:9000"
	// +required
	Endpoint string `json:"endpoint"`
	// Bucket is the bucket's name; it must exist (the operator never creates one).
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][a-z0-9.-]*[a-z0-9]$')",message="bucket must be an S3 bucket name (3-63 lowercase letters, digits, '.' and '-'), for example redis-backups"
	// +required
	Bucket string `json:"bucket"`
	// Path is the folder within the bucket. For a RedisBackup it is where its folder (named
	// after the backup) goes, <namespace>/<cluster> when empty; for a restore source it is the
	// backup's own folder, the path of the backup's status.location.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.contains('..') && !self.contains('//') && self.matches('^[A-Za-z0-9._/-]*$')",message="path must be a folder of letters, digits, '.', '_', '-' and '/', without '..' or '//', for example prod/redis"
	// +optional
	Path string `json:"path,omitempty"`
	// Region is the bucket's region; empty asks the store.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9-]*$')",message="region must be a region name (lowercase letters, digits and '-'), for example eu-west-1"
	// +optional
	Region string `json:"region,omitempty"`
	// CredentialsSecret names a Secret in the same namespace with the keys accessKeyId and
	// secretAccessKey (and optionally sessionToken). Credentials are never in the spec.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="credentialsSecret must be a Secret's name (lowercase letters, digits, '-' and '.'), for example backup-credentials"
	// +required
	CredentialsSecret string `json:"credentialsSecret"`
	// CASecret names a Secret in the same namespace whose key ca.crt is the PEM bundle the
	// store's certificate must chain to, for a store with a private CA.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="caSecret must be a Secret's name (lowercase letters, digits, '-' and '.'), for example store-ca"
	// +optional
	CASecret string `json:"caSecret,omitempty"`
}

// RedisBackupSpec is one backup to take.
// +kubebuilder:validation:XValidation:rule="self.cluster == oldSelf.cluster && self.destination == oldSelf.destination",message="spec.cluster and spec.destination cannot change: a backup is taken once; create a new RedisBackup instead"
type RedisBackupSpec struct {
	// Cluster is the name of the RedisCluster to back up, in the same namespace.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="spec.cluster must be a RedisCluster's name (lowercase letters, digits and '-'), for example cache"
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Cluster"
	Cluster string `json:"cluster"`
	// Destination is where the backup's files go: one folder named after the backup under
	// destination.path, holding one RDB file per shard and manifest.json.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Destination"
	Destination ObjectStore `json:"destination"`
	// ReclaimPolicy says whether deleting the RedisBackup deletes its files (Delete) or keeps
	// them (Retain, the default).
	// +kubebuilder:default=Retain
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Reclaim Policy"
	ReclaimPolicy ReclaimPolicy `json:"reclaimPolicy,omitempty"`
}

// BackupPhase is where a backup stands.
// +kubebuilder:validation:Enum=Pending;Running;Completed;Failed
type BackupPhase string

// The phases of a RedisBackup.
const (
	// BackupPending: waiting to start (the cluster is not stable yet, or a check failed and
	// is tried again).
	BackupPending BackupPhase = "Pending"
	// BackupRunning: the shards are being copied.
	BackupRunning BackupPhase = "Running"
	// BackupCompleted: every shard and the manifest are in the bucket.
	BackupCompleted BackupPhase = "Completed"
	// BackupFailed: the backup gave up; the reason says why. Nothing in the bucket is
	// recorded as a backup.
	BackupFailed BackupPhase = "Failed"
)

// BackupShard is one shard of a backup.
type BackupShard struct {
	// Slots are the slot ranges of the shard, for example 0-5460.
	Slots string `json:"slots"`
	// MasterNodeID is the node id of the shard's master.
	MasterNodeID string `json:"masterNodeId"`
	// Source is the pod the snapshot was taken from, and SourceRole its role (a replica in
	// sync with the master when there is one).
	Source     string `json:"source"`
	SourceRole string `json:"sourceRole"`
	// CapturedAt is when the source started writing its snapshot: the file holds the
	// shard's writes up to that moment.
	// +optional
	CapturedAt *metav1.Time `json:"capturedAt,omitempty"`
	// ReplicationOffset is the source's replication offset the snapshot corresponds to.
	// +optional
	ReplicationOffset int64 `json:"replicationOffset,omitempty"`
	// File is the object name of the shard's RDB in the backup's folder.
	File string `json:"file"`
	// Keys is the number of keys in the file.
	Keys int64 `json:"keys"`
	// Bytes is the file's size.
	Bytes int64 `json:"bytes"`
	// SHA256 is the file's SHA-256 in hex.
	SHA256 string `json:"sha256"`
}

// RedisBackupStatus is what the operator did of a RedisBackup.
type RedisBackupStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Observed Generation"
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is where the backup stands.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Phase",xDescriptors={"urn:alm:descriptor:io.kubernetes.phase"}
	Phase BackupPhase `json:"phase,omitempty"`
	// Reason explains the phase: what is awaited, or why the backup failed.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Reason"
	Reason string `json:"reason,omitempty"`
	// Attempts is how many times the copy was started.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Attempts"
	Attempts int32 `json:"attempts,omitempty"`
	// StartedAt and CompletedAt bound the copy.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Started"
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Completed"
	CompletedAt *metav1.Time `json:"completedAt,omitempty"`
	// Location is the backup's folder, s3://bucket/path: a restore names it.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Location"
	Location string `json:"location,omitempty"`
	// RedisVersion is the Redis version of the source nodes.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Redis Version"
	RedisVersion string `json:"redisVersion,omitempty"`
	// Keys and Bytes are totals over the shards.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Keys"
	Keys int64 `json:"keys,omitempty"`
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Bytes"
	Bytes int64 `json:"bytes,omitempty"`
	// Shards are the shards captured, in slot order: together their slots are the 16384.
	// +kubebuilder:validation:MaxItems=1000
	// +listType=atomic
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Shards"
	Shards []BackupShard `json:"shards,omitempty"`
	// Conditions: Completed.
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RedisBackup is one backup of a RedisCluster to an S3-compatible object store: one RDB per
// shard, taken from an in-sync replica, and a manifest with the slot map.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rbk,categories=all;middleware
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Keys",type=integer,JSONPath=`.status.keys`
// +kubebuilder:printcolumn:name="Bytes",type=integer,JSONPath=`.status.bytes`
// +kubebuilder:printcolumn:name="Completed",type=date,JSONPath=`.status.completedAt`
// +kubebuilder:printcolumn:name="Location",type=string,JSONPath=`.status.location`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Redis Backup",resources={{RedisCluster,v1alpha1},{Secret,v1}}
type RedisBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the backup to take.
	// +required
	Spec RedisBackupSpec `json:"spec"`
	// Status is what the operator did.
	// +optional
	Status RedisBackupStatus `json:"status,omitempty"`
}

// RedisBackupList is a list of RedisBackups.
// +kubebuilder:object:root=true
type RedisBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the RedisBackups.
	Items []RedisBackup `json:"items"`
}
