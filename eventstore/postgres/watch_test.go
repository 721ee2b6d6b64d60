package postgres

import (
	"context"
	"testing"
	"time"
)

// awaitID waits up to within for id on ch.
func awaitID(t *testing.T, ch <-chan string, id string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case got, ok := <-ch:
			if !ok {
				t.Fatal("the watch channel closed")
			}
			if got == id {
				return
			}
		case <-deadline:
			t.Fatalf("no announcement of %q within %v", id, within)
		}
	}
}

func TestWatchAnnouncesOtherBackendsWrites(t *testing.T) {
	for _, poll := range []bool{false, true} {
		mode := map[bool]string{false: WatchListen, true: WatchPoll}[poll]
		t.Run(mode, func(t *testing.T) {
			_, _, dsn := newDB(t)
			writer := open(t, dsn, Options{Host: "w"})
			reader := open(t, dsn, Options{Host: "r", ReadOnly: true})
			reader.forcePoll = poll
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ch, got, err := reader.Watch(ctx)
			if err != nil || got != mode {
				t.Fatalf("watch: %q %v, want mode %q", got, err, mode)
			}
			if _, err := writer.Materialize(ctx, contractHeader("m"), nil); err != nil {
				t.Fatal(err)
			}
			// LISTEN delivers at commit: within a second; polling within its interval and a pass
			within := time.Second
			if poll {
				within = 2*PollInterval + time.Second
			}
			awaitID(t, ch, "m", within)
			if err := writer.Ingest(ctx, "ci", "i", header("i"), 0, lines(0, 2)); err != nil {
				t.Fatal(err)
			}
			awaitID(t, ch, "i", within)
			cancel()
			for range ch { // closed once ctx ends
			}
		})
	}
}

func TestWatchReconnectAsksForRescan(t *testing.T) {
	s, db, dsn := newDB(t)
	writer := open(t, dsn, Options{Host: "w"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _, err := writer.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Exec(db, `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND datname = $1`, db); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case id := <-ch:
			if id == "" {
				if _, err := writer.Materialize(ctx, contractHeader("after"), nil); err != nil {
					t.Fatal(err)
				}
				awaitID(t, ch, "after", time.Second)
				return
			}
		case <-deadline:
			t.Fatal("no rescan announcement after the listening connection was dropped")
		}
	}
}
