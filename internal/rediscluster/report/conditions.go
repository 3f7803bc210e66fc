package report

// The condition types, their reasons and the reasons of the events of a RedisCluster, by
// concern. Those the report sets are set here; the others by the controller's stages that
// meet them (the TLS and NetworkPolicy conditions while the children are kept, say).

import (
	"github.com/middleware-operator/middleware-operator/internal/child"
)

// ReasonInvalidACLRules: a running node refused new rules of spec.acl (a command or category
// Redis does not know, say). The StatefulSet keeps the rules the pods run, so no pod is
// replaced; Degraded and a Warning event name the field, the rule and Redis's reason.
const ReasonInvalidACLRules = "InvalidACLRules"

// ConditionArchiving says whether every shard of a cluster with spec.archive is archived.
const ConditionArchiving = "Archiving"

// The reasons of the Archiving condition (and archiver.ReasonFailing); the archive's events
// have archiver's reasons.
const (
	// ReasonArchiving: every shard's follower runs on its timeline.
	ReasonArchiving = "Archiving"
	// ReasonArchiveStarting: a shard's base is being taken, or its follower starts.
	ReasonArchiveStarting = "ArchiveStarting"
	// ReasonArchiveWaiting: the archive waits for the cluster (a restore, a slot map that
	// is not stable yet).
	ReasonArchiveWaiting = "ArchiveWaiting"
)

// The events of the memory autoscaler's changes.
const (
	ReasonAutoscaledOut       = "AutoscaledOut"
	ReasonAutoscaledIn        = "AutoscaledIn"
	ReasonAutoscaleRebalanced = "AutoscaleRebalanced"
)

// The events of a rotation of the generated CA (see resources.CAStageTrust).
const (
	// ReasonCARotationStarted: a new CA is trusted next to the old one.
	ReasonCARotationStarted = "CARotationStarted"
	// ReasonCARotationSwitched: the new CA signs the nodes' certificate.
	ReasonCARotationSwitched = "CARotationSwitched"
	// ReasonCARotationCompleted: the old CA is no longer trusted.
	ReasonCARotationCompleted = "CARotationCompleted"
)

// The TLS condition's reasons with spec.tls.issuerRef.
const (
	// ReasonTLSIssued: cert-manager issued the nodes' certificate, which verifies.
	ReasonTLSIssued = "IssuedByCertManager"
	// ReasonTLSCertManagerMissing: spec.tls.issuerRef is set, and the cluster does not serve
	// cert-manager's Certificate kind.
	ReasonTLSCertManagerMissing = "CertManagerMissing"
	// ReasonTLSCertificatePending: the Certificate is kept, and cert-manager has not written
	// its Secret yet; the message carries what the Certificate says.
	ReasonTLSCertificatePending = "CertificatePending"
	// ReasonTLSIssuerNotAllowed: spec.tls.issuerRef names a ClusterIssuer the operator's
	// --cluster-issuers does not list; nothing is issued.
	ReasonTLSIssuerNotAllowed = "IssuerNotAllowed"
)

// The external-access condition and events (spec.externalAccess).
const (
	// ConditionExternallyReachable: clients outside the Kubernetes cluster can reach every
	// node at the address its Service was given, and every node announces that address to
	// them. False while a node has no address yet or does not announce it; absent without
	// spec.externalAccess. Ready says nothing about it: Ready is the cluster serving every
	// slot to clients that reach the pods.
	ConditionExternallyReachable = "ExternallyReachable"
	// ReasonAddressesAnnounced, ReasonAddressPending and ReasonNotAnnounced are its reasons.
	ReasonAddressesAnnounced = "AddressesAnnounced"
	ReasonAddressPending     = "AddressPending"
	ReasonNotAnnounced       = "NotAnnounced"
	// ReasonCertificatePending (with spec.tls): the certificate the nodes serve does not
	// name every external address yet, so clients outside that verify it refuse some nodes.
	ReasonCertificatePending = "CertificatePending"
	// ReasonAnnounced is the Normal event of a node set to announce its external address
	// (or, once spec.externalAccess is removed, none); ReasonNotExternallyReachable the
	// Warning event when outside clients stop reaching every node.
	ReasonAnnounced              = "Announced"
	ReasonNotExternallyReachable = "NotExternallyReachable"
	// ReasonNodePortRefused is the Warning event of a node's NodePort Service the API server
	// refused: its node port is outside the cluster's range or taken.
	ReasonNodePortRefused = "NodePortRefused"
)

// The condition and reasons of slots too big to move.
const (
	// ConditionSlotsMovable is False while status.heldSlots names slots a slot move left
	// where they are because their data would not fit in any target; absent otherwise.
	ConditionSlotsMovable = "SlotsMovable"
	// ReasonSlotTooBig is its reason, and the reason of the Warning event naming each slot.
	ReasonSlotTooBig = "SlotTooBig"
	// ReasonMoveRolledBack: a target refused a slot's keys with OOM mid-move, and the slot
	// was rolled back to its owner at once (Warning event).
	ReasonMoveRolledBack = "MoveRolledBack"
	// ReasonScaleInHeld: a scale in cannot end because the leaving masters keep only held
	// slots, which fit in no staying master (SlotsMovable False, and a Warning event).
	ReasonScaleInHeld = "ScaleInHeld"
)

// ReasonMemoryConfigured is the event of nodes given a new maxmemory or maxmemory-policy
// while running.
const ReasonMemoryConfigured = "MemoryConfigured"

// The NetworkPolicy condition and its reasons.
const (
	// ConditionNetworkPolicy: the cluster's NetworkPolicy is in place (True), turned off or
	// not permitted (False), or the operator could not tell whether it may keep one (Unknown).
	ConditionNetworkPolicy = "NetworkPolicy"
	// ReasonNetworkPolicyApplied: the NetworkPolicy is as the spec asks.
	ReasonNetworkPolicyApplied = "Applied"
	// ReasonNetworkPolicyDisabled: spec.networkPolicy.enabled is false.
	ReasonNetworkPolicyDisabled = "Disabled"
	// ReasonMissingPermission: the operator's RBAC lacks a verb on NetworkPolicies (an
	// older bundle's RBAC during an upgrade); the cluster runs without a policy.
	ReasonMissingPermission = "MissingPermission"
	// ReasonPermissionCheckFailed: the API server did not answer the access review.
	ReasonPermissionCheckFailed = "PermissionCheckFailed"
	// ReasonNetworkPolicyRefused: the API server refused the NetworkPolicy although the
	// access review allowed it (an admission policy, a webhook, a namespace quota, an RBAC
	// deny the review did not see); the cluster runs without a policy.
	ReasonNetworkPolicyRefused = "NetworkPolicyRefused"
)

// The reasons of a network partition: the Degraded condition's while a look sees one, and
// the Warning event when it starts; ReasonPartitionEnded the Normal event when it ends.
const (
	ReasonNetworkPartition = "NetworkPartition"
	ReasonPartitionEnded   = "NetworkPartitionEnded"
)

// The reasons of a reload's events.
const (
	ReasonReloadingLostSlots = "ReloadingLostSlots"
	ReasonLostSlotsReloaded  = "LostSlotsReloaded"
	// ReasonReloadAbandoned: the user set the accept-data-loss annotation while a reload was
	// under way, and the operator gave the reload up (Warning event).
	ReasonReloadAbandoned = "ReloadAbandoned"
)

// The reasons of a restore's events.
const (
	ReasonRestoreFailed      = "RestoreFailed"
	ReasonRestoreShardLoaded = "RestoreShardLoaded"
	ReasonRestoreCompleted   = "RestoreCompleted"
)

// Condition types and reasons of a RedisCluster.
const (
	ConditionReady       = "Ready"
	ConditionProgressing = "Progressing"
	ConditionDegraded    = "Degraded"
	// ConditionPasswordApplied: the nodes require exactly the password Secret's password.
	ConditionPasswordApplied = "PasswordApplied"
	// ReasonPasswordCurrent and ReasonPasswordRotating are its reasons.
	ReasonPasswordCurrent  = "Current"
	ReasonPasswordRotating = "Rotating"

	ReasonClusterOK        = "ClusterOK"
	ReasonForming          = "Forming"
	ReasonPaused           = "Paused"
	ReasonNotControlled    = child.ReasonNotControlled
	ReasonReconcileError   = "ReconcileError"
	ReasonNodesUnhealthy   = "NodesUnhealthy"
	ReasonAllNodesHealthy  = "AllNodesHealthy"
	ReasonClusterNotFormed = "ClusterNotFormed"
	// ReasonDataLost: every recorded member came back without its data (or never answers).
	ReasonDataLost = "DataLost"
	// ReasonKeyConflict: a slot move stopped on keys that exist on both nodes with different
	// values (the condition names the slot and the nodes, never the keys).
	ReasonKeyConflict = "KeyConflict"
	// ReasonAuthenticationFailed: nodes refuse the password the operator has.
	ReasonAuthenticationFailed = "AuthenticationFailed"
	// ReasonPasswordInvalid: a password Secret's value is no password (a line break or a NUL
	// inside it, or nothing but a line ending; resources.RedisPassword); the condition names
	// the Secret, the key and the character.
	ReasonPasswordInvalid = "PasswordInvalid"
	// ConditionReplicasSeparated: every replica runs in another failure domain (Kubernetes
	// node, or zone) than its master, so losing one node keeps a copy of every shard.
	ConditionReplicasSeparated = "ReplicasSeparated"
	// ReasonSeparated and ReasonTooFewNodes are its reasons: the operator cannot separate
	// a shard's copies when there are fewer nodes (or zones) than a shard has members.
	ReasonSeparated   = "Separated"
	ReasonTooFewNodes = "TooFewNodes"
	// ReasonUnsupportedVersion: the spec names a Redis older than the operator supports
	// (resources.RedisMinMajor); no pod is created.
	ReasonUnsupportedVersion = "UnsupportedVersion"
)

// The TLS condition and its reasons.
const (
	// ConditionTLS: the nodes' certificate is valid and the operator speaks TLS to them
	// (True), TLS is off (False, Disabled), or the certificate is missing or wrong (False).
	ConditionTLS = "TLS"
	// ReasonTLSDisabled: spec.tls.enabled is not true.
	ReasonTLSDisabled = "Disabled"
	// ReasonTLSGenerated: the operator's CA signed the certificate, which it renews.
	ReasonTLSGenerated = "Generated"
	// ReasonTLSUserCertificate: the certificate of spec.tls.secretName is valid.
	ReasonTLSUserCertificate = "UserCertificate"
	// ReasonTLSInvalid: the Secret is missing, lacks a key, or its certificate does not
	// verify; the message says which and how to fix it.
	ReasonTLSInvalid = "InvalidCertificate"
	// ReasonTLSRenewed is the event of a renewed generated certificate.
	ReasonTLSRenewed = "CertificateRenewed"
	// ReasonTLSReloaded is the event of nodes that loaded a new certificate while running.
	ReasonTLSReloaded = "CertificateReloaded"
)

// ReasonUserSecretMissing is the Warning event of a Secret that spec.acl.users names and
// that does not exist or lacks the key: the pods could not start with it, so the StatefulSet
// is not changed until it is there.
const ReasonUserSecretMissing = "UserSecretMissing"

const (
	// ConditionVolumeSize: every pod's claim has spec.pod[0].volumes.size (True), grows to
	// it, or the size is refused (False). Only volumes of type pvc have it.
	ConditionVolumeSize = "VolumeSize"
	// ReasonVolumesAtSize: every claim has the size the spec asks.
	ReasonVolumesAtSize = "VolumesAtSize"
	// ReasonVolumesGrowing: claims grow to the spec's size; the message says what is left.
	ReasonVolumesGrowing = "VolumesGrowing"
	// ReasonVolumeShrinkRefused: the spec asks less than a claim has (plan.RefusedShrink).
	ReasonVolumeShrinkRefused = "VolumeShrinkRefused"
	// ReasonVolumeExpansionNotAllowed: the API server refused to grow a claim (its
	// StorageClass does not allow expansion, or it has none; plan.RefusedNotExpandable).
	ReasonVolumeExpansionNotAllowed = "VolumeExpansionNotAllowed"
)

// The write-safety condition and events.
const (
	// ConditionWritesAccepted: every master serving slots accepts writes as far as
	// min-replicas-to-write goes (spec.writeSafety Strict): False names the masters that
	// refuse them (NOREPLICAS) for want of a replica acknowledging their stream.
	ConditionWritesAccepted = "WritesAccepted"
	// ReasonWritesAccepted and ReasonNoReplicaInTime are its reasons; ReasonNoReplicaInTime
	// is also the Warning event when masters start refusing writes, ReasonWritesResumed the
	// Normal event when they all accept them again.
	ReasonWritesAccepted  = "WritesAccepted"
	ReasonNoReplicaInTime = "NoReplicaInTime"
	ReasonWritesResumed   = "WritesResumed"
	// ReasonWriteSafetyConfigured is the event of nodes given a new min-replicas-to-write
	// while running.
	ReasonWriteSafetyConfigured = "WriteSafetyConfigured"
)
