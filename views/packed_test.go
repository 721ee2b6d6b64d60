package views_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/eventtest"
	"github.com/dshfs/dshfs/internal/fixtures"
	"github.com/dshfs/dshfs/views"
)

// TestPackedSessionViews: a session loaded with its chunk rows packed serves the events view, each event's
// view, its mtime and its size estimate from the packed rows exactly as from the expanded list, and
// expands them only when another view asks (Events). Every zstd session the harness wrote in the fixtures.
func TestPackedSessionViews(t *testing.T) {
	ctx := context.Background()
	withRows := 0
	// and a crash inside a streamed step: the newest event time is a packed row's
	crashed, err := jsonl.Open(t.TempDir(), jsonl.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	cwd := event.String("/srv/p")
	if err := eventstore.New(crashed).Create(ctx, event.Header{ID: "c", CreatedAt: 1, Cwd: &cwd}); err != nil {
		t.Fatal(err)
	}
	chunk := func(seq, time int, text string) string {
		return `{"type":"assistant/chunk","seq":` + strconv.Itoa(seq) + `,"time":` + strconv.Itoa(time) +
			`,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"` + text + `"}}}`
	}
	if err := eventstore.New(crashed).Append(ctx, "c", eventtest.Events(t,
		`{"type":"turn/start","seq":0,"time":1000,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":1001,"data":{"turn":1,"step":1}}`,
		chunk(2, 1002, "a"), chunk(3, 1005, "b"), chunk(4, 1009, "c"), chunk(5, 1007, "d"))); err != nil {
		t.Fatal(err)
	}
	for _, src := range [][]string{{"generated", "zstd"}, {"upstream", "zstd"}, nil} {
		var b eventstore.Backend = crashed
		if src != nil {
			if b, err = jsonl.Open(fixtures.CopyTree(t, fixtures.Path(t, src...)), ""); err != nil {
				t.Fatal(err)
			}
		}
		st := eventstore.New(b)
		st.Tuning.Workers = 3 // the pieces of a view made on workers, whatever the machine
		l, err := st.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Entries {
			if e.Refusal != nil {
				continue
			}
			load := func() *views.Session {
				s, err := views.Load(ctx, st, e.ID, views.Options{})
				if err != nil || s.Refusal != nil {
					t.Fatalf("%s: %v %v", e.ID, err, s.Refusal)
				}
				return s
			}
			// a view of each event, asked of a snapshot whose rows are still packed
			one := load()
			if views.PackedRows(one) > 0 {
				withRows++
			}
			single := make([][]byte, one.EventCount())
			for i := range single {
				if single[i], err = one.Render(ctx, views.Event(int64(i))); err != nil {
					t.Fatal(err)
				}
			}
			s := load()
			rows := views.PackedRows(s)
			var streamed bytes.Buffer
			if err := s.WriteView(ctx, &streamed, views.Events); err != nil {
				t.Fatal(err)
			}
			rendered, err := s.Render(ctx, views.Events)
			if err != nil {
				t.Fatal(err)
			}
			// the same view in pieces of a few events, made on the store's workers, rows straddling the
			// pieces' nominal ends; and a writer that fails half way through
			restore := views.SetPackedPieces(3, 0)
			var pieces bytes.Buffer
			perr := s.WriteView(ctx, &pieces, views.Events)
			half := &failAfter{n: len(rendered) / 2}
			ferr := s.WriteView(ctx, half, views.Events)
			restore()
			if perr != nil || !bytes.Equal(pieces.Bytes(), rendered) {
				t.Fatalf("%s: the events view in pieces differs (%v)", e.ID, perr)
			}
			var we *views.WriteError
			if len(rendered) > 0 && (!errors.As(ferr, &we) || !errors.Is(ferr, errDiskFull)) {
				t.Fatalf("%s: a writer failing half way: %v", e.ID, ferr)
			}
			mtime := s.ModTime()
			n, size := s.RecordBytes()
			if views.PackedRows(s) != rows {
				t.Fatalf("%s: the events view, mtime or size changed the packed rows", e.ID)
			}
			var want bytes.Buffer
			var wantSize int64
			newest := int64(-1)
			for i, ev := range s.Events() {
				want.Write(ev.Raw)
				want.WriteByte('\n')
				wantSize += int64(len(ev.Raw))
				if !bytes.Equal(single[i], append(bytes.Clone(ev.Raw), '\n')) {
					t.Fatalf("%s: event %d alone %s, in the list %s", e.ID, i, single[i], ev.Raw)
				}
				if tm, ok := ev.Time(); ok {
					if ms, err := strconv.ParseInt(string(tm), 10, 64); err == nil {
						newest = max(newest, ms)
					}
				}
			}
			if !bytes.Equal(streamed.Bytes(), want.Bytes()) || !bytes.Equal(rendered, want.Bytes()) {
				t.Fatalf("%s (%d rows packed): the events view differs from the expanded list", e.ID, rows)
			}
			// expanded, the snapshot drops its rows and serves the same; a load asked for expanded rows
			// keeps none packed
			again, err := s.Render(ctx, views.Events)
			if views.PackedRows(s) != 0 || err != nil || !bytes.Equal(again, want.Bytes()) {
				t.Fatalf("%s: after Events, %d rows packed, the events view %v", e.ID, views.PackedRows(s), err)
			}
			ex, err := views.Load(ctx, st, e.ID, views.Options{Expanded: true})
			if err != nil || views.PackedRows(ex) != 0 || len(ex.Events()) != len(s.Events()) {
				t.Fatalf("%s: an expanded load: %v, %d rows packed", e.ID, err, views.PackedRows(ex))
			}
			for i, ev := range ex.Events() {
				if !bytes.Equal(ev.Raw, s.Events()[i].Raw) {
					t.Fatalf("%s: an expanded load's event %d differs", e.ID, i)
				}
			}
			if n != len(s.Events()) || size != wantSize {
				t.Errorf("%s: RecordBytes %d events, %d bytes; expanded %d, %d", e.ID, n, size, len(s.Events()), wantSize)
			}
			if e.ID == "c" && (rows == 0 || newest != 1009) {
				t.Fatalf("the crashed session: %d rows packed, newest event %d", rows, newest)
			}
			if newest >= 0 && !mtime.Equal(time.UnixMilli(newest)) {
				t.Errorf("%s: mtime %v, newest event %v", e.ID, mtime, time.UnixMilli(newest))
			}
		}
	}
	if withRows < 10 {
		t.Fatalf("%d sessions loaded with packed rows: the test exercises too little", withRows)
	}
}

// failAfter takes n bytes, then fails every write.
type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if len(p) > f.n {
		f.n = 0
		return 0, errDiskFull
	}
	f.n -= len(p)
	return len(p), nil
}

// TestPackedExpandWhileWritten: a snapshot's rows expanded (Events) while other readers write its events
// view, its mtime and one event each read one consistent list: the same bytes, no race.
func TestPackedExpandWhileWritten(t *testing.T) {
	ctx := context.Background()
	b, err := jsonl.Open(fixtures.CopyTree(t, fixtures.Path(t, "upstream", "zstd")), "")
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	st.Tuning.Workers = 3
	defer views.SetPackedPieces(2, 0)()
	l, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tried := 0
	for _, e := range l.Entries {
		s, err := views.Load(ctx, st, e.ID, views.Options{})
		if err != nil || s.Refusal != nil || views.PackedRows(s) == 0 {
			continue
		}
		tried++
		want, err := views.Load(ctx, st, e.ID, views.Options{Expanded: true})
		if err != nil {
			t.Fatal(err)
		}
		wantView, _ := want.Render(ctx, views.Events)
		done := make(chan error, 4)
		for k := range 4 {
			go func() {
				if k == 0 {
					s.Events()
					done <- nil
					return
				}
				var out bytes.Buffer
				if err := s.WriteView(ctx, &out, views.Events); err != nil || !bytes.Equal(out.Bytes(), wantView) {
					done <- errors.New("the events view differs while the rows expand")
					return
				}
				s.ModTime()
				_, err := s.Render(ctx, views.Event(int64(s.EventCount()-1)))
				done <- err
			}()
		}
		for range 4 {
			if err := <-done; err != nil {
				t.Fatalf("%s: %v", e.ID, err)
			}
		}
	}
	if tried == 0 {
		t.Fatal("no session with packed rows")
	}
}
