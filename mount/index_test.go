package mount

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/fixtures"
)

// TestStoreIndexKeepsRows: index.html decodes each session once; later renders of the page (a getattr,
// an open and reads each render it) take the rows kept by revision and decode nothing, and a session that
// changes is decoded again alone.
func TestStoreIndexKeepsRows(t *testing.T) {
	ctx := context.Background()
	root := fixtures.CopyTree(t, fixtures.Path(t, "generations", "v4", "zstd-root"))
	b, err := jsonl.Open(root, jsonl.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Cache.Index = false // the persistent index would answer verdicts: count decodes alone
	f, err := New(Options{Store: eventstore.New(b), Config: cfg, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	first, ok := f.StoreIndex(ctx, 1)
	if !ok || !bytes.Contains(first, []byte("main-session-fa821f4b")) {
		t.Fatalf("page 1: %v %.200s", ok, first)
	}
	decodes := f.cache.Decodes()
	if decodes < 11 {
		t.Fatalf("%d decodes for 11 sessions", decodes)
	}
	for _, e := range f.Listing().Entries {
		f.cache.Drop(e.ID) // the decoded sessions are gone: only kept rows can answer now
	}
	again, _ := f.StoreIndex(ctx, 1)
	if !bytes.Equal(again, first) || f.cache.Decodes() != decodes {
		t.Fatalf("a second render decoded %d sessions again (or differs)", f.cache.Decodes()-decodes)
	}

	// one session changes: it alone is decoded again
	st := f.opts.Store
	w, err := st.Writer(ctx, "main-session-fa821f4b-98fd-46aa-86bc-0955a88ef4b8")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Accept([][]byte{[]byte(`{"type":"turn/start","data":{"turn":3}}`)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.refresh(ctx); err != nil {
		t.Fatal(err)
	}
	f.StoreIndex(ctx, 1)
	if n := f.cache.Decodes() - decodes; n != 1 {
		t.Fatalf("%d sessions decoded after one changed", n)
	}
}

// TestMountKeepsListings: a mount has a JSONL backend keep the listings its lookups read again at every
// load and refresh (jsonl.Backend.KeepListings); a backend outside a mount lists afresh.
func TestMountKeepsListings(t *testing.T) {
	root := fixtures.CopyTree(t, fixtures.Path(t, "generations", "v4", "zstd-root"))
	b, err := jsonl.Open(root, jsonl.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	if b.KeepsListings() {
		t.Fatal("a backend keeps listings before any mount asked it to")
	}
	if _, err := New(Options{Store: eventstore.New(b), Config: testConfig(t), Log: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	if !b.KeepsListings() {
		t.Fatal("the mount's backend does not keep its listings")
	}
}
