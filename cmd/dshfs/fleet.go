package main

import (
	"bytes"
	"io"
	"net/url"
	"os"
	"strings"

	"github.com/dshfs/dshfs/eventstore/postgres"
)

// isFleetDSN reports a STORE that names a fleet store (a PostgreSQL connection URL).
func isFleetDSN(s string) bool { return postgres.IsDSN(s) }

// sessionParam takes dshfs's own `session` parameters out of a fleet store URL (postgres://…/db?session=ID,
// the handover form of convert's --session) and returns the URL without them — the driver refuses a
// parameter it does not know, and would send it to the server as a run-time setting — and the ids. Every
// other byte of the URL is kept as given. A STORE that is no fleet URL is returned as it is.
func sessionParam(spec string) (string, []string, error) {
	if !isFleetDSN(spec) {
		return spec, nil, nil
	}
	base, query, hasQuery := strings.Cut(spec, "?")
	if !hasQuery {
		return spec, nil, nil
	}
	query, fragment, hasFragment := strings.Cut(query, "#")
	var kept, ids []string
	for _, kv := range strings.Split(query, "&") {
		k, v, _ := strings.Cut(kv, "=")
		if key, err := url.QueryUnescape(k); err != nil || key != "session" {
			kept = append(kept, kv)
			continue
		}
		id, err := url.QueryUnescape(v)
		if err != nil || id == "" {
			return "", nil, &usageError{"the store URL's session parameter needs a session id (…?session=ID, percent-encoded)"}
		}
		ids = append(ids, id)
	}
	out := base
	if len(kept) > 0 {
		out += "?" + strings.Join(kept, "&")
	}
	if hasFragment {
		out += "#" + fragment
	}
	return out, ids, nil
}

// minSecret is the shortest password the stderr guard masks: a shorter one would mask ordinary words.
const minSecret = 4

// secrets are the passwords the command line and environment give for fleet stores: a URL's user
// password, a password parameter (URL or key=value form) and $PGPASSWORD.
func secrets(args []string) []string {
	var out []string
	add := func(s string) {
		if len(s) < minSecret {
			return
		}
		out = append(out, s, url.QueryEscape(s), url.PathEscape(s), (&url.URL{User: url.UserPassword("u", s)}).User.String()[2:])
	}
	for _, a := range args {
		if isFleetDSN(a) {
			if u, err := url.Parse(a); err == nil {
				if pw, ok := u.User.Password(); ok {
					add(pw)
				}
				add(u.Query().Get("password"))
			}
		}
		if strings.Contains(a, "password=") { // key=value connection strings, and a URL url.Parse refused
			for _, f := range strings.FieldsFunc(a, func(r rune) bool { return r == ' ' || r == '&' || r == '?' }) {
				if v, ok := strings.CutPrefix(f, "password="); ok {
					add(strings.Trim(v, "'"))
					if u, err := url.QueryUnescape(v); err == nil {
						add(u)
					}
				}
			}
		}
	}
	add(os.Getenv("PGPASSWORD"))
	return out
}

// maskWriter masks every secret in what is written through it. It is the last guard on stderr — error
// messages, warnings and a mount's log: the fleet backend already names its store by its redacted URL
// everywhere, and this keeps a password out of what a driver or a library might quote.
type maskWriter struct {
	w       io.Writer
	secrets [][]byte
}

// maskSecrets wraps w when the command line or the environment holds a password.
func maskSecrets(w io.Writer, args []string) io.Writer {
	s := secrets(args)
	if len(s) == 0 {
		return w
	}
	m := &maskWriter{w: w}
	seen := map[string]bool{}
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			m.secrets = append(m.secrets, []byte(x))
		}
	}
	return m
}

func (m *maskWriter) Write(p []byte) (int, error) {
	out := p
	for _, s := range m.secrets {
		if bytes.Contains(out, s) {
			out = bytes.ReplaceAll(out, s, []byte("xxxxx"))
		}
	}
	if _, err := m.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// sameFleet reports two fleet store URLs that name one database the same way (after the session
// parameters are taken out): converting a fleet store into itself is refused as for a directory.
func sameFleet(a, b string) bool {
	return isFleetDSN(a) && isFleetDSN(b) && strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

// specName is how a message names a store argument: a fleet URL without its password.
func specName(spec string) string {
	if !isFleetDSN(spec) {
		return spec
	}
	return postgres.Redact(spec)
}
