package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// The steps of a rotation of the generated CA.
const (
	// StepStartCARotation starts a rotation of the generated CA (GeneratedCA says why): the
	// operator makes a new CA and writes it into the CA Secret next to the old one, whose
	// bundle then lists both; the next look renews the certificate (StepRenewCertificate).
	StepStartCARotation StepKind = "StartCARotation"
	// StepRotateCA moves a rotation of the generated CA a stage on (Step.CAStage is the
	// stage it ends): the operator rewrites the CA Secret, and the next look renews the
	// certificate of the new stage, which the nodes then reload (StepReloadCertificates).
	StepRotateCA StepKind = "RotateCA"
)

// GeneratedCA is the generated CA while no rotation of it is under way.
type GeneratedCA struct {
	// RenewAt is when it is two thirds through its life: a rotation starts then.
	RenewAt time.Time
	// Token is the rotate-ca annotation's value ("" when unset), RotatedFor the value the
	// last rotation started for: a new value starts a rotation.
	Token, RotatedFor string
}

// planStartCARotation starts a rotation of the generated CA when it is two thirds through
// its life or the rotate-ca annotation has a value no rotation started for yet, and none is
// under way.
func planStartCARotation(spec Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	ca := spec.GeneratedCA
	if ca == nil || spec.CARotation != nil {
		return Step{}, false
	}
	var why string
	switch {
	case ca.Token != "" && ca.Token != ca.RotatedFor:
		why = fmt.Sprintf("the rotate-ca annotation asks for it (%q)", ca.Token)
	case !s.Now.Before(ca.RenewAt):
		why = "the CA is two thirds through its life (since " + ca.RenewAt.UTC().Format(time.RFC3339) + ")"
	default:
		return Step{}, false
	}
	return Step{Kind: StepStartCARotation, After: LookSoon, Reason: "starting a CA rotation: " + why}, true
}

// CARotation is a rotation of the generated CA under way.
type CARotation struct {
	// Stage is the current stage (the resources package's CAStageTrust or CAStageSwitch);
	// Last is true for the last one, whose end drops the old CA.
	Stage string
	Last  bool
	// Due is when the stage may end at the earliest: it began the overlap before.
	Due time.Time
	// Checked: the snapshot compared every answering node's certificate with the TLS
	// Secret's (StaleCertificate, CertificateUnknown). Without that there is no evidence
	// that the nodes serve the stage's certificate, and the stage goes on.
	Checked bool
}

// planRotateCA ends the rotation's current stage once it has lasted its overlap and every
// node serves the certificate the stage issued: only then does every node trust the new CA
// (before it signs) or present a certificate of it (before the old CA is dropped). A
// recorded member that does not answer holds the rotation, since it may come back with the
// files of an earlier stage; so does a node whose certificate could not be checked (a
// handshake that timed out on a loaded machine is no evidence that it serves the new one),
// and so does a snapshot that checked no certificate at all.
func planRotateCA(spec Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	r := spec.CARotation
	if r == nil || !r.Checked || s.Now.Before(r.Due) {
		return Step{}, false
	}
	for i := range s.Nodes {
		o := &s.Nodes[i]
		if o.StaleCertificate {
			return Step{}, false // planReloadCertificates first
		}
		if _, member := s.Members[o.Pod]; o.Answered() && o.CertificateUnknown || member && !o.Answered() {
			return Step{}, false // no evidence yet that it serves the stage's certificate
		}
	}
	reason := "every node trusts the new CA: it signs the nodes' certificate from now on"
	if r.Last {
		reason = "every node serves a certificate of the new CA: the old CA is dropped"
	}
	return Step{Kind: StepRotateCA, CAStage: r.Stage, After: LookSoon,
		Reason: fmt.Sprintf("CA rotation, stage %s ends: %s", strings.ToLower(r.Stage), reason)}, true
}
