package nodes

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/event"
	"github.com/dshfs/dshfs/views"
)

// childrenSource is what a session directory asks of its source while it lists its children.
type childrenSource struct {
	Source
	refusal error
	writer  Writer
	files   bool
}

func (s childrenSource) Refusal(context.Context, string) (error, error) { return s.refusal, nil }
func (s childrenSource) Identity(context.Context, string) string        { return "1:2" }
func (s childrenSource) Listing() *Listing                              { return &Listing{Files: s.files} }
func (s childrenSource) Writer() Writer                                 { return s.writer }
func (s childrenSource) Render(_ context.Context, _ string, v views.View) (Rendered, error) {
	if v == views.Header {
		return Rendered{}, errors.New("no header") // a refused session lists raw.jsonl but not header.json
	}
	return Rendered{}, nil
}

// TestSessionFindMatchesList: looking up one name in a session directory finds the child its listing
// shows under that name, with the same inode, mode and stability, and nothing for a name it does not
// list — for a readable session with and without a writer and a parent, and for a refused one.
func TestSessionFindMatchesList(t *testing.T) {
	parent := &event.Header{ParentSession: &event.Value{Kind: event.KindString, Str: "p"}}
	cases := []struct {
		name   string
		src    childrenSource
		header *event.Header
	}{
		{"readable", childrenSource{files: true}, nil},
		{"writable, forked", childrenSource{files: true, writer: writerStub{}}, parent},
		{"no files", childrenSource{}, nil},
		{"refused", childrenSource{files: true, refusal: errors.New("refused")}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := &tree{src: tc.src}
			d := &sessionDir{dirNode: dirNode{src: tc.src, sess: "s"}, t: tr, e: eventstore.Entry{ID: "s", Header: tc.header}, name: "s"}
			ctx := context.Background()
			kids, err := d.list(ctx)
			if err != nil || len(kids) == 0 {
				t.Fatalf("list: %d children, %v", len(kids), err)
			}
			for _, c := range kids {
				got, ok, err := d.find(ctx, c.name)
				if err != nil || !ok {
					t.Fatalf("find %s: found %v, %v", c.name, ok, err)
				}
				if got.name != c.name || got.ino != c.ino || got.mode != c.mode || got.stable != c.stable ||
					reflect.TypeOf(got.node) != reflect.TypeOf(c.node) {
					t.Errorf("find %s: %+v, listed as %+v", c.name, got, c)
				}
			}
			listed := map[string]bool{}
			for _, c := range kids {
				listed[c.name] = true
			}
			names := []string{"", "missing", "events.jsonl/x", "forks", "ctl", "append", "parent"}
			for _, f := range viewFiles {
				names = append(names, f.name)
			}
			for _, dir := range views.Dirs {
				names = append(names, string(dir))
			}
			for _, name := range names {
				if _, ok, err := d.find(ctx, name); ok != listed[name] || err != nil {
					t.Errorf("find %q: found %v (%v), listed %v", name, ok, err, listed[name])
				}
			}
		})
	}
}

// writerStub is a mount that takes writes; the listing only asks whether there is one.
type writerStub struct{ Writer }
