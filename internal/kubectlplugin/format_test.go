package kubectlplugin

import (
	"testing"
	"time"
)

func TestCompactSlots(t *testing.T) {
	for name, tc := range map[string]struct {
		text  string
		limit int
		want  string
	}{
		"one range":             {"0-5460", 3, "0-5460 (5461 slots)"},
		"a single slot":         {"5461", 3, "5461 (1 slots)"},
		"within the limit":      {"0-100,102,104-200", 3, "0-100,102,104-200 (199 slots)"},
		"beyond the limit":      {"0-9,20-29,40-49,60-69,80-89", 2, "0-9,20-29 +3 more (50 slots)"},
		"no limit":              {"0-9,20-29,40-49", 0, "0-9,20-29,40-49 (30 slots)"},
		"no slots":              {"", 3, "-"},
		"text it cannot parse":  {"0-x", 3, "0-x"},
		"a range that reverses": {"9-1", 3, "9-1"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := CompactSlots(tc.text, tc.limit); got != tc.want {
				t.Errorf("CompactSlots(%q, %d) = %q, want %q", tc.text, tc.limit, got, tc.want)
			}
		})
	}
}

func TestAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:               "0s",
		45 * time.Second:           "45s",
		119 * time.Second:          "119s",
		12 * time.Minute:           "12m",
		3 * time.Hour:              "3h",
		47 * time.Hour:             "47h",
		5*24*time.Hour + time.Hour: "5d",
	} {
		if got := Age(d); got != want {
			t.Errorf("Age(%s) = %q, want %q", d, got, want)
		}
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1536: "1.5Ki", 256 << 20: "256.0Mi", 3 << 30: "3.0Gi"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPaletteColoursOnlyWhenOn(t *testing.T) {
	if got := (Palette{}).Bad("Failed"); got != "Failed" {
		t.Errorf("the plain palette wrote %q", got)
	}
	if got := (Palette{On: true}).Bad("Failed"); got != "\x1b[31mFailed\x1b[0m" {
		t.Errorf("the terminal palette wrote %q", got)
	}
	if got := visibleLen((Palette{On: true}).Good("Running")); got != len("Running") {
		t.Errorf("visibleLen of a coloured Running = %d, want 7", got)
	}
	if got := (Palette{On: true}).Status("True", true); got != "\x1b[31mTrue\x1b[0m" {
		t.Errorf("Degraded=True should be red, got %q", got)
	}
}
