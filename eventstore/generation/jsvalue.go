package generation

import (
	"strconv"
	"unicode/utf16"

	"github.com/dshfs/dshfs/eventstore/event"
)

// The JavaScript values the v2/v3 relationship validation reads its payloads as: undefined apart from
// null, member reads that fail as a TypeError where the harness's would, SameValueZero keys for its maps
// and sets, and the harness's deep JSON equality.

// ClassTypeError marks a refusal where the harness's validation fails on a payload of the wrong shape
// with a JavaScript TypeError instead of a format error; the text is not the harness's.
const ClassTypeError ErrorClass = "TypeError"

func typeErr(what string) *FormatError {
	return &FormatError{Class: ClassTypeError, Message: "malformed payload: " + what}
}

// jsv is a JavaScript value read from JSON, where ok=false is undefined.
type jsv struct {
	v  event.Value
	ok bool
}

var (
	undefined = jsv{}
	jsNull    = jsv{ok: true}
)

func defined(v event.Value, ok bool) jsv { return jsv{v: v, ok: ok} }

func num(n int64) jsv { return jsv{v: event.Int(n), ok: true} }

func (x jsv) isNullish() bool { return !x.ok || x.v.Kind == event.KindNull }

// isNull is `x === null`.
func (x jsv) isNull() bool { return x.ok && x.v.Kind == event.KindNull }

// prop is `x[key]`: a TypeError on undefined and null, undefined for a missing member.
func (x jsv) prop(key string) (jsv, error) {
	if x.isNullish() {
		return undefined, typeErr("reading " + key + " of " + x.text())
	}
	switch x.v.Kind {
	case event.KindObject:
		v, ok := x.v.Get(key)
		return defined(v, ok), nil
	case event.KindArray:
		if key == "length" {
			return num(int64(len(x.v.Arr))), nil
		}
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(x.v.Arr) && strconv.Itoa(i) == key {
			return jsv{v: x.v.Arr[i], ok: true}, nil
		}
	case event.KindString:
		units := utf16.Encode([]rune(x.v.Str))
		if key == "length" {
			return num(int64(len(units))), nil
		}
		if i, err := strconv.Atoi(key); err == nil && i >= 0 && i < len(units) && strconv.Itoa(i) == key {
			return jsv{v: event.String(string(utf16.Decode(units[i : i+1]))), ok: true}, nil
		}
	}
	return undefined, nil
}

// optProp is `x?.[key]`.
func (x jsv) optProp(key string) jsv {
	if x.isNullish() {
		return undefined
	}
	p, _ := x.prop(key)
	return p
}

// at is `x[i]` for an index.
func (x jsv) at(i int) (jsv, error) { return x.prop(strconv.Itoa(i)) }

func (x jsv) eq(y jsv) bool { return strictEqual(x.v, x.ok, y.v, y.ok) }

func (x jsv) isStr(s string) bool { return x.ok && x.v.Kind == event.KindString && x.v.Str == s }

// text is `${x}`.
func (x jsv) text() string { return jsString(x.v, x.ok) }

// json is `${JSON.stringify(x)}`: "undefined" for undefined.
func (x jsv) json() string {
	if !x.ok {
		return "undefined"
	}
	return string(event.Stringify(x.v))
}

// elements is what `for (const e of x)` iterates: an array's elements or a string's code points; a
// TypeError for anything else.
func (x jsv) elements(what string) ([]jsv, error) {
	switch {
	case x.ok && x.v.Kind == event.KindArray:
		out := make([]jsv, len(x.v.Arr))
		for i, e := range x.v.Arr {
			out[i] = jsv{v: e, ok: true}
		}
		return out, nil
	case x.ok && x.v.Kind == event.KindString:
		var out []jsv
		for _, r := range x.v.Str {
			out = append(out, jsv{v: event.String(string(r)), ok: true})
		}
		return out, nil
	}
	return nil, typeErr(what + " is not iterable")
}

// sameKey is a JS Map/Set key (SameValueZero): primitives by value; an object or array is a key of its
// own that no lookup finds.
type sameKey struct {
	kind event.Kind
	ok   bool
	s    string
	n    float64
	b    bool
	obj  int // distinct per container value; 0 for primitives
}

type keyMaker struct{ next int }

func (k *keyMaker) of(x jsv) sameKey {
	key := sameKey{kind: x.v.Kind, ok: x.ok}
	switch x.v.Kind {
	case event.KindString:
		key.s = x.v.Str
	case event.KindNumber:
		key.n = x.v.Num
	case event.KindBool:
		key.b = x.v.Bool
	case event.KindArray, event.KindObject:
		k.next++
		key.obj = k.next
	}
	if !x.ok {
		key.kind = event.KindNull
	}
	return key
}

// deepEqual is the harness's deepEqualJson: identical primitives, or containers of equal members.
func deepEqual(a, b jsv) bool {
	if a.eq(b) {
		return true
	}
	if !a.ok || !b.ok || a.v.Kind != b.v.Kind {
		return false
	}
	switch a.v.Kind {
	case event.KindArray:
		if len(a.v.Arr) != len(b.v.Arr) {
			return false
		}
		for i := range a.v.Arr {
			if !deepEqual(jsv{a.v.Arr[i], true}, jsv{b.v.Arr[i], true}) {
				return false
			}
		}
		return true
	case event.KindObject:
		if len(a.v.Obj) != len(b.v.Obj) {
			return false
		}
		for _, m := range a.v.Obj {
			y, ok := b.v.Get(m.Key)
			if !ok || !deepEqual(jsv{m.Value, true}, jsv{y, true}) {
				return false
			}
		}
		return true
	}
	return false
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// indexOf is Array.prototype.indexOf over surface seqs (=== comparison).
func indexOf(surface []int64, x jsv) int {
	if !x.ok || x.v.Kind != event.KindNumber {
		return -1
	}
	for i, s := range surface {
		if float64(s) == x.v.Num {
			return i
		}
	}
	return -1
}

// eventIndex is the event `events[x]` names, if any.
func eventIndex(x jsv, n int) (int, bool) {
	if !x.ok {
		return 0, false
	}
	var key string
	switch x.v.Kind {
	case event.KindNumber:
		key = event.FormatNumber(x.v.Num)
	case event.KindString:
		key = x.v.Str
	default:
		key = x.text()
	}
	i, err := strconv.Atoi(key)
	if err != nil || i < 0 || i >= n || strconv.Itoa(i) != key {
		return 0, false
	}
	return i, true
}
