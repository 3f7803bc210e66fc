package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// StepRotateCA moves a rotation of the generated CA a stage on (Step.CAStage is the stage it
// ends): the operator rewrites the CA Secret, and the next look issues the certificate of
// the new stage, which the nodes then reload (StepReloadCertificates).
const StepRotateCA StepKind = "RotateCA"

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
