package generation

import (
	"bytes"
	"unicode/utf8"
	"unsafe"

	"github.com/dshfs/dshfs/eventstore/event"
)

// The common v4 rows — messages, tool calls and results, turn and step brackets — are most of a log, and
// the v4 checks read a few members of each: building the whole tree of one was most of a load's parse.
// v4Fast reads such a row from its canonical bytes into a tree that holds only what a check reads of its
// type (its shape below); every other member of the data is left out. What the tree holds it holds
// whole and exactly as the parser would (the consumers see the same values), so the checks decide alike.
//
// The shapes are the union of what the consumers of a row's value read of that type: the codec's row
// admission (v4RowAdmission: v4DeveloperData, v4SourceRowAdmission, v4RetiredSyntax,
// v4ToolResultMessage, v4ForkResult), the row decoding (decodeEvent, v2Decoder.decodeRow: the envelope,
// kept whole), the restore's attribution (v4MessageSources) and the lifecycle relationships
// (v4Relations.accept: foldSurface, tool, notStartedRepair, the turn and step brackets, the user
// message's compaction checkpoint). A change to what one of those reads of these types changes its shape.

// v4Shape says what of a JSON value a check reads: an object's members named in keep (each by its own
// shape; a nil shape: the whole value), or an array's elements by elem. A value of another kind than the
// shape expects is kept whole.
type v4Shape struct {
	keep []shapeMember // nil for an array's shape
	elem *v4Shape
	rest bool // the members keep does not name are kept whole (the envelope)
}

// shapeMember is a member a shape keeps, and its own shape (nil: whole). A shape keeps a few members, so a
// list is searched faster than a map.
type shapeMember struct {
	name  string
	shape *v4Shape
}

// member is the shape of the member key, and whether the shape keeps it.
func (s *v4Shape) member(key string) (*v4Shape, bool) {
	for _, m := range s.keep {
		if m.name == key {
			return m.shape, true
		}
	}
	return nil, s.rest
}

func keepWhole(names ...string) []shapeMember {
	m := make([]shapeMember, len(names))
	for i, n := range names {
		m[i] = shapeMember{name: n}
	}
	return m
}

// v4Shapes are the record shapes of the row types v4Fast reads.
var v4Shapes = func() map[string]*v4Shape {
	bracket := &v4Shape{keep: keepWhole("turn", "step")}
	blocks := func(names ...string) *v4Shape { return &v4Shape{elem: &v4Shape{keep: keepWhole(names...)}} }
	user := &v4Shape{keep: keepWhole("role", "source")}
	user.keep = append(user.keep, shapeMember{"content", blocks("type")})
	assistantMsg := &v4Shape{keep: keepWhole("role", "source")}
	assistantMsg.keep = append(assistantMsg.keep, shapeMember{"content", blocks("type", "id", "name", "arguments")})
	assistant := &v4Shape{keep: keepWhole("turn", "step")}
	assistant.keep = append(assistant.keep, shapeMember{"message", assistantMsg})
	resultMsg := &v4Shape{keep: keepWhole("id", "role", "source", "toolCallId", "isError")}
	resultMsg.keep = append(resultMsg.keep, shapeMember{"content", blocks("type", "text")})
	result := &v4Shape{keep: keepWhole("turn", "step", "error")}
	result.keep = append(result.keep, shapeMember{"message", resultMsg})
	data := map[string]*v4Shape{
		"turn/start": bracket, "turn/end": bracket, "step/start": bracket, "step/end": bracket,
		"tool/call":         {keep: keepWhole("turn", "step", "callId", "name", "arguments")},
		"user/message":      user,
		"assistant/message": assistant,
		"tool/result":       result,
	}
	// the record: its envelope whole (the row decoding reads every member's name), its data by shape
	records := make(map[string]*v4Shape, len(data))
	for typ, d := range data {
		records[typ] = &v4Shape{keep: []shapeMember{{"data", d}}, rest: true}
	}
	return records
}()

// v4Fast is the row e as the v4 checks read it, for a type with a shape; ok is false for any other type,
// and for an assistant stream that could name a tool-change or tool-result block (two rules read those:
// v4Value parses the stream then). e.Raw is canonical (as every Event's is) and is never modified: the
// tree's strings are parts of it. The containers the shape reads into come from arena, whose memory the
// caller reuses once the tree is dead (no check keeps one of them); a container kept whole, which a check
// may keep (a tool call's name or arguments), is allocated on its own.
func v4Fast(e event.Event, arena *v4Arena) (v event.Value, ok bool) {
	shape, found := v4Shapes[e.Type]
	if !found || len(e.Raw) < 2 || e.Raw[0] != '{' {
		return event.Value{}, false
	}
	return reduce(e.Raw, e.Type, shape, arena, false)
}

// v4FastLine is v4Fast over a stored line, which the decoder has not canonicalized: it reads the line only
// when the line is canonical, which the reading itself proves (the parts the shape skips are checked by
// event.CheckValue, the names by event.ObjectKeys), and gives the event the line is. ok is false for a line
// that is not canonical, or that v4Fast would not read: the caller canonicalizes it and reads it again.
// The line's one pass replaces the canonical check's pass and then the reading's.
func v4FastLine(line []byte, arena *v4Arena) (e event.Event, v event.Value, ok bool) {
	tok, found := event.Lookup(line, "type")
	if !found || len(tok) < 2 || tok[0] != '"' || bytes.IndexByte(tok, '\\') >= 0 {
		return event.Event{}, event.Value{}, false
	}
	typ := text(tok[1 : len(tok)-1])
	shape, found := v4Shapes[typ]
	if !found || len(line) < 2 || line[0] != '{' {
		return event.Event{}, event.Value{}, false
	}
	if v, ok = reduce(line, typ, shape, arena, true); !ok {
		return event.Event{}, event.Value{}, false
	}
	seq := int64(-1) // as event.Event reads it: a non-negative safe integer, else -1
	if s, _ := v.Get("seq"); s.Kind == event.KindNumber && s.Num >= 0 && event.IsSafeInteger(s.Num) {
		seq = int64(s.Num)
	}
	return event.CanonicalEvent(line, typ, seq), v, true
}

// reduce reads raw, a record of type typ, by shape; verify proves raw canonical as it goes (else the
// caller vouches for it).
func reduce(raw []byte, typ string, shape *v4Shape, arena *v4Arena, verify bool) (event.Value, bool) {
	r := reducer{raw: raw, stream: typ == "assistant/message", verify: verify, arena: arena,
		mstack: arena.mstack[:0], vstack: arena.vstack[:0]}
	v, end := r.value(0, shape, 0)
	arena.mstack, arena.vstack = r.mstack[:0], r.vstack[:0]
	if end != len(r.raw) {
		return event.Value{}, false
	}
	return v, true
}

// v4Arena holds the containers of the trees v4Fast reads, in slabs that reset reuses.
type v4Arena struct {
	members slabs[event.Member]
	values  slabs[event.Value]
	// the reducer's stacks, kept between rows
	mstack []event.Member
	vstack []event.Value
}

// arenaSlab is how many members or elements a slab holds.
const arenaSlab = 4096

// slabs is one kind of container's memory: slabs of arenaSlab items, the one in use at i.
type slabs[T any] struct {
	s     [][]T
	i     int
	first int // the first slab's size; 0: arenaSlab
}

// reset makes the arena's memory free for new trees: every tree read into it must be dead.
func (a *v4Arena) reset() {
	a.members.reset()
	a.values.reset()
}

// clear empties the arena and clears what it held, so that it keeps nothing of its trees alive (for an
// arena that waits for another decode).
func (a *v4Arena) clear() {
	a.members.clear()
	a.values.clear()
	clear(a.mstack[:cap(a.mstack)])
	clear(a.vstack[:cap(a.vstack)])
	a.mstack, a.vstack = a.mstack[:0], a.vstack[:0]
}

func (sl *slabs[T]) clear() {
	for i := range sl.s {
		clear(sl.s[i])
	}
	sl.reset()
}

// reset empties the slabs without clearing them: what they held is overwritten as they fill again, and a
// window's arena dies with the decode, or is cleared before a pool keeps it (clearing at every window was a
// twentieth of reading a row).
func (sl *slabs[T]) reset() {
	for i := range sl.s {
		sl.s[i] = sl.s[i][:0]
	}
	sl.i = 0
}

// take copies xs into the slabs: into the first slab from the one in use that has room, or a new one; a
// run too long for a slab gets memory of its own.
func (sl *slabs[T]) take(xs []T) []T {
	n := len(xs)
	if n > arenaSlab/4 {
		return append([]T(nil), xs...)
	}
	for sl.i < len(sl.s) && cap(sl.s[sl.i])-len(sl.s[sl.i]) < n {
		sl.i++
	}
	if sl.i == len(sl.s) {
		// the first slab of a small log's arena holds what it needs; each next one twice the last, to
		// arenaSlab (an arena of whole slabs was most of what a small v4 session's load allocated)
		size := arenaSlab
		if k := len(sl.s); k > 0 {
			size = min(arenaSlab, 2*cap(sl.s[k-1]))
		} else if sl.first > 0 {
			size = min(arenaSlab, max(sl.first, n))
		}
		sl.s = append(sl.s, make([]T, 0, size))
	}
	s := append(sl.s[sl.i], xs...)
	sl.s[sl.i] = s
	return s[len(s)-n : len(s) : len(s)]
}

// takeMembers copies ms into the arena.
func (a *v4Arena) takeMembers(ms []event.Member) []event.Member { return a.members.take(ms) }

// takeValues copies vs into the arena.
func (a *v4Arena) takeValues(vs []event.Value) []event.Value { return a.values.take(vs) }

// reducer reads the values of one canonical record by their shapes. Members and elements are collected
// on stacks and copied out once per container: into the arena for a container the shape reads into, at
// its exact size on its own for one kept whole.
type reducer struct {
	raw    []byte
	stream bool // an assistant message: a stream that could matter fails the read
	verify bool // raw is not known to be canonical: prove it so, part by part, or fail the read
	arena  *v4Arena
	mstack []event.Member
	vstack []event.Value
}

func (r *reducer) members(base int, whole bool) []event.Member {
	var out []event.Member
	if whole {
		out = append([]event.Member(nil), r.mstack[base:]...)
	} else {
		out = r.arena.takeMembers(r.mstack[base:])
	}
	r.mstack = r.mstack[:base] // not cleared, as the arena is not (reset)
	return out
}

func (r *reducer) elements(base int, whole bool) []event.Value {
	var out []event.Value
	if whole {
		out = append([]event.Value(nil), r.vstack[base:]...)
	} else {
		out = r.arena.takeValues(r.vstack[base:])
	}
	r.vstack = r.vstack[:base]
	return out
}

// plainName reports whether a name without escapes is canonical string contents: no control character,
// and valid UTF-8.
func plainName(b []byte) bool {
	for i, c := range b {
		if c < 0x20 {
			return false
		}
		if c >= 0x80 {
			return utf8.Valid(b[i:]) && bytes.IndexFunc(b[i:], func(r rune) bool { return r < 0x20 }) < 0
		}
	}
	return true
}

// text is a part of the record's bytes as a string, sharing them: they are never modified.
func text(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// value reads the value at raw[at] by shape (nil: whole), inside containers nested depth deep, and returns
// it and where it ends, -1 when it will not read it (the caller parses the record instead).
func (r *reducer) value(at int, shape *v4Shape, depth int) (event.Value, int) {
	raw := r.raw
	if at >= len(raw) {
		return event.Value{}, -1
	}
	c := raw[at]
	if (c == '{' || c == '[') && depth >= event.MaxDepth {
		return event.Value{}, -1 // deeper than the parser reads
	}
	switch {
	case c == '{' && (shape == nil || shape.keep != nil):
		return r.object(at, shape, depth+1)
	case c == '[' && (shape == nil || shape.keep == nil):
		var elem *v4Shape
		if shape != nil {
			elem = shape.elem
		}
		return r.array(at, elem, shape != nil, depth+1)
	case c == '{' || c == '[':
		return r.value(at, nil, depth) // a container of the other kind than the shape's: whole
	}
	return r.scalar(at, depth)
}

// skip returns the end of the value at raw[at], which the reader does not read (proved canonical when
// the reducer verifies).
func (r *reducer) skip(at, depth int) int {
	if r.verify {
		return event.CheckValue(r.raw, at, depth)
	}
	return event.SkipValue(r.raw, at)
}

// object reads the object at raw[at]: the members shape keeps (nil: every member whole).
func (r *reducer) object(at int, shape *v4Shape, depth int) (event.Value, int) {
	raw := r.raw
	base := len(r.mstack)
	i := at + 1
	if i < len(raw) && raw[i] == '}' {
		return event.Value{Kind: event.KindObject, Obj: []event.Member{}}, i + 1
	}
	var names *event.ObjectKeys
	if r.verify {
		names = new(event.ObjectKeys)
	}
	for i < len(raw) && raw[i] == '"' {
		kEnd := bytes.IndexByte(raw[i+1:], '"') + i + 1
		if kEnd <= i || kEnd+1 >= len(raw) || raw[kEnd+1] != ':' || bytes.IndexByte(raw[i+1:kEnd], '\\') >= 0 {
			return event.Value{}, -1 // an escaped name could spell a kept one
		}
		if names != nil && (!plainName(raw[i+1:kEnd]) || !names.Add(raw, i+1, kEnd)) {
			return event.Value{}, -1
		}
		key := text(raw[i+1 : kEnd])
		vAt := kEnd + 2
		var sub *v4Shape
		kept := true
		if shape != nil {
			sub, kept = shape.member(key)
		}
		var end int
		if kept {
			var v event.Value
			if v, end = r.value(vAt, sub, depth); end < 0 {
				return event.Value{}, -1
			}
			for _, m := range r.mstack[base:] {
				if m.Key == key {
					return event.Value{}, -1 // a repeated name (no canonical record has one)
				}
			}
			r.mstack = append(r.mstack, event.Member{Key: key, Value: v})
		} else {
			if end = r.skip(vAt, depth); end < 0 {
				return event.Value{}, -1
			}
			if r.stream && key == "stream" && streamMayMatter(raw[vAt:end]) {
				return event.Value{}, -1
			}
		}
		if end >= len(raw) {
			return event.Value{}, -1
		}
		switch raw[end] {
		case ',':
			i = end + 1
			continue
		case '}':
			return event.Value{Kind: event.KindObject, Obj: r.members(base, shape == nil)}, end + 1
		}
		return event.Value{}, -1
	}
	return event.Value{}, -1
}

// array reads the array at raw[at], each element by elem (nil: whole); shaped says that a shape reads the
// array (else it is kept whole).
func (r *reducer) array(at int, elem *v4Shape, shaped bool, depth int) (event.Value, int) {
	raw := r.raw
	base := len(r.vstack)
	i := at + 1
	if i < len(raw) && raw[i] == ']' {
		return event.Value{Kind: event.KindArray, Arr: []event.Value{}}, i + 1
	}
	for i < len(raw) {
		v, end := r.value(i, elem, depth)
		if end < 0 || end >= len(raw) {
			return event.Value{}, -1
		}
		r.vstack = append(r.vstack, v)
		switch raw[end] {
		case ',':
			i = end + 1
			continue
		case ']':
			return event.Value{Kind: event.KindArray, Arr: r.elements(base, !shaped)}, end + 1
		}
		return event.Value{}, -1
	}
	return event.Value{}, -1
}

// scalar reads the string, number or literal at raw[at]: a string and a small integer here, anything
// else by Parse (as the parser reads it).
func (r *reducer) scalar(at, depth int) (event.Value, int) {
	raw := r.raw
	end := r.skip(at, depth)
	if end < 0 {
		return event.Value{}, -1
	}
	tok := raw[at:end]
	switch c := tok[0]; {
	case c == '"' && len(tok) >= 2:
		body := tok[1 : len(tok)-1]
		if bytes.IndexByte(body, '\\') < 0 {
			return event.String(text(body)), end
		}
		return event.String(event.CanonicalString(body)), end // raw is canonical, or proved so (skip)
	case c >= '1' && c <= '9' && len(tok) <= 15 || string(tok) == "0":
		// below 10^15 an integer is exact, and canonical digits start with 1 to 9
		var n int64
		for _, d := range tok {
			if d < '0' || d > '9' {
				n = -1
				break
			}
			n = n*10 + int64(d-'0')
		}
		if n >= 0 {
			return event.Int(n), end
		}
	case string(tok) == "true":
		return event.Bool(true), end
	case string(tok) == "false":
		return event.Bool(false), end
	case string(tok) == "null":
		return event.Value{Kind: event.KindNull}, end
	}
	v, err := event.Parse(tok)
	if err != nil {
		return event.Value{}, -1
	}
	return v, end
}
