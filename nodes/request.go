package nodes

import (
	"context"

	"github.com/dshfs/dshfs/eventstore"
)

// A FUSE request often asks the source about one session several times: a lookup below a session checks
// whether it is refused, lists the names (which reads the artifact's identity) and fills the new entry's
// attributes; an open reads the attributes and then perhaps the bytes. Each of those reads the session's
// current revision, which for a JSONL store is a stat of its artifact — on a walk over a large store the
// largest cost the mount adds after the FUSE round trips themselves. A request's context carries a memo of
// the artifact states read while serving it, so the artifact is stat'ed once per request, and every answer
// of one request describes the same revision.

type memoKey struct{}

// Artifacts remembers the session artifacts' states read while serving one request. A request is served by
// one goroutine, so it needs no lock.
type Artifacts struct {
	m map[string]eventstore.Artifact
}

// oneRequest returns ctx carrying an empty memo, unless it carries one already.
func oneRequest(ctx context.Context) context.Context {
	if RequestArtifacts(ctx) != nil {
		return ctx
	}
	return context.WithValue(ctx, memoKey{}, &Artifacts{m: map[string]eventstore.Artifact{}})
}

// RequestArtifacts returns the memo of the request ctx serves, nil outside one.
func RequestArtifacts(ctx context.Context) *Artifacts {
	r, _ := ctx.Value(memoKey{}).(*Artifacts)
	return r
}

// Get returns the state of session id's artifact read earlier in the request.
func (r *Artifacts) Get(id string) (eventstore.Artifact, bool) {
	v, ok := r.m[id]
	return v, ok
}

// Put records the state of session id's artifact read now.
func (r *Artifacts) Put(id string, a eventstore.Artifact) { r.m[id] = a }
