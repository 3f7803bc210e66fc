package redisadmin

import (
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/autoscale"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
)

// The names below moved out of redisadmin in the package split of issue 49. They stay here
// as aliases so redisadmin's own code and its importers keep compiling while the split
// goes on slice by slice; slice 9c (redisadmin becomes internal/rediscluster/execute and
// every importer names the new homes) deletes this file.

// SlotCount is nodes.SlotCount; slice 9c removes this alias.
const SlotCount = nodes.SlotCount

// RoleMaster is nodes.RoleMaster; slice 9c removes this alias.
const RoleMaster = nodes.RoleMaster

// RoleSlave is nodes.RoleSlave; slice 9c removes this alias.
const RoleSlave = nodes.RoleSlave

// SlotRange is nodes.SlotRange; slice 9c removes this alias.
type SlotRange = nodes.SlotRange

// Node is nodes.Node; slice 9c removes this alias.
type Node = nodes.Node

// FormatSlotRanges is nodes.FormatSlotRanges; slice 9c removes this alias.
func FormatSlotRanges(ranges []SlotRange) string { return nodes.FormatSlotRanges(ranges) }

// CountSlots is nodes.CountSlots; slice 9c removes this alias.
func CountSlots(ranges []SlotRange) int { return nodes.CountSlots(ranges) }

// ParseClusterInfo is nodes.ParseClusterInfo; slice 9c removes this alias.
func ParseClusterInfo(text string) map[string]string { return nodes.ParseClusterInfo(text) }

// ShardName is nodes.ShardName; slice 9c removes this alias.
func ShardName(i int) string { return nodes.ShardName(i) }

// ParseSlotRanges is nodes.ParseSlotRanges; slice 9c removes this alias.
func ParseSlotRanges(text string) ([]SlotRange, error) { return nodes.ParseSlotRanges(text) }

// Room is layout.Room; slice 9c removes this alias.
type Room = layout.Room

// SlotSize is layout.SlotSize; slice 9c removes this alias.
type SlotSize = layout.SlotSize

// HeldSlot is layout.HeldSlot; slice 9c removes this alias.
type HeldSlot = layout.HeldSlot

// MaxHeldSlots is layout.MaxHeldSlots; slice 9c removes this alias.
const MaxHeldSlots = layout.MaxHeldSlots

// HeldSlotNumbers is layout.HeldSlotNumbers; slice 9c removes this alias.
func HeldSlotNumbers(held []HeldSlot) []int { return layout.HeldSlotNumbers(held) }

// CapHeld is layout.CapHeld; slice 9c removes this alias.
func CapHeld(held []HeldSlot) []HeldSlot { return layout.CapHeld(held) }

// Autoscale is autoscale.Settings; slice 9c removes this alias.
type Autoscale = autoscale.Settings

// AutoscaleState is autoscale.State; slice 9c removes this alias.
type AutoscaleState = autoscale.State

// AutoscaleKind is autoscale.Kind; slice 9c removes this alias.
type AutoscaleKind = autoscale.Kind

// AutoscaleOut is autoscale.Out; slice 9c removes this alias.
const AutoscaleOut = autoscale.Out

// AutoscaleIn is autoscale.In; slice 9c removes this alias.
const AutoscaleIn = autoscale.In

// AutoscaleRebalance is autoscale.Rebalance; slice 9c removes this alias.
const AutoscaleRebalance = autoscale.Rebalance

// Spec is plan.Spec; slice 9c removes this alias.
type Spec = plan.Spec

// Step is plan.Step; slice 9c removes this alias.
type Step = plan.Step

// Memory is plan.Memory; slice 9c removes this alias.
type Memory = plan.Memory

// WriteSafety is plan.WriteSafety; slice 9c removes this alias.
type WriteSafety = plan.WriteSafety

// CARotation is plan.CARotation; slice 9c removes this alias.
type CARotation = plan.CARotation

// Rotation is plan.Rotation; slice 9c removes this alias.
type Rotation = plan.Rotation

// Credential is plan.Credential; slice 9c removes this alias.
type Credential = plan.Credential

// Reload is plan.Reload; slice 9c removes this alias.
type Reload = plan.Reload

// Restore is plan.Restore; slice 9c removes this alias.
type Restore = plan.Restore

// ShardLoad is plan.ShardLoad; slice 9c removes this alias.
type ShardLoad = plan.ShardLoad

// Assignment is plan.Assignment; slice 9c removes this alias.
type Assignment = plan.Assignment

// Strategy is plan.Strategy; slice 9c removes this alias.
type Strategy = plan.Strategy

// Volumes is plan.Volumes; slice 9c removes this alias.
type Volumes = plan.Volumes

// Claim is plan.Claim; slice 9c removes this alias.
type Claim = plan.Claim

// VolumeRefusal is plan.VolumeRefusal; slice 9c removes this alias.
type VolumeRefusal = plan.VolumeRefusal

// Announce is plan.Announce; slice 9c removes this alias.
type Announce = plan.Announce

// NextStep is plan.NextStep; slice 9c removes this alias.
func NextStep(spec Spec, s observe.Snapshot, h health.Health) Step { return plan.NextStep(spec, s, h) }

// IdleLook is plan.IdleLook; slice 9c removes this alias.
func IdleLook(nodeTimeout time.Duration) time.Duration { return plan.IdleLook(nodeTimeout) }

// StillHeld is plan.StillHeld; slice 9c removes this alias.
func StillHeld(held []HeldSlot, s observe.Snapshot) []HeldSlot { return plan.StillHeld(held, s) }

// RefuseVolumes is plan.RefuseVolumes; slice 9c removes this alias.
func RefuseVolumes(v Volumes) *VolumeRefusal { return plan.RefuseVolumes(v) }

// ExpansionRefused is plan.ExpansionRefused; slice 9c removes this alias.
func ExpansionRefused(v Volumes, c Claim, refused string) *VolumeRefusal {
	return plan.ExpansionRefused(v, c, refused)
}

// VolumesResizing is plan.VolumesResizing; slice 9c removes this alias.
func VolumesResizing(v Volumes) string { return plan.VolumesResizing(v) }

// LookSoon is plan.LookSoon; slice 9c removes this alias.
const LookSoon = plan.LookSoon

// LookIdle is plan.LookIdle; slice 9c removes this alias.
const LookIdle = plan.LookIdle

// OpScaling is plan.OpScaling; slice 9c removes this alias.
const OpScaling = plan.OpScaling

// RotationCurrent is plan.RotationCurrent; slice 9c removes this alias.
const RotationCurrent = plan.RotationCurrent

// RefusedShrink is plan.RefusedShrink; slice 9c removes this alias.
const RefusedShrink = plan.RefusedShrink

// RefusedNotExpandable is plan.RefusedNotExpandable; slice 9c removes this alias.
const RefusedNotExpandable = plan.RefusedNotExpandable

// RefusedExpansionRetry is plan.RefusedExpansionRetry; slice 9c removes this alias.
const RefusedExpansionRetry = plan.RefusedExpansionRetry

// EndpointHostname is plan.EndpointHostname; slice 9c removes this alias.
const EndpointHostname = plan.EndpointHostname

// EndpointIP is plan.EndpointIP; slice 9c removes this alias.
const EndpointIP = plan.EndpointIP

// StepIdle is plan.StepIdle; slice 9c removes this alias.
const StepIdle = plan.StepIdle

// StepWait is plan.StepWait; slice 9c removes this alias.
const StepWait = plan.StepWait

// StepLost is plan.StepLost; slice 9c removes this alias.
const StepLost = plan.StepLost

// StepRecordMembers is plan.StepRecordMembers; slice 9c removes this alias.
const StepRecordMembers = plan.StepRecordMembers

// StepAcceptLostCluster is plan.StepAcceptLostCluster; slice 9c removes this alias.
const StepAcceptLostCluster = plan.StepAcceptLostCluster

// StepDropAcceptance is plan.StepDropAcceptance; slice 9c removes this alias.
const StepDropAcceptance = plan.StepDropAcceptance

// StepForm is plan.StepForm; slice 9c removes this alias.
const StepForm = plan.StepForm

// StepRecover is plan.StepRecover; slice 9c removes this alias.
const StepRecover = plan.StepRecover

// StepFixSlots is plan.StepFixSlots; slice 9c removes this alias.
const StepFixSlots = plan.StepFixSlots

// StepJoin is plan.StepJoin; slice 9c removes this alias.
const StepJoin = plan.StepJoin

// StepRecordTargets is plan.StepRecordTargets; slice 9c removes this alias.
const StepRecordTargets = plan.StepRecordTargets

// StepAssign is plan.StepAssign; slice 9c removes this alias.
const StepAssign = plan.StepAssign

// StepRebalance is plan.StepRebalance; slice 9c removes this alias.
const StepRebalance = plan.StepRebalance

// StepRemoveNode is plan.StepRemoveNode; slice 9c removes this alias.
const StepRemoveNode = plan.StepRemoveNode

// StepShrink is plan.StepShrink; slice 9c removes this alias.
const StepShrink = plan.StepShrink

// StepFailover is plan.StepFailover; slice 9c removes this alias.
const StepFailover = plan.StepFailover

// StepReplacePod is plan.StepReplacePod; slice 9c removes this alias.
const StepReplacePod = plan.StepReplacePod

// StepRestoreShard is plan.StepRestoreShard; slice 9c removes this alias.
const StepRestoreShard = plan.StepRestoreShard

// StepRecordReload is plan.StepRecordReload; slice 9c removes this alias.
const StepRecordReload = plan.StepRecordReload

// StepReloadShard is plan.StepReloadShard; slice 9c removes this alias.
const StepReloadShard = plan.StepReloadShard

// StepFinishReload is plan.StepFinishReload; slice 9c removes this alias.
const StepFinishReload = plan.StepFinishReload

// StepReloadCertificates is plan.StepReloadCertificates; slice 9c removes this alias.
const StepReloadCertificates = plan.StepReloadCertificates

// StepAutoscale is plan.StepAutoscale; slice 9c removes this alias.
const StepAutoscale = plan.StepAutoscale

// StepWriteRecord is plan.StepWriteRecord; slice 9c removes this alias.
const StepWriteRecord = plan.StepWriteRecord

// StepAddPassword is plan.StepAddPassword; slice 9c removes this alias.
const StepAddPassword = plan.StepAddPassword

// StepKeepOnlyPassword is plan.StepKeepOnlyPassword; slice 9c removes this alias.
const StepKeepOnlyPassword = plan.StepKeepOnlyPassword

// StepSetMemory is plan.StepSetMemory; slice 9c removes this alias.
const StepSetMemory = plan.StepSetMemory

// StepSetCoverage is plan.StepSetCoverage; slice 9c removes this alias.
const StepSetCoverage = plan.StepSetCoverage

// StepSetWriteSafety is plan.StepSetWriteSafety; slice 9c removes this alias.
const StepSetWriteSafety = plan.StepSetWriteSafety

// StepAnnounce is plan.StepAnnounce; slice 9c removes this alias.
const StepAnnounce = plan.StepAnnounce

// StepRotateCA is plan.StepRotateCA; slice 9c removes this alias.
const StepRotateCA = plan.StepRotateCA

// StepGrowClaims is plan.StepGrowClaims; slice 9c removes this alias.
const StepGrowClaims = plan.StepGrowClaims

// StepRecreateStatefulSet is plan.StepRecreateStatefulSet; slice 9c removes this alias.
const StepRecreateStatefulSet = plan.StepRecreateStatefulSet
