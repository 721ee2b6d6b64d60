package views_test

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/jsonl"
	"github.com/dshfs/dshfs/internal/demo"
	"github.com/dshfs/dshfs/views"
)

// TestSortIndexRows: a page lists its rows by the last activity it shows, newest first, ties by id.
func TestSortIndexRows(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1778573700+int64(s), 0) }
	rows := []views.IndexRow{
		{ID: "old", Activity: at(1)},
		{ID: "b-tie", Activity: at(5)},
		{ID: "refused-no-time"},
		{ID: "new", Activity: at(9)},
		{ID: "a-tie", Activity: at(5)},
	}
	views.SortIndexRows(rows)
	var got []string
	for _, r := range rows {
		got = append(got, r.ID)
	}
	want := []string{"new", "a-tie", "b-tie", "old", "refused-no-time"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}

// TestStoreIndexOrder renders the demo store's index, whose artifacts were all written within a moment of
// each other in another order than their events' times, and requires the page's "newest first" to hold for
// the last activity it shows.
func TestStoreIndexOrder(t *testing.T) {
	dir := t.TempDir()
	if err := demo.Write(dir); err != nil {
		t.Fatal(err)
	}
	b, err := jsonl.Open(filepath.Join(dir, "sessions"), "")
	if err != nil {
		t.Fatal(err)
	}
	st := eventstore.New(b)
	ctx := context.Background()
	l, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page, ok := views.StoreIndex(ctx, l.Entries, 1, func(i int) string { return l.Entries[i].ID },
		func(e eventstore.Entry) *views.Session {
			s, err := views.Load(ctx, st, e.ID, views.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	if !ok || !regexp.MustCompile(`6 sessions, newest first`).Match(page) {
		t.Fatalf("index page:\n%s", page)
	}
	rows := regexp.MustCompile(`<tr class="[^"]+"><td><a href="sessions/([^/]+)/[^"]+">[^<]*</a></td><td>[^<]*</td><td>([0-9: -]+)</td><td>\d+</td><td>\d+</td><td>(\d+)</td><td>(\d+)</td>`).FindAllSubmatch(page, -1)
	if len(rows) != 6 {
		t.Fatalf("%d rows in:\n%s", len(rows), page)
	}
	var prev string
	for i, r := range rows {
		id, activity := string(r[1]), string(r[2])
		if i > 0 && activity > prev {
			t.Errorf("row %d (%s, %s) is newer than the row above it (%s)", i, id, activity, prev)
		}
		prev = activity
		if string(r[3]) == "0" || string(r[4]) == "0" {
			t.Errorf("row %s shows no tokens: %s", id, r[0])
		}
	}
}
