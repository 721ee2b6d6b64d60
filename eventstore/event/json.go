package event

import (
	"math"
	"sort"
	"strconv"
)

// Kind is the JSON type of a Value.
type Kind uint8

// The JSON kinds; the zero Value is null so that an absent value prints as JSON null.
const (
	KindNull Kind = iota
	KindBool
	KindNumber
	KindString
	KindArray
	KindObject
)

// String names the kind the way the harness's `typeof`-style diagnostics would describe it.
func (k Kind) String() string {
	switch k {
	case KindNull:
		return "null"
	case KindBool:
		return "boolean"
	case KindNumber:
		return "number"
	case KindString:
		return "string"
	case KindArray:
		return "array"
	case KindObject:
		return "object"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// MaxDepth bounds array/object nesting accepted by Parse (and so by Canonical). V8's JSON.parse has no
// fixed limit; no harness-written log comes near this one, and a bound keeps a hostile line from
// exhausting memory through the parser's recursion.
const MaxDepth = 10000

// Member is one object property. Members are kept in the order a JavaScript object enumerates them,
// because JSON.stringify output (and so byte compatibility) depends on that order.
type Member struct {
	Key   string
	Value Value
}

// Value is a parsed JSON value exactly as JavaScript's JSON.parse would hold it.
//
// Strings (Str and member keys) are WTF-8: JS strings are UTF-16 and may hold lone surrogates, which are
// kept as their 3-byte generalized UTF-8 encoding so that they survive a parse/stringify round trip.
// Obj is in JS enumeration order: array-index keys ascending, then the rest in insertion order, with no
// duplicates.
type Value struct {
	Kind Kind
	Bool bool
	Num  float64
	Str  string
	Arr  []Value
	Obj  []Member
}

// Null returns JSON null (the zero Value).
func Null() Value { return Value{} }

// Bool returns a JSON boolean.
func Bool(b bool) Value { return Value{Kind: KindBool, Bool: b} }

// Number returns a JSON number; non-finite values are representable but Stringify prints them as null,
// as JS does.
func Number(f float64) Value { return Value{Kind: KindNumber, Num: f} }

// Int returns a JSON number holding an integer; callers use it for seq/time style fields.
func Int(i int64) Value { return Value{Kind: KindNumber, Num: float64(i)} }

// String returns a JSON string; s is taken as WTF-8.
func String(s string) Value { return Value{Kind: KindString, Str: s} }

// Array returns a JSON array of the given elements.
func Array(elems ...Value) Value {
	if elems == nil {
		elems = []Value{}
	}
	return Value{Kind: KindArray, Arr: elems}
}

// Object returns a JSON object built the way a JS object literal would be: a repeated key keeps its first
// position and its last value, and array-index keys move to the front in ascending order.
func Object(members ...Member) Value {
	return Value{Kind: KindObject, Obj: normalizeMembers(members)}
}

// Get returns the value of an object member.
func (v Value) Get(key string) (Value, bool) {
	if v.Kind != KindObject {
		return Value{}, false
	}
	for i := range v.Obj {
		if v.Obj[i].Key == key {
			return v.Obj[i].Value, true
		}
	}
	return Value{}, false
}

// Has reports whether v is an object with an own member named key (JS Object.hasOwn).
func (v Value) Has(key string) bool {
	_, ok := v.Get(key)
	return ok
}

// Keys returns the member names of an object in enumeration order (nil for non-objects).
func (v Value) Keys() []string {
	if v.Kind != KindObject {
		return nil
	}
	keys := make([]string, len(v.Obj))
	for i, m := range v.Obj {
		keys[i] = m.Key
	}
	return keys
}

// HasExactKeys reports whether v is an object whose member set is exactly keys (in any order); it is
// the harness's hasExactKeys shape test.
func (v Value) HasExactKeys(keys ...string) bool {
	if v.Kind != KindObject || len(v.Obj) != len(keys) {
		return false
	}
	for _, k := range keys {
		if !v.Has(k) {
			return false
		}
	}
	return true
}

// IsArrayIndexKey reports whether a property key is an ECMAScript array index (canonical decimal
// 0..2^32-2). Such keys enumerate before all others in ascending numeric order.
func IsArrayIndexKey(key string) bool {
	_, ok := arrayIndex(key)
	return ok
}

func arrayIndex[S string | []byte](key S) (uint32, bool) {
	n := len(key)
	if n == 0 || n > 10 {
		return 0, false
	}
	if key[0] == '0' {
		return 0, n == 1
	}
	var v uint64
	for i := 0; i < n; i++ {
		c := key[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if v > math.MaxUint32-1 {
		return 0, false
	}
	return uint32(v), true
}

// normalizeMembers applies JS object semantics to a member list in insertion order.
func normalizeMembers(members []Member) []Member {
	out := make([]Member, 0, len(members))
	var index map[string]int
	hasIndexKey := false
	for _, m := range members {
		pos := -1
		if index != nil {
			if p, ok := index[m.Key]; ok {
				pos = p
			}
		} else {
			for i := range out {
				if out[i].Key == m.Key {
					pos = i
					break
				}
			}
		}
		if pos >= 0 {
			out[pos].Value = m.Value
			continue
		}
		if !hasIndexKey && IsArrayIndexKey(m.Key) {
			hasIndexKey = true
		}
		out = append(out, m)
		if index == nil && len(out) > 16 {
			index = make(map[string]int, len(members))
			for i := range out {
				index[out[i].Key] = i
			}
		} else if index != nil {
			index[m.Key] = len(out) - 1
		}
	}
	if hasIndexKey {
		sortIndexKeysFirst(out)
	}
	return out
}

func sortIndexKeysFirst(ms []Member) {
	sort.SliceStable(ms, func(i, j int) bool {
		ai, aok := arrayIndex(ms[i].Key)
		bi, bok := arrayIndex(ms[j].Key)
		switch {
		case aok && bok:
			return ai < bi
		case aok:
			return true
		default:
			return false
		}
	})
}
