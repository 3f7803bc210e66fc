package redisadmin

import (
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/autoscale"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/layout"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
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
