package resources

import (
	"fmt"
	"strings"
)

// RedisPassword is the password a Secret value holds, the one definition the operator and
// the pods' scripts share (redisPasswordFunc is its shell twin): the value with one final line
// feed, or CR LF, dropped, so a Secret made from a file (kubectl create secret generic
// --from-file=password=./pw, where echo wrote a newline) holds the password the user typed. A
// value that is empty once trimmed, or that still holds a line feed, a carriage return or a
// NUL, is refused (*PasswordError): redis.conf cannot carry it on one line, and a shell
// variable cannot carry a NUL, so the nodes would not run the password the operator sends.
func RedisPassword(raw []byte) (string, error) {
	pw := string(raw)
	if strings.HasSuffix(pw, "\n") {
		pw = strings.TrimSuffix(strings.TrimSuffix(pw, "\n"), "\r")
	}
	if pw == "" {
		return "", &PasswordError{Empty: true}
	}
	for _, c := range []struct{ char, name string }{{"\n", "a line feed (LF)"}, {"\r", "a carriage return (CR)"}, {"\x00", "a NUL byte"}} {
		if strings.Contains(pw, c.char) {
			return "", &PasswordError{Char: c.name}
		}
	}
	return pw, nil
}

// PasswordError is why a Secret value is not a password (see RedisPassword).
type PasswordError struct {
	// Empty: nothing is left once a final line ending is dropped.
	Empty bool
	// Char names the character the password may not hold.
	Char string
}

func (e *PasswordError) Error() string {
	if e.Empty {
		return "is empty (a final line feed or CR LF is not part of the password)"
	}
	return fmt.Sprintf("holds %s: only one final line feed or CR LF is dropped from a password, and Redis cannot take one with a line break or a NUL inside; write the password without it", e.Char)
}

// redisPasswordFunc defines the shell function password FILE, RedisPassword in POSIX sh: it
// sets pw to FILE's password, or says on stderr why FILE holds none and returns 1. The value
// is read with a sentinel so that command substitution keeps its final line feeds.
const redisPasswordFunc = `nl='
'
cr=` + "`printf '\\r'`" + `
password() {
  [ -f "$1" ] || { echo "the password file $1 is missing" >&2; return 1; }
  [ "` + "`tr -d '\\\\000' < \"$1\" | wc -c`" + `" -eq "` + "`wc -c < \"$1\"`" + `" ] || { echo "the password file $1 holds a NUL byte: Redis cannot take one; write the password without it" >&2; return 1; }
  pw=` + "`cat \"$1\" && echo x`" + ` || return 1
  pw=${pw%x}
  case $pw in *"$nl") pw=${pw%"$nl"}; pw=${pw%"$cr"} ;; esac
  case $pw in
  "") echo "the password file $1 is empty (a final line feed or CR LF is not part of the password)" >&2; return 1 ;;
  *"$nl"*) echo "the password file $1 holds a line feed (LF): only one final line feed or CR LF is dropped from a password; write the password without it" >&2; return 1 ;;
  *"$cr"*) echo "the password file $1 holds a carriage return (CR): only one final line feed or CR LF is dropped from a password; write the password without it" >&2; return 1 ;;
  esac
}
quoted() { password "$1" || exit 1; printf '%s\n' "$pw" | sed 's/[\\"]/\\&/g' | tr -d '\n'; }
`
