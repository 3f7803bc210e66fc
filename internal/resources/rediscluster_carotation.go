package resources

import (
	"bytes"
	"time"

	corev1 "k8s.io/api/core/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/certs"
)

// A rotation of the generated CA goes through two stages, each lasting at least
// spec.tls.caRotationOverlap and ending only once every node serves the certificate the
// stage issued: Trust (ca.crt lists the old and the new CA, the old one still signs), then
// Switch (the new CA signs, ca.crt still lists the old one). Then the old CA is dropped.
// Nobody ever meets a certificate of a CA they do not trust yet, and the old CA is
// trusted until no node presents a certificate of it.
const (
	// CAStageTrust: the incoming CA is trusted next to the signing one.
	CAStageTrust = "Trust"
	// CAStageSwitch: the incoming CA signs; the outgoing one is still trusted.
	CAStageSwitch = "Switch"

	// RedisRotateCAAnnotation on a RedisCluster starts a rotation of its generated CA each
	// time it is given a new value.
	RedisRotateCAAnnotation = "redis.middleware-operator.io/rotate-ca"
	// redisCARotatedForAnnotation on the CA Secret is the rotate-ca value last acted on.
	redisCARotatedForAnnotation = "redis.middleware-operator.io/ca-rotated-for"
	// redisCAStageSinceAnnotation on the CA Secret is when the current stage began.
	redisCAStageSinceAnnotation = "redis.middleware-operator.io/ca-stage-since"

	// The CA Secret's keys of the incoming CA (stage Trust) and of the outgoing CA's
	// certificate (stage Switch), next to tls.crt and tls.key, the signing CA's.
	redisNextCACertKey     = "next.crt"
	redisNextCAKeyKey      = "next.key"
	redisPreviousCACertKey = "previous.crt"

	// defaultCARotationOverlap is spec.tls.caRotationOverlap's default.
	defaultCARotationOverlap = 5 * time.Minute
)

// RedisCA is the generated CA Secret of a cluster, read as a rotation's stage.
type RedisCA struct {
	// Signer signs the nodes' certificate.
	Signer certs.Pair
	// Next is the incoming CA during stage Trust.
	Next certs.Pair
	// Previous is the outgoing CA's certificate during stage Switch.
	Previous []byte
	// Since is when the current stage began (zero outside a rotation).
	Since time.Time
	// RotatedFor is the rotate-ca annotation value the last rotation started for.
	RotatedFor string
}

// ReadRedisCA reads the generated CA Secret.
func ReadRedisCA(secret *corev1.Secret) RedisCA {
	ca := RedisCA{
		Signer:     certs.Pair{Cert: secret.Data[RedisTLSCertKey], Key: secret.Data[RedisTLSKeyKey]},
		Next:       certs.Pair{Cert: secret.Data[redisNextCACertKey], Key: secret.Data[redisNextCAKeyKey]},
		Previous:   secret.Data[redisPreviousCACertKey],
		RotatedFor: secret.Annotations[redisCARotatedForAnnotation],
	}
	if len(ca.Next.Cert) == 0 || len(ca.Next.Key) == 0 {
		ca.Next = certs.Pair{}
	}
	if len(ca.Previous) == 0 {
		ca.Previous = nil
	}
	ca.Since, _ = time.Parse(time.RFC3339, secret.Annotations[redisCAStageSinceAnnotation])
	return ca
}

// Stage is CAStageTrust, CAStageSwitch, or "" outside a rotation.
func (c RedisCA) Stage() string {
	switch {
	case c.Next.Cert != nil:
		return CAStageTrust
	case c.Previous != nil:
		return CAStageSwitch
	}
	return ""
}

// Bundle is ca.crt of the nodes' Secret: the signing CA, then the incoming or the outgoing
// one during a rotation.
func (c RedisCA) Bundle() []byte {
	var b bytes.Buffer
	for _, pem := range [][]byte{c.Signer.Cert, c.Next.Cert, c.Previous} {
		if len(pem) == 0 {
			continue
		}
		b.Write(pem)
		if pem[len(pem)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// Started is c with a rotation to next begun at now, for the rotate-ca value token.
func (c RedisCA) Started(next certs.Pair, now time.Time, token string) RedisCA {
	c.Next, c.Previous, c.Since, c.RotatedFor = next, nil, now, token
	return c
}

// Advanced is c a stage further at now: from Trust the incoming CA signs and the outgoing
// one stays trusted; from Switch the outgoing one is dropped and the rotation ends.
func (c RedisCA) Advanced(now time.Time) RedisCA {
	switch c.Stage() {
	case CAStageTrust:
		c.Signer, c.Previous, c.Next, c.Since = c.Next, c.Signer.Cert, certs.Pair{}, now
	case CAStageSwitch:
		c.Previous, c.Since = nil, time.Time{}
	}
	return c
}

// RedisCAStageDue is when the current stage of rc's CA rotation may end at the earliest.
func RedisCAStageDue(rc *redisv1alpha1.RedisCluster, ca RedisCA) time.Time {
	overlap := defaultCARotationOverlap
	if rc.Spec.TLS != nil && rc.Spec.TLS.CARotationOverlap != nil {
		overlap = rc.Spec.TLS.CARotationOverlap.Duration
	}
	return ca.Since.Add(overlap)
}

// RedisTLSCASecret is the generated CA's Secret.
func RedisTLSCASecret(rc *redisv1alpha1.RedisCluster, ca RedisCA) *corev1.Secret {
	meta := redisMeta(rc, RedisTLSCASecretName(rc))
	data := map[string][]byte{RedisTLSCertKey: ca.Signer.Cert, RedisTLSKeyKey: ca.Signer.Key}
	if ca.Next.Cert != nil {
		data[redisNextCACertKey], data[redisNextCAKeyKey] = ca.Next.Cert, ca.Next.Key
	}
	if ca.Previous != nil {
		data[redisPreviousCACertKey] = ca.Previous
	}
	annotations := map[string]string{}
	if ca.RotatedFor != "" {
		annotations[redisCARotatedForAnnotation] = ca.RotatedFor
	}
	if !ca.Since.IsZero() {
		annotations[redisCAStageSinceAnnotation] = ca.Since.UTC().Format(time.RFC3339Nano)
	}
	if len(annotations) > 0 {
		meta.Annotations = annotations
	}
	return &corev1.Secret{ObjectMeta: meta, Type: corev1.SecretTypeTLS, Data: data}
}

// WithRedisCAAnnotations is live's annotations with the CA Secret's rotation annotations
// replaced by those of desired (the others, someone else's, are kept).
func WithRedisCAAnnotations(live, desired map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range live {
		if k != redisCARotatedForAnnotation && k != redisCAStageSinceAnnotation {
			out[k] = v
		}
	}
	for k, v := range desired {
		out[k] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
