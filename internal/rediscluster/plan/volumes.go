package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// The steps that grow the pods' claims (planVolumes).
const (
	// StepGrowClaims raises the request of the claims Step.Claims to Volumes.Want.
	StepGrowClaims StepKind = "GrowClaims"
	// StepRecreateStatefulSet deletes the StatefulSet with its pods orphaned, so that it is
	// created again with claim templates of the new size (templates cannot change).
	StepRecreateStatefulSet StepKind = "RecreateStatefulSet"
)

// The causes of a refused resize (VolumeRefusal.Reason).
const (
	// RefusedShrink: the spec asks less than a claim has.
	RefusedShrink = "VolumeShrinkRefused"
	// RefusedNotExpandable: the API server refused to grow a claim (its StorageClass does
	// not allow expansion, or it has none); the operator reads no StorageClass itself.
	RefusedNotExpandable = "VolumeExpansionNotAllowed"
)

// Volumes is what the planner knows of the pods' claims (volumes of type pvc).
type Volumes struct {
	// Want is the size spec.pod[0].volumes.size asks of every claim, in bytes (0: the pods
	// have no claims of their own, nothing is planned); WantText is it as the user wrote it.
	Want     int64
	WantText string
	// Template is the size of the StatefulSet's claim template in bytes, 0 when there is no
	// StatefulSet; StatefulSetDeleting is true while it is being deleted.
	Template            int64
	StatefulSetDeleting bool
	// Claims are the pods' claims.
	Claims []Claim
	// Left are the claims of ordinals at or above both spec.replicas and the StatefulSet's
	// replicas: those of the pods a finished scale in removed. DeleteLeft: they go with
	// their pods (spec.finalizers "foreground"; planDeleteClaims).
	Left       []Claim
	DeleteLeft bool
	// Refused is the API server's refusal to grow a claim to Want (RefusedNotExpandable),
	// carried from the VolumeSize condition while it holds for this spec; nil when none
	// does. No claim is asked to grow while it holds.
	Refused *VolumeRefusal
}

// Claim is one pod's claim.
type Claim struct {
	// Name is the claim's, Pod the pod's that mounts it; UID the claim's, so that a
	// deletion cannot touch a claim made again under the same name meanwhile.
	Name, Pod, UID string
	// Request is spec.resources.requests.storage and Capacity status.capacity.storage, in
	// bytes; RequestText is the request as written.
	Request, Capacity int64
	RequestText       string
	// Class is the claim's StorageClass ("" for none).
	Class string
	// FileSystemResizePending: the volume grew and the filesystem grows at the pod's restart.
	FileSystemResizePending bool
}

// RefusedExpansionRetry is how long a refused growth (RefusedNotExpandable) holds for an
// unchanged spec before the claims are asked again: a StorageClass's allowVolumeExpansion
// can be set later, and the operator cannot read it.
const RefusedExpansionRetry = 10 * time.Minute

// VolumeRefusal says why the spec's size is refused: Reason is one of RefusedShrink and
// RefusedNotExpandable, Message names the claim, the cause and the fix.
type VolumeRefusal struct {
	Reason, Message string
}

// RefuseVolumes judges spec.pod[0].volumes.size against the claims: a smaller size than a
// claim has is refused, and so is a larger one the API server refused to grow a claim to
// (v.Refused; whether a StorageClass allows expansion is the API server's to judge). Nil
// when the size can be had.
func RefuseVolumes(v Volumes) *VolumeRefusal {
	if v.Want == 0 {
		return nil
	}
	for _, c := range v.Claims {
		if c.Request > v.Want {
			return &VolumeRefusal{Reason: RefusedShrink, Message: fmt.Sprintf(
				"spec.pod[0].volumes.size %s is smaller than claim %s (%s): a claim cannot shrink; set the size back to at least %s, "+
					"or create a new RedisCluster with smaller volumes and restore a backup into it", v.WantText, c.Name, c.RequestText, c.RequestText)}
		}
	}
	if v.Template > v.Want && len(v.Claims) == 0 {
		return &VolumeRefusal{Reason: RefusedShrink, Message: fmt.Sprintf(
			"spec.pod[0].volumes.size %s is smaller than the StatefulSet's claims: a claim cannot shrink; set the size back", v.WantText)}
	}
	for _, c := range v.Claims {
		if c.Request < v.Want {
			return v.Refused
		}
	}
	return nil
}

// ExpansionRefused is the refusal of v.Want when the API server refused to grow claim c to
// it (refused is the API server's cause: its PersistentVolumeClaimResize admission refuses a
// claim whose StorageClass does not allow expansion, or that has none). The message names
// the claim, the class, the cause and the fix.
func ExpansionRefused(v Volumes, c Claim, refused string) *VolumeRefusal {
	class := fmt.Sprintf("StorageClass %q", c.Class)
	if c.Class == "" {
		class = "no StorageClass"
	}
	return &VolumeRefusal{Reason: RefusedNotExpandable, Message: fmt.Sprintf(
		"the API server refused to grow claim %s (%s) to spec.pod[0].volumes.size %s: %s; "+
			"use a StorageClass with allowVolumeExpansion: true (set it on the class if its provisioner can grow volumes; "+
			"the operator asks again at the next change of the spec or within %s), or create a new RedisCluster with volumes of %s "+
			"and restore a backup into it; until then the claims keep %s and the cluster runs on (the API server refuses a size "+
			"below the one asked)", c.Name, class, v.WantText, refused,
		RefusedExpansionRetry, v.WantText, c.RequestText)}
}

// VolumesResizing says what a resize under way waits for, "" when every claim has the
// size the spec asks and the StatefulSet's templates too.
func VolumesResizing(v Volumes) string {
	if v.Want == 0 || RefuseVolumes(v) != nil {
		return ""
	}
	var asked, growing, pending []string
	for _, c := range v.Claims {
		switch {
		case c.Request < v.Want:
			asked = append(asked, c.Name)
		case c.FileSystemResizePending:
			pending = append(pending, c.Name)
		case c.Capacity < c.Request:
			growing = append(growing, c.Name)
		}
	}
	var parts []string
	if len(asked) > 0 {
		parts = append(parts, fmt.Sprintf("%d claims to grow to %s", len(asked), v.WantText))
	}
	if len(growing) > 0 {
		parts = append(parts, fmt.Sprintf("%d claims growing (%s)", len(growing), strings.Join(growing, ", ")))
	}
	if len(pending) > 0 {
		parts = append(parts, fmt.Sprintf("%d claims wait for their pod's restart to grow the filesystem (%s)", len(pending), strings.Join(pending, ", ")))
	}
	if v.Template != 0 && v.Template != v.Want {
		parts = append(parts, "the StatefulSet to be recreated with claims of "+v.WantText)
	}
	return strings.Join(parts, "; ")
}

// planVolumes grows the claims to spec.pod[0].volumes.size unless RefuseVolumes refuses it:
// first every claim's request is raised (the volume grows online where the storage can), then
// the StatefulSet is recreated without its pods so new pods get claims of the new size, then
// a pod whose filesystem waits for a restart is restarted as an upgrade does (its master
// failed over first), one at a time. A scale in under way finishes first: recreating the
// StatefulSet would drop the leaving pods.
func planVolumes(spec Desired, s observe.Snapshot, h health.Health) (Step, bool) {
	v := spec.Volumes
	if v.Want == 0 || RefuseVolumes(v) != nil {
		return Step{}, false
	}
	var grow []string
	for _, c := range v.Claims {
		if c.Request < v.Want {
			grow = append(grow, c.Name)
		}
	}
	if len(grow) > 0 {
		return Step{Kind: StepGrowClaims, Operation: OpUpgrading, Claims: grow, After: LookSoon,
			Reason: fmt.Sprintf("growing %d claims to %s", len(grow), v.WantText)}, true
	}
	if v.Template != 0 && v.Template != v.Want {
		if v.StatefulSetDeleting {
			return Step{Kind: StepWait, Operation: OpUpgrading, After: LookSoon,
				Reason: "waiting for the StatefulSet to be deleted, its pods orphaned, to recreate it with claims of " + v.WantText}, true
		}
		if spec.StatefulSetReplicas != spec.Replicas {
			return Step{}, false
		}
		if held := templateHold(spec); held != "" {
			// Made again, the StatefulSet would carry the template that is held.
			return Step{Kind: StepWait, Operation: OpUpgrading, After: LookIdle,
				Reason: "the claims wait for the StatefulSet to be recreated, which waits until it may be written again: " + held}, true
		}
		return Step{Kind: StepRecreateStatefulSet, Operation: OpUpgrading, After: LookSoon,
			Reason: "recreating the StatefulSet, its pods orphaned and kept running, so new pods get claims of " + v.WantText}, true
	}
	pending := map[string]bool{}
	for _, c := range v.Claims {
		if c.FileSystemResizePending {
			pending[c.Pod] = true
		}
	}
	if len(pending) == 0 {
		return Step{}, false
	}
	var restart []*observe.Observation
	for _, o := range s.Answering() {
		if pending[o.Pod] {
			restart = append(restart, o)
		}
	}
	if len(restart) == 0 {
		return Step{}, false
	}
	return planReplace(spec, s, h, restart, fmt.Sprintf("%d pods wait for a restart to grow their filesystem", len(restart)))
}
