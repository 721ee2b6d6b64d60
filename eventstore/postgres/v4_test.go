package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/compaction"
	"github.com/dshfs/dshfs/config"
	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/internal/harness"
)

const v4ID = "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8"

// v4TurnAt is one v4 turn in the append syntax, with times from at on (a writer given no time stamps the
// clock's, which two stores written one after the other would not share).
func v4TurnAt(n int, call string, at int64) [][]byte {
	msg := func(step int, content string) string {
		return fmt.Sprintf(`{"type":"assistant/message","time":%%d,"data":{"turn":%d,"step":%d,"message":{"role":"assistant","content":%s,"source":{"kind":"model"},"id":"a-%d-%d"}},"surfaceOp":"append"}`, n, step, content, n, step)
	}
	lines := []string{
		fmt.Sprintf(`{"type":"turn/start","time":%%d,"data":{"turn":%d}}`, n),
		fmt.Sprintf(`{"type":"step/start","time":%%d,"data":{"turn":%d,"step":1}}`, n),
		fmt.Sprintf(`{"type":"user/message","time":%%d,"data":{"content":[{"type":"text","text":"turn %d"}],"source":{"kind":"user"},"role":"user","id":"u-%d"},"surfaceOp":"append"}`, n, n),
		msg(1, `[{"type":"tool-call","id":"`+call+`","name":"bash","arguments":"{\"command\":\"ls\"}"}]`),
		fmt.Sprintf(`{"type":"tool/call","time":%%d,"data":{"turn":%d,"step":1,"callId":"%s","name":"bash","arguments":"{\"command\":\"ls\"}"}}`, n, call),
		fmt.Sprintf(`{"type":"tool/result","time":%%d,"data":{"turn":%d,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"%s"},"toolCallId":"%s","content":[{"type":"text","text":"README.md"}],"id":"r-%d"}},"surfaceOp":"append"}`, n, call, call, n),
		fmt.Sprintf(`{"type":"step/end","time":%%d,"data":{"turn":%d,"step":1}}`, n),
		fmt.Sprintf(`{"type":"step/start","time":%%d,"data":{"turn":%d,"step":2}}`, n),
		msg(2, `[{"type":"text","text":"done"}]`),
		fmt.Sprintf(`{"type":"step/end","time":%%d,"data":{"turn":%d,"step":2}}`, n),
		fmt.Sprintf(`{"type":"turn/end","time":%%d,"data":{"turn":%d,"reason":{"kind":"completed"}}}`, n),
	}
	out := make([][]byte, len(lines))
	for i, l := range lines {
		out[i] = fmt.Appendf(nil, l, at+int64(i))
	}
	return out
}

// v4Pair is the v4 fixture session in a raw JSONL root and, ingested from that file's own lines, in a
// fleet store (released, so writable there).
func v4Pair(t *testing.T) (fleet *Backend, fst *eventstore.Store, file *jsonl.Backend, jst *eventstore.Store, path func(id string) string) {
	t.Helper()
	dir := fixtures.CopyTree(t, fixtures.Path(t, "generations", "v4", "raw-root"))
	jb, err := jsonl.Open(dir, jsonl.None)
	if err != nil {
		t.Fatal(err)
	}
	path = func(id string) string {
		return filepath.Join(dir, "--home-dev-projects-acme-api--", id, "session.v4.jsonl")
	}
	text, err := os.ReadFile(path(v4ID))
	if err != nil {
		t.Fatal(err)
	}
	ls := bytes.Split(bytes.TrimSuffix(text, []byte("\n")), []byte("\n"))
	_, _, dsn := newDB(t)
	b := open(t, dsn, Options{Host: "h", PendingDir: t.TempDir()})
	ctx := context.Background()
	if err := b.Ingest(ctx, "h", v4ID, ls[0], 0, ls[1:]); err != nil {
		t.Fatalf("ingesting a v4 log: %v", err)
	}
	if err := b.Release(ctx, "h", v4ID); err != nil {
		t.Fatal(err)
	}
	return b, eventstore.New(b), jb, eventstore.New(jb), path
}

var endSeedTime = regexp.MustCompile(`("type":"session/end-seed","seq":[0-9]+,"time":)[0-9]+`)

// sameAsFile checks that the fleet store's raw text of session id is byte for byte the raw v4 file.
func sameAsFile(t *testing.T, b *Backend, id, file string) {
	t.Helper()
	got, err := b.ReadRaw(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// the session/end-seed a resume writes carries the clock's time, which two stores written one after
	// the other do not share
	got, want = endSeedTime.ReplaceAll(got, []byte("${1}0")), endSeedTime.ReplaceAll(want, []byte("${1}0"))
	if !bytes.Equal(got, want) {
		t.Fatalf("the fleet store's %s is not the JSONL store's v4 file:\n%s\nwant\n%s", id, got, want)
	}
}

// harnessAgrees checks that the harness's v4 code restores the fleet store's raw text of session id, as a
// session.v4.jsonl, to exactly the header and events the fleet store loads.
func harnessAgrees(t *testing.T, b *Backend, id string) *eventstore.Prefix {
	t.Helper()
	ctx := context.Background()
	raw, err := b.ReadRaw(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	r, err := harness.GetFormatsV4(t).DecodeText(t, raw)
	if err != nil {
		t.Fatal(err)
	}
	if r.Refusal != "" {
		t.Fatalf("the harness's v4 code refuses the fleet store's %s: %s", id, r.Refusal)
	}
	p, err := b.LoadStored(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for _, e := range p.Events {
		got = append(append(got, e.Raw...), '\n')
	}
	if !bytes.Equal(got, r.Events) || !bytes.Equal(p.Header.Meta(), r.Header) {
		t.Fatalf("the fleet store and the harness's v4 code restore %s differently", id)
	}
	return p
}

func write(t *testing.T, st *eventstore.Store, id string, lines [][]byte) {
	t.Helper()
	ctx := context.Background()
	w, err := st.Writer(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Accept(lines); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestV4FleetWrites: a v4 session in the fleet store is written in v4's shapes, as a JSONL store writes
// it — an append, a crashed turn's resume and a fork's child leave the fleet store holding byte for byte
// the v4 file the JSONL store holds after the same writes — and the harness's v4 code restores what the
// fleet store renders to exactly the events it serves, also after a compaction, for a new v4 session and
// after a prune in its open turn.
func TestV4FleetWrites(t *testing.T) {
	ctx := context.Background()
	b, fst, _, jst, path := v4Pair(t)
	sameAsFile(t, b, v4ID, path(v4ID))
	if l, err := b.List(ctx); err != nil || len(l.Entries) != 1 || l.Entries[0].Generation != 4 || l.Entries[0].Refusal != nil {
		t.Fatalf("listing: %+v, %v", l, err)
	}
	harnessAgrees(t, b, v4ID)

	for _, st := range []*eventstore.Store{jst, fst} {
		write(t, st, v4ID, v4TurnAt(3, "call-3", 1800000000000))
		crash := v4TurnAt(4, "call-4", 1800000001000)[:5]
		write(t, st, v4ID, crash)
		if _, err := st.Resume(ctx, v4ID); err != nil {
			t.Fatalf("resume: %v", err)
		}
	}
	sameAsFile(t, b, v4ID, path(v4ID))
	p := harnessAgrees(t, b, v4ID)
	if last := p.Events[len(p.Events)-1]; last.Type != "session/end-seed" {
		t.Fatalf("resume ends with %s", last.Type)
	}

	var children []string
	for _, st := range []*eventstore.Store{jst, fst} {
		child, err := st.Fork(ctx, v4ID, nil, "child")
		if err != nil {
			t.Fatalf("fork: %v", err)
		}
		write(t, st, child, v4TurnAt(5, "call-5", 1800000002000))
		children = append(children, child)
	}
	jc, err := jst.Backend().LoadStored(ctx, children[0])
	if err != nil {
		t.Fatal(err)
	}
	fc := harnessAgrees(t, b, children[1])
	if len(fc.Events) != len(jc.Events) || fc.Later == nil || fc.Later.Cut != jc.Later.Cut {
		t.Fatalf("the fleet store's child holds %d events, the JSONL store's %d", len(fc.Events), len(jc.Events))
	}
	for i := range fc.Events {
		if !bytes.Equal(endSeedTime.ReplaceAll(fc.Events[i].Raw, nil), endSeedTime.ReplaceAll(jc.Events[i].Raw, nil)) {
			t.Fatalf("the children differ at seq %d", i)
		}
	}

	w, err := fst.Writer(ctx, v4ID)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := compaction.Compact(ctx, w, compaction.Request{Summarizer: compaction.NewSummarizer(config.Default().Compaction)}); err != nil || out.Nothing {
		t.Fatalf("compact: %+v %v", out, err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	p = harnessAgrees(t, b, v4ID)
	if !slices.ContainsFunc(p.Events, func(e event.Event) bool { return bytes.Contains(e.Raw, []byte(`"kind":"compact-checkpoint"`)) }) {
		t.Fatal("no compaction checkpoint written")
	}

	cwd := event.String("/work/p")
	if err := fst.Create(ctx, eventstore.V4Header(event.Header{ID: "new-v4", CreatedAt: 1800000000000, Cwd: &cwd})); err != nil {
		t.Fatalf("create a v4 session: %v", err)
	}
	write(t, fst, "new-v4", v4TurnAt(1, "call-1", 1800000003000))
	if p := harnessAgrees(t, b, "new-v4"); len(p.Events) != 11 {
		t.Fatalf("new v4 session: %d events", len(p.Events))
	}
	if g := query[int16](t, b.cfg.ConnConfig.ConnString(), `SELECT generation FROM sessions WHERE id = 'new-v4'`); g != 4 {
		t.Fatalf("generation %d", g)
	}

	// the tool-result pruner, inside an open turn whose result is long, in v4's shapes
	open := v4TurnAt(2, "call-2", 1800000004000)[:6]
	open[5] = bytes.Replace(open[5], []byte(`"text":"README.md"`), []byte(`"text":"`+strings.Repeat("x", 10000)+`"`), 1)
	w, err = fst.Writer(ctx, "new-v4")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Accept(open); err != nil {
		t.Fatal(err)
	}
	if out, err := compaction.PruneSession(ctx, w, config.Default().Pruner); err != nil || len(out.Pruned) != 1 {
		t.Fatalf("prune: %+v %v", out, err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if p := harnessAgrees(t, b, "new-v4"); !bytes.Contains(p.Events[len(p.Events)-1].Raw, []byte(`"surfaceOp":{"op":"replace","startSeq":16,"endSeq":16}`)) {
		t.Fatalf("prune replacement %s", p.Events[len(p.Events)-1].Raw)
	}
}

// TestV4FleetTornRow: a row the v4 restore rejects after the last one it accepts (no later turn/end
// proves it committed) is the torn tail, as in a v4 file: the session reads to the row before, and a
// resume moves the row to `kept` (kind torn) and leaves a log the harness's v4 code restores.
func TestV4FleetTornRow(t *testing.T) {
	ctx := context.Background()
	b, fst, _, _, _ := v4Pair(t)
	bad := []byte(`{"type":"turn/start","seq":26,"data":{"turn":3}}`)
	if _, err := b.pool.Exec(ctx, `INSERT INTO events (session_id, seq, last_seq, type, time, line, compressed) VALUES ($1, 26, 26, 'turn/start', 0, $2, false)`, v4ID, bad); err != nil {
		t.Fatal(err)
	}
	p, err := b.LoadStored(ctx, v4ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 26 || p.Torn == nil || p.Torn.Seq != 26 || p.Torn.Bytes != int64(len(bad))+1 {
		t.Fatalf("%d events, torn %+v; want 26 and the row at seq 26 torn", len(p.Events), p.Torn)
	}
	if _, err := fst.Resume(ctx, v4ID); err != nil {
		t.Fatalf("resume: %v", err)
	}
	kept, err := b.KeptOf(ctx, v4ID)
	if err != nil || len(kept) != 1 || kept[0].Kind != "torn" || !bytes.HasSuffix(kept[0].Body, append(bad, '\n')) {
		t.Fatalf("kept %+v %v, want the torn row", kept, err)
	}
	if p := harnessAgrees(t, b, v4ID); p.Torn != nil || len(p.Events) < 26 {
		t.Fatalf("after the resume: %d events, torn %+v", len(p.Events), p.Torn)
	}
}

// TestSupersede: a synced v0 log is replaced by its v4 successor in one transaction only by the host that
// feeds it and at the revision it compared: the v0 log is kept (kind superseded), the session gets a new
// identity and loses its stale state. Another host, a released session, another revision or a session
// already v4 is refused with nothing changed.
func TestSupersede(t *testing.T) {
	ctx := context.Background()
	dir := fixtures.Path(t, "generations", "v4", "raw-root", "--home-dev-projects-acme-api--", v4ID, "session.v4.jsonl")
	text, err := os.ReadFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	v4 := bytes.Split(bytes.TrimSuffix(text, []byte("\n")), []byte("\n"))
	_, _, dsn := newDB(t)
	b := open(t, dsn, Options{Host: "h"})
	if err := b.Ingest(ctx, "h", v4ID, header(v4ID), 0, lines(0, 3)); err != nil {
		t.Fatal(err)
	}
	if err := b.NoteSync(ctx, "h", v4ID, Stale, "upgraded"); err != nil {
		t.Fatal(err)
	}
	old, err := b.ReadRaw(ctx, v4ID)
	if err != nil {
		t.Fatal(err)
	}
	held, _ := b.Held(ctx, v4ID)
	before, _ := b.Stat(ctx, v4ID, "")
	for _, c := range []struct {
		name, host string
		rev        int64
		want       string
	}{
		{"another revision", "h", held.Revision - 1, "changed in the fleet store"},
		{"another host", "g", held.Revision, "already in the fleet store from host"},
	} {
		if _, err := b.Supersede(ctx, c.host, v4ID, c.rev, v4[0], v4[1:]); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: %v, want %q", c.name, err, c.want)
		}
		if got, _ := b.ReadRaw(ctx, v4ID); !bytes.Equal(got, old) {
			t.Fatalf("%s: the session changed", c.name)
		}
	}
	rev, err := b.Supersede(ctx, "h", v4ID, held.Revision, v4[0], v4[1:])
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := b.ReadRaw(ctx, v4ID); !bytes.Equal(got, text) {
		t.Fatal("the session is not the v4 log after the superseding")
	}
	after, _ := b.Stat(ctx, v4ID, "")
	if h, _ := b.Held(ctx, v4ID); h.Generation != 4 || h.Revision != rev || h.SyncHost != "h" || after.Identity == before.Identity {
		t.Fatalf("after: %+v, identity %s (was %s)", h, after.Identity, before.Identity)
	}
	kept, err := b.KeptOf(ctx, v4ID)
	if err != nil || len(kept) != 1 || kept[0].Kind != "superseded" || !bytes.Equal(kept[0].Body, old) {
		t.Fatalf("kept %+v %v", kept, err)
	}
	if states, _ := b.SyncStates(ctx); len(states) != 0 {
		t.Fatalf("states after the superseding: %+v", states)
	}
	if _, err := b.Supersede(ctx, "h", v4ID, rev, v4[0], v4[1:]); err == nil || !strings.Contains(err.Error(), "already generation v4") {
		t.Fatalf("superseding a v4 session: %v", err)
	}
	if err := b.Release(ctx, "h", v4ID); err != nil {
		t.Fatal(err)
	}
	h, _ := b.Held(ctx, v4ID)
	var rel *ReleasedError
	if _, err := b.Supersede(ctx, "h", v4ID, h.Revision, v4[0], v4[1:]); !errors.As(err, &rel) {
		t.Fatalf("superseding a released session: %v", err)
	}
}
