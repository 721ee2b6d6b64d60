package jsonl

import (
	"context"
	"os"
	"testing"

	"github.com/dshfs/dshfs/eventstore"
	"github.com/dshfs/dshfs/eventstore/storetest"
)

// TestContract runs the backend contract suite over both encodings.
func TestContract(t *testing.T) {
	for _, mode := range []Compression{None, Zstd} {
		t.Run(string(mode), func(t *testing.T) {
			storetest.Run(t, storetest.Backend{
				Open: func(t *testing.T, dir string) eventstore.Backend {
					b, err := Open(dir, mode)
					if err != nil {
						t.Fatal(err)
					}
					return b
				},
				Tear: func(t *testing.T, b eventstore.Backend, id string) {
					path := artifactPath(t, b, id)
					tail := []byte(`{"type":"plugin/x","seq":`) // a record cut mid-write
					if mode == Zstd {
						frame := EncodeFrame(nil, []byte(`{"type":"plugin/x","seq":99,"time":1,"data":{},"ignorable":true}`+"\n"))
						tail = frame[:len(frame)-3]
					}
					f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
					if err != nil {
						t.Fatal(err)
					}
					defer f.Close()
					if _, err := f.Write(tail); err != nil {
						t.Fatal(err)
					}
				},
			})
		})
	}
}

func artifactPath(t *testing.T, b eventstore.Backend, id string) string {
	t.Helper()
	l, err := b.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range l.Entries {
		if e.ID == id {
			return e.Path
		}
	}
	t.Fatalf("%s not listed", id)
	return ""
}
