package resources_test

import (
	"bytes"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	redisv1alpha1 "github.com/middleware-operator/middleware-operator/api/redis/v1alpha1"
	"github.com/middleware-operator/middleware-operator/internal/certs"
	"github.com/middleware-operator/middleware-operator/internal/resources"
)

// TestRedisCARotationStages walks a CA rotation through the CA Secret, as the operator
// writes and reads it back at each stage: what signs, what ca.crt lists, and when a stage
// may end.
func TestRedisCARotationStages(t *testing.T) {
	now := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	oldCA, err := certs.NewCA("old", now.Add(-time.Hour), certs.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	newCA, err := certs.NewCA("new", now, certs.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns"},
		Spec: redisv1alpha1.RedisClusterSpec{TLS: &redisv1alpha1.TLSSpec{Enabled: true, CARotationOverlap: &metav1.Duration{Duration: 30 * time.Second}}}}
	roundTrip := func(ca resources.RedisCA) resources.RedisCA {
		return resources.ReadRedisCA(resources.RedisTLSCASecret(rc, ca))
	}
	ca := roundTrip(resources.RedisCA{Signer: oldCA})

	steps := []struct {
		name        string
		ca          resources.RedisCA
		stage       string
		signer      []byte
		bundle      [][]byte
		due         time.Time
		wantStarted bool
	}{
		{name: "before: the old CA alone", ca: ca, stage: "", signer: oldCA.Cert, bundle: [][]byte{oldCA.Cert}},
		{name: "trust: the old CA signs, both listed", ca: roundTrip(ca.Started(newCA, now, "1")), stage: resources.CAStageTrust,
			signer: oldCA.Cert, bundle: [][]byte{oldCA.Cert, newCA.Cert}, due: now.Add(30 * time.Second)},
		{name: "switch: the new CA signs, both listed", ca: roundTrip(roundTrip(ca.Started(newCA, now, "1")).Advanced(now.Add(time.Minute))),
			stage: resources.CAStageSwitch, signer: newCA.Cert, bundle: [][]byte{newCA.Cert, oldCA.Cert}, due: now.Add(90 * time.Second)},
		{name: "after: the new CA alone", ca: roundTrip(roundTrip(roundTrip(ca.Started(newCA, now, "1")).Advanced(now.Add(time.Minute))).Advanced(now.Add(2 * time.Minute))),
			stage: "", signer: newCA.Cert, bundle: [][]byte{newCA.Cert}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if got := st.ca.Stage(); got != st.stage {
				t.Errorf("stage %q, want %q", got, st.stage)
			}
			if !bytes.Equal(st.ca.Signer.Cert, st.signer) || len(st.ca.Signer.Key) == 0 {
				t.Errorf("the wrong CA signs, or without its key")
			}
			if want := bytes.Join(st.bundle, nil); !bytes.Equal(st.ca.Bundle(), want) {
				t.Errorf("ca.crt lists %d bytes, want the %d of %d CAs", len(st.ca.Bundle()), len(want), len(st.bundle))
			}
			if pool, err := certs.Pool(st.ca.Bundle()); err != nil || pool == nil {
				t.Errorf("ca.crt does not parse: %v", err)
			}
			if st.stage != "" && !resources.RedisCAStageDue(rc, st.ca).Equal(st.due) {
				t.Errorf("due %s, want %s", resources.RedisCAStageDue(rc, st.ca), st.due)
			}
		})
	}

	t.Run("the value a rotation started for is kept through its stages", func(t *testing.T) {
		done := roundTrip(roundTrip(roundTrip(ca.Started(newCA, now, "1")).Advanced(now)).Advanced(now))
		if done.RotatedFor != "1" || done.Stage() != "" {
			t.Errorf("after a whole rotation for %q: RotatedFor %q, stage %q", "1", done.RotatedFor, done.Stage())
		}
	})
}

// TestRedisCAStageLastsTheWholeOverlap: a stage that began in the middle of a second, read
// back from the CA Secret, may not end before the whole overlap has passed (a CI run saw
// stage Trust last 2.2 s of a 3 s overlap when the Secret kept whole seconds).
func TestRedisCAStageLastsTheWholeOverlap(t *testing.T) {
	began := time.Date(2026, 11, 27, 6, 0, 0, 900_000_000, time.UTC)
	next, err := certs.NewCA("new", began, certs.CAValidity)
	if err != nil {
		t.Fatal(err)
	}
	const overlap = 3 * time.Second
	rc := &redisv1alpha1.RedisCluster{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "ns"},
		Spec: redisv1alpha1.RedisClusterSpec{TLS: &redisv1alpha1.TLSSpec{Enabled: true, CARotationOverlap: &metav1.Duration{Duration: overlap}}}}
	ca := resources.RedisCA{}.Started(next, began, "2026-11-27")
	back := resources.ReadRedisCA(resources.RedisTLSCASecret(rc, ca))
	if due := resources.RedisCAStageDue(rc, back); due.Before(began.Add(overlap)) {
		t.Errorf("the stage that began at %s may end at %s, %s before the overlap of %s has passed",
			began.Format(time.RFC3339Nano), due.Format(time.RFC3339Nano), began.Add(overlap).Sub(due), overlap)
	}
}
