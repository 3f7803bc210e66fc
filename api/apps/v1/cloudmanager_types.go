package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CloudManagerSpec describes a three-tier stack the operator brings up in order: the front
// Deployment, then the identity Deployment once the front is available, then the database
// StatefulSet (with its root password Secret and headless Service) once identity is
// available.
// +kubebuilder:validation:XValidation:rule="self.identity.deployment.name != self.front.deployment.name",message="spec.identity.deployment.name must differ from spec.front.deployment.name: each tier needs its own Deployment",fieldPath=".identity.deployment.name"
// +kubebuilder:validation:XValidation:rule="self.db.statefulSet.name != self.front.deployment.name && self.db.statefulSet.name != self.identity.deployment.name",message="spec.db.statefulSet.name must differ from spec.front.deployment.name and spec.identity.deployment.name",fieldPath=".db.statefulSet.name"
type CloudManagerSpec struct {
	// Front is the web front tier, brought up first.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Front Tier"
	Front FrontTier `json:"front"`

	// Identity is the identity tier, brought up once the front is available.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Identity Tier"
	Identity IdentityTier `json:"identity"`

	// DB is the database tier, brought up once identity is available.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Database Tier"
	DB DatabaseTier `json:"db"`
}

// FrontTier is the front tier of a CloudManager.
type FrontTier struct {
	// Deployment is the front Deployment.
	// +required
	Deployment TierDeployment `json:"deployment"`
}

// IdentityTier is the identity tier of a CloudManager.
type IdentityTier struct {
	// Deployment is the identity Deployment.
	// +required
	Deployment TierDeployment `json:"deployment"`
}

// TierDeployment is a Deployment of one container. Renaming it deletes the Deployment of the
// old name and creates one of the new name.
type TierDeployment struct {
	// Name is the Deployment's name: a DNS label, different from the other tiers' names.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit"
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Deployment Name"
	Name string `json:"name"`

	// Image is the container image, for example nginx:1.20. Changing it rolls the tier.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)([.][a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@[a-z0-9]+([+._-][a-z0-9]+)*:[a-fA-F0-9]{32,})?$')",message="image must be an image reference ([registry[:port]/]lowercase/path[:tag][@digest], no spaces or control characters), for example nginx:1.20"
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image"
	Image string `json:"image"`

	// Replicas is the number of pods.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replicas",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Replicas *int32 `json:"replicas,omitempty"`

	// Command replaces the image's entrypoint; empty keeps it.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +listType=atomic
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Command"
	Command []string `json:"command,omitempty"`

	// Args are the arguments of the entrypoint; empty keeps the image's.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=4096
	// +listType=atomic
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Arguments"
	Args []string `json:"args,omitempty"`
	// Security holds the pods' and the container's security contexts.
	Security `json:",inline"`
}

// DatabaseTier is the database tier of a CloudManager: a MariaDB StatefulSet, its headless
// Service and its root password. The root password comes from rootPasswordSecretRef, else
// from rootPass (copied into a Secret the CloudManager owns), else it is generated once into
// that Secret and kept.
// +kubebuilder:validation:XValidation:rule="!has(self.rootPass) || !has(self.rootPasswordSecretRef)",message="spec.db.rootPass and spec.db.rootPasswordSecretRef are mutually exclusive: keep only rootPasswordSecretRef"
type DatabaseTier struct {
	// StatefulSet is the database StatefulSet.
	// +required
	StatefulSet DatabaseStatefulSet `json:"statefulSet"`

	// RootPasswordSecretRef names a key of a Secret in the CloudManager's namespace that
	// holds the root password. This is the preferred way to give the password.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Root Password Secret",xDescriptors={"urn:alm:descriptor:io.kubernetes:Secret"}
	RootPasswordSecretRef *SecretKeyReference `json:"rootPasswordSecretRef,omitempty"`

	// RootPass is the root password in plain text, accepted for compatibility. The operator
	// copies it into a Secret it owns and warns with an event; prefer rootPasswordSecretRef.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Root Password (deprecated)",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:password"}
	RootPass string `json:"rootPass,omitempty"`
}

// SecretKeyReference is a key of a Secret in the same namespace.
type SecretKeyReference struct {
	// Name is the Secret's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a Secret name: lowercase letters, digits, '-' and '.'"
	// +required
	Name string `json:"name"`

	// Key is the key of the Secret's data that holds the password.
	// +kubebuilder:default=password
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="must be a Secret key: letters, digits, '-', '_' and '.'"
	// +optional
	Key string `json:"key,omitempty"`
}

// DatabaseStatefulSet is the database StatefulSet. Its volumeClaimTemplate is immutable, so
// storage can change only together with name, which creates a new StatefulSet.
// +kubebuilder:validation:XValidation:rule="self.name != oldSelf.name || self.storage == oldSelf.storage",message="spec.db.statefulSet.storage can change only together with spec.db.statefulSet.name: a StatefulSet's volumeClaimTemplates are immutable, so a new storage needs a new StatefulSet"
type DatabaseStatefulSet struct {
	// Name is the StatefulSet's and its headless Service's name: a DNS label of at most 52
	// characters (the StatefulSet controller appends a revision hash to it in a label),
	// different from the Deployments' names.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=52
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit"
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="StatefulSet Name"
	Name string `json:"name"`

	// Image is the MariaDB image, for example mariadb:10.3.35. Changing it rolls the tier.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)([.][a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*(/[a-z0-9]+(([._]|__|-+)[a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@[a-z0-9]+([+._-][a-z0-9]+)*:[a-fA-F0-9]{32,})?$')",message="image must be an image reference ([registry[:port]/]lowercase/path[:tag][@digest], no spaces or control characters), for example mariadb:10.3.35"
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image"
	Image string `json:"image"`

	// Replicas is the number of database pods. Each is an independent MariaDB server with
	// its own volume; nothing replicates between them.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Replicas",xDescriptors={"urn:alm:descriptor:com.tectonic.ui:podCount"}
	Replicas *int32 `json:"replicas,omitempty"`

	// Storage is each pod's data volume. The volumes are deleted with the StatefulSet, so
	// deleting the CloudManager or renaming the database tier deletes the data.
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage"
	Storage DatabaseStorage `json:"storage"`
	// Security holds the pods' and the container's security contexts. MariaDB's image
	// starts as root and switches to its mysql user, so "restricted" needs a non-root image.
	Security `json:",inline"`
}

// DatabaseStorage describes the volume claim of each database pod.
type DatabaseStorage struct {
	// Class is the StorageClass of the volumes; empty means the cluster's default class.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be empty or a StorageClass name: lowercase letters, digits, '-' and '.'"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Storage Class",xDescriptors={"urn:alm:descriptor:io.kubernetes:StorageClass"}
	Class string `json:"class,omitempty"`

	// AccessModes is the volumes' access mode (one mode; the plural name is the one the
	// original CloudManager used).
	// +kubebuilder:default=ReadWriteOnce
	// +kubebuilder:validation:Enum=ReadWriteOnce;ReadOnlyMany;ReadWriteMany;ReadWriteOncePod
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Access Mode"
	AccessModes corev1.PersistentVolumeAccessMode `json:"accessModes,omitempty"`

	// Size is the capacity each volume requests, a quantity such as 20Gi.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))",message="must be a positive quantity such as 20Gi"
	// +required
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Size"
	Size string `json:"size"`
}

// CloudManagerPhase summarizes a CloudManager's state.
// +kubebuilder:validation:Enum=Pending;Deploying;Ready;Degraded
type CloudManagerPhase string

// The phases of a CloudManager.
const (
	// CloudManagerPending means no tier has been created yet.
	CloudManagerPending CloudManagerPhase = "Pending"
	// CloudManagerDeploying means a tier is being created or rolled out.
	CloudManagerDeploying CloudManagerPhase = "Deploying"
	// CloudManagerReady means every tier is ready with the current spec.
	CloudManagerReady CloudManagerPhase = "Ready"
	// CloudManagerDegraded means the operator cannot reach the spec; the Degraded condition
	// says why.
	CloudManagerDegraded CloudManagerPhase = "Degraded"
)

// Condition types of a CloudManager, besides Degraded.
const (
	// ConditionFrontReady means the front Deployment is available with the current spec.
	ConditionFrontReady = "FrontReady"
	// ConditionIdentityReady means the identity Deployment is available with the current spec.
	ConditionIdentityReady = "IdentityReady"
	// ConditionDatabaseReady means the database StatefulSet is ready with the current spec.
	ConditionDatabaseReady = "DatabaseReady"
	// ConditionReady means every tier is ready.
	ConditionReady = "Ready"
)

// CloudManagerStatus is the observed state of a CloudManager.
type CloudManagerStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase summarizes the state: Pending, Deploying, Ready or Degraded.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Phase",xDescriptors={"urn:alm:descriptor:io.kubernetes.phase"}
	Phase CloudManagerPhase `json:"phase,omitempty"`

	// Front is the front tier's available/desired pods, for example 1/1.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Front"
	Front string `json:"front,omitempty"`

	// Identity is the identity tier's available/desired pods.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Identity"
	Identity string `json:"identity,omitempty"`

	// DB is the database tier's ready/desired pods.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Database"
	DB string `json:"db,omitempty"`

	// Conditions are FrontReady, IdentityReady, DatabaseReady, Ready and Degraded.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors={"urn:alm:descriptor:io.kubernetes.conditions"}
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// CloudManager is a three-tier stack (front, identity, database) brought up in order.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=all;middleware
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Front",type=string,JSONPath=`.status.front`
// +kubebuilder:printcolumn:name="Identity",type=string,JSONPath=`.status.identity`
// +kubebuilder:printcolumn:name="DB",type=string,JSONPath=`.status.db`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: it is a label value of every object the CloudManager owns"
// +operator-sdk:csv:customresourcedefinitions:displayName="Cloud Manager",resources={{Deployment,v1},{StatefulSet,v1},{Service,v1},{Secret,v1}}
type CloudManager struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired stack.
	// +required
	Spec CloudManagerSpec `json:"spec"`
	// Status is what the operator observed.
	// +optional
	Status CloudManagerStatus `json:"status,omitempty"`
}

// CloudManagerList is a list of CloudManagers.
// +kubebuilder:object:root=true
type CloudManagerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the CloudManagers.
	Items []CloudManager `json:"items"`
}

func init() {
	register(&CloudManager{}, &CloudManagerList{})
}
