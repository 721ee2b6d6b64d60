package surface

import (
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/dshfs/dshfs/eventstore/event"
)

// The tool/result rewrite rule compares two events' data after blanking the result block's inner
// content. The harness builds the blanked copies with object spreads over whatever JSON the events
// hold and compares them structurally (key order irrelevant), and a malformed payload fails with the
// TypeError property access raises. jsVal and its helpers reproduce those JavaScript semantics over
// parsed values, so even odd payloads pass or fail exactly as they would in the harness.

// jsVal is a JavaScript value reachable from JSON: a JSON value, or undefined (def == false).
type jsVal struct {
	v   event.Value
	def bool
}

// typeError is V8's text for reading a property of null or undefined.
func typeError(base jsVal, key string) error {
	what := "undefined"
	if base.def {
		what = "null"
	}
	return errors.New("Cannot read properties of " + what + " (reading '" + key + "')")
}

// prop is base[key] for a JSON value: own members of objects, indices and length of arrays and
// strings (UTF-16 code units), undefined otherwise; null and undefined throw.
func prop(base jsVal, key string) (jsVal, error) {
	if !base.def || base.v.Kind == event.KindNull {
		return jsVal{}, typeError(base, key)
	}
	switch base.v.Kind {
	case event.KindObject:
		v, ok := base.v.Get(key)
		return jsVal{v, ok}, nil
	case event.KindArray:
		if key == "length" {
			return jsVal{event.Int(int64(len(base.v.Arr))), true}, nil
		}
		if i, err := strconv.ParseUint(key, 10, 32); err == nil && event.IsArrayIndexKey(key) && i < uint64(len(base.v.Arr)) {
			return jsVal{base.v.Arr[i], true}, nil
		}
	case event.KindString:
		units := codeUnits(base.v.Str)
		if key == "length" {
			return jsVal{event.Int(int64(len(units))), true}, nil
		}
		if i, err := strconv.ParseUint(key, 10, 32); err == nil && event.IsArrayIndexKey(key) && i < uint64(len(units)) {
			return jsVal{event.String(units[i]), true}, nil
		}
	}
	return jsVal{}, nil
}

// spread is the own enumerable properties `{...x}` copies: object members, array and string
// indices; nothing for other values.
func spread(x jsVal) []event.Member {
	if !x.def {
		return nil
	}
	switch x.v.Kind {
	case event.KindObject:
		return append([]event.Member(nil), x.v.Obj...)
	case event.KindArray:
		out := make([]event.Member, len(x.v.Arr))
		for i, el := range x.v.Arr {
			out[i] = event.Member{Key: strconv.Itoa(i), Value: el}
		}
		return out
	case event.KindString:
		units := codeUnits(x.v.Str)
		out := make([]event.Member, len(units))
		for i, u := range units {
			out[i] = event.Member{Key: strconv.Itoa(i), Value: event.String(u)}
		}
		return out
	}
	return nil
}

// setMember is an assignment to an object literal under construction.
func setMember(ms []event.Member, key string, v event.Value) []event.Member {
	for i := range ms {
		if ms[i].Key == key {
			ms[i].Value = v
			return ms
		}
	}
	return append(ms, event.Member{Key: key, Value: v})
}

// codeUnits splits a WTF-8 string into its UTF-16 code units, each as a WTF-8 string (a supplementary
// character becomes its two surrogates), which is how JS indexes and spreads strings.
func codeUnits(s string) []string {
	out := make([]string, 0, len(s))
	for i := 0; i < len(s); {
		n := 1
		switch c := s[i]; {
		case c >= 0xF0:
			n = 4
		case c >= 0xE0:
			n = 3
		case c >= 0xC0:
			n = 2
		}
		n = min(n, len(s)-i)
		if n == 4 {
			r, _ := utf8.DecodeRuneInString(s[i:])
			r -= 0x10000
			out = append(out, surrogate(0xD800+(r>>10)), surrogate(0xDC00+(r&0x3FF)))
		} else {
			out = append(out, s[i:i+n])
		}
		i += n
	}
	return out
}

// surrogate encodes one surrogate code unit the WTF-8 way (three bytes).
func surrogate(u rune) string {
	return string([]byte{0xE0 | byte(u>>12), 0x80 | byte(u>>6)&0x3F, 0x80 | byte(u)&0x3F})
}

// toolData reads an event's data for the rewrite comparison (undefined when absent).
func toolData(e event.Event) (jsVal, error) {
	raw, ok := e.Member("data")
	if !ok {
		return jsVal{}, nil
	}
	v, err := event.Parse(raw)
	if err != nil {
		return jsVal{}, err
	}
	return jsVal{v, true}, nil
}

// firstResult is data.message.content[0], with the harness's TypeErrors.
func firstResult(data jsVal) (msg, result jsVal, err error) {
	if msg, err = prop(data, "message"); err != nil {
		return
	}
	content, err := prop(msg, "content")
	if err != nil {
		return
	}
	result, err = prop(content, "0")
	return
}

// blanked is `{...data, message: {...data.message, content: [{...result, content: null}]}}`.
func blanked(data, msg, result jsVal) event.Value {
	block := setMember(spread(result), "content", event.Null())
	m := setMember(spread(msg), "content", event.Array(event.Value{Kind: event.KindObject, Obj: block}))
	rest := setMember(spread(data), "message", event.Value{Kind: event.KindObject, Obj: m})
	return event.Value{Kind: event.KindObject, Obj: rest}
}

// checkToolRewrite is assertToolResultRewrite: a tool/result replacement rewrites exactly one current
// tool/result and may change only that result's inner content (lifted: the message's content).
func checkToolRewrite(e event.Event, shadowed []int64, origin originFunc, lifted bool) error {
	if len(shadowed) != 1 {
		return errors.New("tool/result surface replacement must rewrite exactly one current node")
	}
	orig, ok := origin(shadowed[0])
	if !ok || orig.Type != "tool/result" {
		return errors.New("tool/result surface replacement must target a current tool/result")
	}
	var same bool
	var err error
	switch {
	case lifted:
		same, err = sameLifted(orig, e)
	case sameOutsideContent(orig, e):
		return nil
	default:
		same, err = sameBlanked(orig, e)
	}
	if err != nil {
		return err
	}
	if !same {
		return errors.New("tool/result surface replacement may change only content")
	}
	return nil
}

// sameBlanked is the harness's comparison itself, over parsed data.
func sameBlanked(orig, e event.Event) (bool, error) {
	od, err := toolData(orig)
	if err != nil {
		return false, err
	}
	rd, err := toolData(e)
	if err != nil {
		return false, err
	}
	om, or, err := firstResult(od)
	if err != nil {
		return false, err
	}
	rm, rr, err := firstResult(rd)
	if err != nil {
		return false, err
	}
	return deepEqual(blanked(od, om, or), blanked(rd, rm, rr)), nil
}

// sameLifted compares two lifted tool results' data with message.content blanked on both sides. A
// result without a message object is the restore's to refuse; here it compares as data alone.
func sameLifted(orig, e event.Event) (bool, error) {
	blank := func(ev event.Event) (event.Value, error) {
		d, err := toolData(ev)
		if err != nil || d.v.Kind != event.KindObject {
			return d.v, err
		}
		msg, _ := d.v.Get("message")
		if msg.Kind != event.KindObject {
			return d.v, nil
		}
		m := setMember(spread(jsVal{msg, true}), "content", event.Null())
		rest := setMember(spread(d), "message", event.Value{Kind: event.KindObject, Obj: m})
		return event.Value{Kind: event.KindObject, Obj: rest}, nil
	}
	a, err := blank(orig)
	if err != nil {
		return false, err
	}
	b, err := blank(e)
	if err != nil {
		return false, err
	}
	return deepEqual(a, b), nil
}

// deepEqual is the harness's isDeepEqualJson: structural, with object key order ignored.
func deepEqual(a, b event.Value) bool {
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
	case event.KindArray:
		if len(a.Arr) != len(b.Arr) {
			return false
		}
		for i := range a.Arr {
			if !deepEqual(a.Arr[i], b.Arr[i]) {
				return false
			}
		}
		return true
	}
	if len(a.Obj) != len(b.Obj) {
		return false
	}
	var index map[string]int
	if len(b.Obj) > 16 {
		index = make(map[string]int, len(b.Obj))
		for i, m := range b.Obj {
			index[m.Key] = i
		}
	}
	for _, m := range a.Obj {
		j := -1
		if index != nil {
			if k, ok := index[m.Key]; ok {
				j = k
			}
		} else {
			for k := range b.Obj {
				if b.Obj[k].Key == m.Key {
					j = k
					break
				}
			}
		}
		if j < 0 || !deepEqual(m.Value, b.Obj[j].Value) {
			return false
		}
	}
	return true
}

// sameOutsideContent is the prune fast path: when the two canonical data encodings are byte-identical
// outside message.content[0].content (the harness's prune copies everything else verbatim), the
// blanked values are identical too. false means only "compare structurally".
func sameOutsideContent(a, b event.Event) bool {
	ab, aOff, aLen, ok := innerContent(a)
	if !ok {
		return false
	}
	bb, bOff, bLen, ok := innerContent(b)
	return ok && string(ab[:aOff]) == string(bb[:bOff]) && string(ab[aOff+aLen:]) == string(bb[bOff+bLen:])
}

// innerContent locates data.message.content[0].content inside an event's canonical data bytes.
func innerContent(e event.Event) (data []byte, off, n int, ok bool) {
	data, ok = e.Member("data")
	if !ok {
		return nil, 0, 0, false
	}
	content, ok := event.Lookup(data, "message", "content")
	if !ok || len(content) < 2 || content[0] != '[' || content[1] != '{' {
		return nil, 0, 0, false
	}
	end := skipCanonical(content, 1)
	if end < 0 {
		return nil, 0, 0, false
	}
	inner, ok := event.Lookup(content[1:end], "content")
	if !ok {
		return nil, 0, 0, false
	}
	// Lookup returns subslices of data, so capacities give the offset.
	return data, cap(data) - cap(inner), len(inner), true
}

// skipCanonical returns the index just past the canonical JSON value starting at b[i], or -1.
func skipCanonical(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if i >= len(b) {
				return -1
			}
		case '{', '[':
			depth++
			continue
		case '}', ']':
			depth--
		default:
			if depth == 0 {
				for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' {
					i++
				}
				return i
			}
			continue
		}
		if depth == 0 {
			return i + 1
		}
	}
	return -1
}
