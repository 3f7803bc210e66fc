package redis

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/credentials"
	"github.com/middleware-operator/middleware-operator/internal/rediscluster/plan"
	"github.com/middleware-operator/middleware-operator/tests/redistest"
)

// TestSetCoverageLooksAgainAfterASecondWhenANodeWasLeftOut: the planner asks for the next
// look 100 ms after a coverage setting, but a node that did not answer it (no error: it is
// set when it answers again) would be the next step again at once: the look after it comes
// after plan.LookSoon, not ten times a second.
func TestSetCoverageLooksAgainAfterASecondWhenANodeWasLeftOut(t *testing.T) {
	// A node that lets the operator in and then never answers CONFIG SET: a node stalled
	// mid-step, which configureNodes leaves out without an error.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = silent.Close() }()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			go answerAllButConfig(c)
		}
	}()
	r := &RedisClusterReconciler{}
	s := &state{rc: redistest.NewCluster("ns", "c", 3), creds: credentials.Facts{Password: "secret"},
		step: plan.Step{Kind: plan.StepSetCoverage, Addrs: []string{silent.Addr().String()}, Coverage: "no", After: 100 * time.Millisecond}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.setCoverage(ctx, s); err != nil {
		t.Fatalf("a node that does not answer is no error (it is set when it answers): %v", err)
	}
	if s.step.After != plan.LookSoon {
		t.Errorf("next look after %s with a node left out, want %s", s.step.After, plan.LookSoon)
	}
}

// answerAllButConfig answers +OK to every command on c but HELLO (unknown, as to an old
// server) and CONFIG, which it leaves unanswered, until c closes.
func answerAllButConfig(c net.Conn) {
	defer func() { _ = c.Close() }()
	r := bufio.NewReader(c)
	for {
		head, err := r.ReadString('\n') // *<n>
		if err != nil {
			return
		}
		n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
		var words []string
		for range n {
			if _, err := r.ReadString('\n'); err != nil { // $<len>
				return
			}
			w, err := r.ReadString('\n')
			if err != nil {
				return
			}
			words = append(words, strings.TrimSpace(w))
		}
		answer := "+OK\r\n"
		switch {
		case len(words) > 0 && strings.EqualFold(words[0], "CONFIG"):
			continue
		case len(words) > 0 && strings.EqualFold(words[0], "HELLO"): // the client falls back to AUTH
			answer = "-ERR unknown command 'HELLO'\r\n"
		}
		if _, err := c.Write([]byte(answer)); err != nil {
			return
		}
	}
}
