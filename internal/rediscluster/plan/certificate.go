package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/health"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/observe"
)

// StepRenewCertificate issues the nodes' generated certificate again (GeneratedCert says
// why) and writes it into the TLS Secret; the nodes load it once their Secret volume
// shows it (StepReloadCertificates).
const StepRenewCertificate StepKind = "RenewCertificate"

// GeneratedCert is the certificate the operator generated for the nodes, as the TLS Secret
// holds it, while it is the operator's and verifies: one that is missing or does not
// verify is issued again before the look, which cannot reach the nodes without it.
type GeneratedCert struct {
	// RenewAt is when it is two thirds through its life.
	RenewAt time.Time
	// StaleCA: the Secret's ca.crt is not the CA Secret's bundle, or the certificate is not
	// signed by the CA that signs now (a CA rotation started, or its stage moved on).
	StaleCA bool
	// Unnamed are the external hosts (spec.externalAccess) it does not name yet.
	Unnamed []string
}

// planRenewCertificate issues the generated certificate again when a CA rotation moved on,
// when it does not name every external host, or when it is two thirds through its life.
// Early in NextStep: nothing else under way (a heal, a lost shard) holds it back.
func planRenewCertificate(spec Desired, s observe.Snapshot, _ health.Health) (Step, bool) {
	c := spec.GeneratedCert
	if c == nil {
		return Step{}, false
	}
	var why string
	switch {
	case c.StaleCA:
		why = "it is not of the CA's current stage (a CA rotation started or moved on)"
	case len(c.Unnamed) > 0:
		why = "it does not name the external hosts " + strings.Join(c.Unnamed, ", ")
	case !s.Now.Before(c.RenewAt):
		why = "it is two thirds through its life (since " + c.RenewAt.UTC().Format(time.RFC3339) + ")"
	default:
		return Step{}, false
	}
	return Step{Kind: StepRenewCertificate, After: LookSoon, Reason: fmt.Sprintf("renewing the nodes' certificate: %s", why)}, true
}
