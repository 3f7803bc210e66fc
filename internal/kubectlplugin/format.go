package kubectlplugin

import (
	"fmt"
	"strings"
	"time"

	"github.com/middleware-operator/middleware-operator/internal/rediscluster/nodes"
)

// Palette colours text for a terminal; its zero value writes plain text.
type Palette struct {
	// On enables ANSI colours (set it only when the output is a terminal).
	On bool
}

// The ANSI colours the plugin uses.
const (
	ansiRed    = "31"
	ansiGreen  = "32"
	ansiYellow = "33"
	ansiBold   = "1"
)

func (p Palette) paint(code, s string) string {
	if !p.On || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// Good, Warn and Bad colour a healthy, doubtful or failing value; Title a heading.
func (p Palette) Good(s string) string  { return p.paint(ansiGreen, s) }
func (p Palette) Warn(s string) string  { return p.paint(ansiYellow, s) }
func (p Palette) Bad(s string) string   { return p.paint(ansiRed, s) }
func (p Palette) Title(s string) string { return p.paint(ansiBold, s) }

// Status colours a condition status: True green, False red, anything else yellow. invert
// is for conditions whose True is bad (Degraded).
func (p Palette) Status(status string, invert bool) string {
	good, bad := "True", "False"
	if invert {
		good, bad = bad, good
	}
	switch status {
	case good:
		return p.Good(status)
	case bad:
		return p.Bad(status)
	}
	return p.Warn(status)
}

// Age prints a duration as kubectl does for an AGE column: 45s, 12m, 3h, 5d.
func Age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d/time.Second))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd", int(d/(24*time.Hour)))
}

// Bytes prints a byte count in binary units, one decimal: 512B, 1.5Ki, 256.0Mi.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ci", float64(n)/float64(div), "KMGTP"[exp])
}

// CompactSlots shortens a node's slot ranges ("0-100,102,104-5460") for one screen: at most
// limit ranges, then how many more, then the slot count: "0-100,102 +1 more (5460 slots)".
// Text it cannot read is returned as it is.
func CompactSlots(text string, limit int) string {
	if text == "" {
		return "-"
	}
	ranges, err := nodes.ParseSlotRanges(text)
	if err != nil {
		return text
	}
	shown := ranges
	if limit > 0 && len(ranges) > limit {
		shown = ranges[:limit]
	}
	var b strings.Builder
	b.WriteString(nodes.FormatSlotRanges(shown))
	if more := len(ranges) - len(shown); more > 0 {
		fmt.Fprintf(&b, " +%d more", more)
	}
	fmt.Fprintf(&b, " (%d slots)", nodes.CountSlots(ranges))
	return b.String()
}

// table writes rows as aligned columns separated by two spaces (no trailing spaces). Widths
// are counted on the text without colour codes.
func table(b *strings.Builder, rows [][]string) {
	widths := map[int]int{}
	for _, row := range rows {
		for i, cell := range row {
			widths[i] = max(widths[i], visibleLen(cell))
		}
	}
	for _, row := range rows {
		var line strings.Builder
		for i, cell := range row {
			line.WriteString(cell)
			if i < len(row)-1 {
				line.WriteString(strings.Repeat(" ", widths[i]-visibleLen(cell)+2))
			}
		}
		b.WriteString("  " + strings.TrimRight(line.String(), " ") + "\n")
	}
}

// visibleLen is the length of s without ANSI colour codes.
func visibleLen(s string) int {
	n, inEscape := 0, false
	for _, r := range s {
		switch {
		case r == '\x1b':
			inEscape = true
		case inEscape:
			if r == 'm' {
				inEscape = false
			}
		default:
			n++
		}
	}
	return n
}
