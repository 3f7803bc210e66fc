package kubectlplugin

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EventsShown is how many of an object's latest events a status screen shows.
const EventsShown = 8

// messageWidth is where a condition's or event's message is cut on a status screen.
const messageWidth = 110

// writeConditions writes the Conditions section; conditions named in inverted are bad when
// True (Degraded).
func writeConditions(b *strings.Builder, p Palette, conds []metav1.Condition, now time.Time, inverted ...string) {
	b.WriteString(p.Title("Conditions") + "\n")
	if len(conds) == 0 {
		b.WriteString("  none yet\n")
		return
	}
	rows := [][]string{{"TYPE", "STATUS", "REASON", "AGE", "MESSAGE"}}
	for _, c := range conds {
		rows = append(rows, []string{c.Type, p.Status(string(c.Status), slices.Contains(inverted, c.Type)), c.Reason,
			Age(now.Sub(c.LastTransitionTime.Time)), cut(c.Message, messageWidth)})
	}
	table(b, rows)
}

// writeEvents writes the Events section: the latest EventsShown of events, oldest first.
func writeEvents(b *strings.Builder, p Palette, events []corev1.Event, now time.Time) {
	events = LatestEvents(events, EventsShown)
	fmt.Fprintf(b, "%s\n", p.Title(fmt.Sprintf("Events (last %d)", EventsShown)))
	if len(events) == 0 {
		b.WriteString("  none\n")
		return
	}
	rows := [][]string{{"AGE", "TYPE", "REASON", "MESSAGE"}}
	for _, e := range events {
		kind := e.Type
		if kind == corev1.EventTypeWarning {
			kind = p.Warn(kind)
		}
		reason := e.Reason
		if e.Count > 1 {
			reason = fmt.Sprintf("%s (x%d)", reason, e.Count)
		}
		rows = append(rows, []string{Age(now.Sub(EventTime(e))), kind, reason, cut(e.Message, messageWidth)})
	}
	table(b, rows)
}

// EventTime is when an event last happened: its last timestamp, else its event time, else
// when it was created.
func EventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

// LatestEvents returns the n latest events, oldest first.
func LatestEvents(events []corev1.Event, n int) []corev1.Event {
	out := slices.Clone(events)
	slices.SortStableFunc(out, func(a, b corev1.Event) int { return EventTime(a).Compare(EventTime(b)) })
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// cut shortens s to width runes on one line, ending a cut text with "...".
func cut(s string, width int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	return string(r[:width-3]) + "..."
}
