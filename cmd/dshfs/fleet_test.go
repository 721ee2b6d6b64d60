package main

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestSessionParam: the session parameters leave the URL and every other byte of it stays as given.
func TestSessionParam(t *testing.T) {
	for _, c := range []struct {
		in, out string
		ids     []string
		bad     bool
	}{
		{in: "/tmp/store", out: "/tmp/store"},
		{in: "postgres://h/db", out: "postgres://h/db"},
		{in: "postgres://u:p%40ss@h:5432/db?session=abc", out: "postgres://u:p%40ss@h:5432/db", ids: []string{"abc"}},
		{in: "postgresql://h/db?sslmode=require&session=a%2Fb&sslrootcert=%2Ftmp%2Fca.pem", out: "postgresql://h/db?sslmode=require&sslrootcert=%2Ftmp%2Fca.pem", ids: []string{"a/b"}},
		{in: "postgres://h/db?session=x&session=y+z", out: "postgres://h/db", ids: []string{"x", "y z"}},
		{in: "postgres://h/db?host=%2Ftmp&session=x#frag", out: "postgres://h/db?host=%2Ftmp#frag", ids: []string{"x"}},
		{in: "postgres://h/db?session=", bad: true},
		{in: "postgres://h/db?session=%zz", bad: true},
		{in: "sqlite:/x?session=y", out: "sqlite:/x?session=y"},
	} {
		out, ids, err := sessionParam(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("%s: no error", c.in)
			}
			continue
		}
		if err != nil || out != c.out || !reflect.DeepEqual(ids, c.ids) {
			t.Errorf("%s: got %q %q %v, want %q %q", c.in, out, ids, err, c.out, c.ids)
		}
	}
}

// TestMaskSecrets: a password given in a fleet URL (plain or percent-encoded), in a password parameter, in a
// key=value string or in $PGPASSWORD never reaches stderr; without one, stderr is not wrapped.
func TestMaskSecrets(t *testing.T) {
	t.Setenv("PGPASSWORD", "env-Secret-91")
	args := []string{"ls", "postgres://alice:s3cr%2Ft-Pw@db.example:5432/fleet", "postgresql://h/db?password=Qpar4m", "host=h password='kv-Pass9'"}
	var buf bytes.Buffer
	w := maskSecrets(&buf, args)
	for _, leak := range []string{"s3cr/t-Pw", "s3cr%2Ft-Pw", "Qpar4m", "kv-Pass9", "env-Secret-91"} {
		fmt.Fprintf(w, "dshfs: failed to connect with %s here\n", leak)
	}
	if strings.Contains(buf.String(), "Secret") || strings.Contains(buf.String(), "s3cr") || strings.Contains(buf.String(), "Qpar4m") || strings.Contains(buf.String(), "kv-Pass9") {
		t.Fatalf("a password got through:\n%s", buf.String())
	}
	if n := strings.Count(buf.String(), "xxxxx"); n != 5 {
		t.Fatalf("%d masks, want 5:\n%s", n, buf.String())
	}
	t.Setenv("PGPASSWORD", "")
	if w := maskSecrets(&buf, []string{"ls", "/tmp/store"}); w != &buf {
		t.Fatal("stderr wrapped without a password")
	}
}

// TestSpecName: a fleet URL is named without its password.
func TestSpecName(t *testing.T) {
	got := specName("postgres://alice:hunter22@h/db?password=other77&sslmode=disable")
	if strings.Contains(got, "hunter22") || strings.Contains(got, "other77") || !strings.Contains(got, "alice") {
		t.Fatalf("specName = %s", got)
	}
}
