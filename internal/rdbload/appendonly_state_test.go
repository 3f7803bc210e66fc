package rdbload

import (
	"strings"
	"testing"
)

// TestAOFStateFromInfo: the AOF, loading and replication fields of INFO persistence and
// replication, and when a node counts as rewritten, failed or still syncing.
func TestAOFStateFromInfo(t *testing.T) {
	info := func(fields ...string) string {
		base := map[string]string{"loading": "0", "role": "master", "aof_enabled": "1", "aof_rewrite_in_progress": "0",
			"aof_rewrite_scheduled": "0", "aof_rewrites": "1", "aof_last_bgrewrite_status": "ok"}
		for _, f := range fields {
			name, value, _ := strings.Cut(f, ":")
			if value == "-" {
				delete(base, name)
				continue
			}
			base[name] = value
		}
		var b strings.Builder
		b.WriteString("# Persistence\r\n")
		for name, value := range base {
			b.WriteString(name + ":" + value + "\r\n")
		}
		return b.String()
	}
	off := aofState{Rewrites: 1, LastOK: true}
	on := aofState{Enabled: true, Rewrites: 1, LastOK: true}
	for name, c := range map[string]struct {
		info                  string
		before                aofState
		settled, done, failed bool
		parseError            bool
	}{
		"turned on, rewritten since":             {info: info("aof_rewrites:2"), before: off, settled: true, done: true},
		"turned on, no rewrite yet":              {info: info(), before: off, settled: true},
		"turned on, rewrite under way":           {info: info("aof_rewrites:2", "aof_rewrite_in_progress:1"), before: off, settled: true},
		"turned on, rewrite scheduled":           {info: info("aof_rewrite_scheduled:1"), before: off, settled: true},
		"turned on, the rewrite failed":          {info: info("aof_rewrites:2", "aof_last_bgrewrite_status:err"), before: off, settled: true, failed: true},
		"on already, nothing under way":          {info: info(), before: on, settled: true, done: true},
		"on already, a rewrite under way":        {info: info("aof_rewrite_in_progress:1"), before: on, settled: true},
		"a replica linked to its master":         {info: info("role:slave", "master_link_status:up", "aof_rewrites:2"), before: off, settled: true, done: true},
		"a replica syncing with its master":      {info: info("role:slave", "master_link_status:down"), before: off},
		"a node loading its dataset":             {info: info("loading:1"), before: off},
		"INFO without aof_last_bgrewrite_status": {info: info("aof_last_bgrewrite_status:-"), parseError: true},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := parseAOFState(c.info)
			if (err != nil) != c.parseError {
				t.Fatalf("parse error %v, want one: %t", err, c.parseError)
			}
			if err != nil {
				return
			}
			if s.settled() != c.settled || s.done(c.before) != c.done || s.failed() != c.failed {
				t.Errorf("%s: settled %t, done %t, failed %t; want %t, %t, %t", s, s.settled(), s.done(c.before), s.failed(), c.settled, c.done, c.failed)
			}
		})
	}
}
