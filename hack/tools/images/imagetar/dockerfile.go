package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// instruction is one Dockerfile instruction, its continuation lines joined.
type instruction struct {
	line  int               // where it starts, 1-based
	cmd   string            // upper case: FROM, COPY, LABEL, ...
	flags map[string]string // leading --name=value flags (COPY --from=builder)
	args  string            // the rest, trimmed
}

// stage is a FROM and the instructions after it.
type stage struct {
	from, name string
	ins        []instruction
}

// parseDockerfile splits a Dockerfile into its stages. It knows the syntax the project's
// Dockerfiles use: comments, backslash continuations, leading --flags and FROM ... AS name;
// parser directives and heredocs are not supported.
func parseDockerfile(text string) ([]stage, error) {
	var (
		stages []stage
		cur    strings.Builder
		start  int
	)
	flush := func() error {
		s := strings.TrimSpace(cur.String())
		cur.Reset()
		if s == "" {
			return nil
		}
		word, rest, _ := strings.Cut(s, " ")
		in := instruction{line: start, cmd: strings.ToUpper(word), flags: map[string]string{}}
		rest = strings.TrimSpace(rest)
		for strings.HasPrefix(rest, "--") {
			var flag string
			flag, rest, _ = strings.Cut(rest, " ")
			rest = strings.TrimSpace(rest)
			k, v, _ := strings.Cut(strings.TrimPrefix(flag, "--"), "=")
			in.flags[k] = v
		}
		in.args = rest
		if in.cmd == "FROM" {
			f := strings.Fields(rest)
			st := stage{}
			switch {
			case len(f) == 1:
				st.from = f[0]
			case len(f) == 3 && strings.EqualFold(f[1], "as"):
				st.from, st.name = f[0], f[2]
			default:
				return fmt.Errorf("line %d: FROM %s: want an image and an optional AS name", start, rest)
			}
			stages = append(stages, st)
			return nil
		}
		if len(stages) == 0 {
			if in.cmd == "ARG" { // an ARG before the first FROM: only FROM may use it
				return nil
			}
			return fmt.Errorf("line %d: %s before the first FROM", start, in.cmd)
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
		return nil
	}
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue // a comment, also between continuation lines
		}
		if cur.Len() == 0 {
			if trimmed == "" {
				continue
			}
			start = i + 1
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`) + " ")
			continue
		}
		cur.WriteString(trimmed)
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("line %d: the file ends in a continuation", start)
	}
	if len(stages) == 0 {
		return nil, fmt.Errorf("no FROM")
	}
	return stages, nil
}

// execForm reads the JSON array form of ENTRYPOINT, CMD, COPY and ADD; a shell form command
// becomes /bin/sh -c, as docker build makes it.
func execForm(in instruction, shell bool) ([]string, error) {
	if strings.HasPrefix(in.args, "[") {
		var words []string
		if err := json.Unmarshal([]byte(in.args), &words); err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", in.line, in.cmd, err)
		}
		return words, nil
	}
	if shell {
		return []string{"/bin/sh", "-c", in.args}, nil
	}
	return strings.Fields(in.args), nil
}

// keyValues reads the key=value pairs of LABEL and ENV, with double-quoted values, or the
// old single `KEY value` form.
func keyValues(in instruction) ([][2]string, error) {
	s := in.args
	if k, v, ok := strings.Cut(s, " "); ok && !strings.Contains(k, "=") {
		return [][2]string{{k, unquote(strings.TrimSpace(v))}}, nil
	}
	var out [][2]string
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		k, rest, ok := strings.Cut(s, "=")
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("line %d: %s: want key=value in %q", in.line, in.cmd, s)
		}
		var v string
		if strings.HasPrefix(rest, `"`) {
			end := 1
			for ; end < len(rest) && (rest[end] != '"' || rest[end-1] == '\\'); end++ {
			}
			if end == len(rest) {
				return nil, fmt.Errorf("line %d: %s: unterminated quote in %q", in.line, in.cmd, s)
			}
			v, s = unquote(rest[:end+1]), rest[end+1:]
		} else {
			v, s, _ = strings.Cut(rest, " ")
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return strings.ReplaceAll(s[1:len(s)-1], `\"`, `"`)
	}
	return s
}
