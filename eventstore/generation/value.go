package generation

import (
	"math"
	"slices"

	"github.com/dshfs/dshfs/eventstore/event"
)

// The codec's checks are written against JavaScript values; these helpers give event.Value the same
// semantics, so that each check below reads like the rule it states and fails where the codec fails.

func isObject(v event.Value) bool { return v.Kind == event.KindObject }

func isNegZero(v event.Value) bool {
	return v.Kind == event.KindNumber && v.Num == 0 && math.Signbit(v.Num)
}

// isCount is the codec's sessionFormatCount test: a non-negative safe integer other than -0.
func isCount(v event.Value) bool {
	return v.Kind == event.KindNumber && event.IsSafeInteger(v.Num) && v.Num >= 0 && !isNegZero(v)
}

// count returns v as a count or the codec's "<label> must be a non-negative safe integer".
func count(v event.Value, label string) (int64, error) {
	if !isCount(v) {
		return 0, formatErr(label + " must be a non-negative safe integer")
	}
	return int64(v.Num), nil
}

// safeInteger is the codec's sessionFormatSafeInteger.
func safeInteger(v event.Value, label string) error {
	if v.Kind != event.KindNumber || !event.IsSafeInteger(v.Num) || isNegZero(v) {
		return formatErr(label + " must be a safe integer")
	}
	return nil
}

// record is the codec's object narrowing with its "<label> must be an object".
func record(v event.Value, label string) (event.Value, error) {
	if !isObject(v) {
		return v, formatErr(label + " must be an object")
	}
	return v, nil
}

// exactKeys reports the first missing required member, then the first member (in JS enumeration order)
// that is neither required nor optional, as "<label> <lacks> <key>" / "<label> has unexpected field <key>".
// lacks is "lacks required field" for most owners and "lacks" for the physical v2 header.
func exactKeys(v event.Value, required, optional []string, label, lacks string) error {
	for _, k := range required {
		if !v.Has(k) {
			return formatErr(label + " " + lacks + " " + k)
		}
	}
	for _, m := range v.Obj {
		if !slices.Contains(required, m.Key) && !slices.Contains(optional, m.Key) {
			return formatErr(label + " has unexpected field " + m.Key)
		}
	}
	return nil
}

// hasExactKeys reports whether exactKeys finds nothing to refuse, without building its texts.
func hasExactKeys(v event.Value, required, optional []string) bool {
	for _, k := range required {
		if !v.Has(k) {
			return false
		}
	}
	for _, m := range v.Obj {
		if !slices.Contains(required, m.Key) && !slices.Contains(optional, m.Key) {
			return false
		}
	}
	return true
}

// isString reports whether the member key of v is present and a string.
func isString(v event.Value, key string) bool {
	x, ok := v.Get(key)
	return ok && x.Kind == event.KindString
}

// isTrue is `v[key] === true`.
func isTrue(v event.Value, key string) bool {
	x, ok := v.Get(key)
	return ok && x.Kind == event.KindBool && x.Bool
}

// strictEqual is JavaScript's === between two parsed values, where an absent member is undefined:
// primitives compare by value (-0 === 0), containers never equal one another (distinct objects).
func strictEqual(a event.Value, aok bool, b event.Value, bok bool) bool {
	if !aok || !bok {
		return !aok && !bok
	}
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case event.KindNull:
		return true
	case event.KindBool:
		return a.Bool == b.Bool
	case event.KindNumber:
		return a.Num == b.Num
	case event.KindString:
		return a.Str == b.Str
	}
	return false
}

// jsString is `${v}` for a member that may be absent.
func jsString(v event.Value, ok bool) string {
	if !ok {
		return "undefined"
	}
	return event.JSString(v)
}

// quote is JSON.stringify of a string, as the codec embeds type names in its texts.
func quote(s string) string { return string(event.AppendQuote(nil, s)) }
