package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// RotationCurrent is Step.Rotation when every node runs exactly the passwords of the
// Secrets ("" means the rotation was not looked at: paused, say).
const RotationCurrent = "current"

// Credential is one Redis user's password that the operator keeps every node on, and what
// its applied-password record says the nodes run with.
type Credential struct {
	// User is the Redis user; Source the Secret its password comes from (for messages).
	User, Source string
	// Desired is the password the Secret holds now; "" while it is not known.
	Desired string
	// Recorded: the applied-password record exists. Current is the password every node
	// runs with, Previous the one a rotation under way still accepts, SwitchedAt when every
	// node began to accept Current. UpToDate: the record is in the current format (it
	// carries the exporter's password file).
	Recorded, UpToDate bool
	Current, Previous  string
	SwitchedAt         time.Time
}

// Rotation is what password rotations need: the credentials, the operator's own first (the
// others are rotated as its user), and how long both passwords work.
type Rotation struct {
	Credentials []Credential
	Grace       time.Duration
}

// The rotation steps.
const (
	// StepWriteRecord writes Credential's applied-password record as Record says, without
	// touching a node: a new cluster's (its nodes run the Secret's password) or an older
	// operator's record brought to the current format.
	StepWriteRecord StepKind = "WriteRecord"
	// StepAddPassword makes every running node accept Credential's new password besides
	// the current one (the user replicas authenticate as uses the new one).
	StepAddPassword StepKind = "AddPassword"
	// StepKeepOnlyPassword, after the grace period, makes every running node refuse the
	// previous password of Credential.
	StepKeepOnlyPassword StepKind = "KeepOnlyPassword"
)

// AppliedRecord is what StepWriteRecord writes.
type AppliedRecord struct {
	Current, Previous string
	SwitchedAt        time.Time
}

// planRotation is the next step of a password rotation, one credential at a time, the
// operator's first; with the status of rotations in note (RotationCurrent when every
// credential is current). A rotation that waits (for pods to run, for the grace period)
// does not hold the other steps: it returns no step, only the note.
func planRotation(spec Desired, s observe.Snapshot) (step Step, note string, acts bool) {
	running, missing := runningPods(spec, s)
	for i, c := range spec.Rotation.Credentials {
		if c.Desired == "" {
			return Step{}, "", false
		}
		prefix := fmt.Sprintf("rotating user %s to the password of Secret %s: ", c.User, c.Source)
		switch {
		case !c.Recorded:
			return Step{Kind: StepWriteRecord, Credential: i, Record: AppliedRecord{Current: c.Desired}, After: LookSoon,
				Reason: fmt.Sprintf("recording that the nodes run the password of user %s from Secret %s", c.User, c.Source)}, "", true
		case !c.UpToDate:
			return Step{Kind: StepWriteRecord, Credential: i, Record: AppliedRecord{Current: c.Current, Previous: c.Previous, SwitchedAt: c.SwitchedAt},
				After: LookSoon, Reason: fmt.Sprintf("adding the exporter's password file to the record of user %s", c.User)}, "", true
		case c.Current == c.Desired && c.Previous == "":
			continue
		case c.Current != c.Desired && len(missing) > 0:
			return Step{}, prefix + fmt.Sprintf("waiting for %s to run before every node accepts the new password", strings.Join(missing, ", ")), false
		case c.Current != c.Desired:
			return Step{Kind: StepAddPassword, Credential: i, Addrs: running, After: LookSoon,
				Reason: fmt.Sprintf("adding the new password of user %s from Secret %s on %d nodes", c.User, c.Source, len(running))}, "", true
		case s.Now.Before(c.SwitchedAt.Add(spec.Rotation.Grace)):
			return Step{}, prefix + "every node accepts both passwords until " + c.SwitchedAt.Add(spec.Rotation.Grace).UTC().Format(time.RFC3339), false
		case len(missing) > 0:
			return Step{}, prefix + fmt.Sprintf("waiting for %s to run before the previous password is retired", strings.Join(missing, ", ")), false
		default:
			return Step{Kind: StepKeepOnlyPassword, Credential: i, Addrs: running, After: LookSoon,
				Reason: fmt.Sprintf("retiring the previous password of user %s on %d nodes", c.User, len(running))}, "", true
		}
	}
	return Step{}, RotationCurrent, false
}

// runningPods are the addresses of the running pods (not being deleted), and the names of
// the pods the StatefulSet wants that do not run.
func runningPods(spec Desired, s observe.Snapshot) (addrs, missing []string) {
	running := map[string]bool{}
	for _, o := range s.Nodes {
		if o.Running && o.Addr != "" && !o.Terminating {
			addrs = append(addrs, o.Addr)
			running[o.Pod] = true
		}
	}
	for i := range spec.StatefulSetReplicas {
		if name := fmt.Sprintf("%s-%d", spec.Name, i); !running[name] {
			missing = append(missing, name)
		}
	}
	return addrs, missing
}
