package event

// Chunk is what the live writer takes from an assistant/chunk event ReadChunk read: its data's turn and
// step (the numbers the harness's invariant companions compare with the open step) and how a flush packs
// it.
type Chunk struct {
	Turn, Step float64
	Packing    Packing
}

// ReadChunk reads, without building a tree, the data of an assistant/chunk event at seq and time laid out
// as Expand writes it and the harness's Session.append stores it:
//
//	{"turn":N,"step":M,"chunk":C}
//
// with N and M non-negative safe integers spelled as digits, and C either a streaming delta in the
// encoder's layout —
//
//	{"type":"text-delta","index":I,"text":X}           (and "reasoning-delta")
//	{"type":"tool-call-delta","index":I,"id":D,["name":A,]"argumentsDelta":X}
//
// with I as the others, which packs (its Packing is the one PackingOf gives the event) — or an object whose
// first member is a type that no delta has (block-start, usage, finish, …), which never packs. data must be
// canonical (IsCanonical), and seq and time non-negative safe integers. ok is false for every other layout,
// a delta's type in any other shape included, which the caller parses (TestReadChunk).
func ReadChunk(data []byte, seq, time int64) (Chunk, bool) {
	cur := NewCursor(data)
	lit, digits, str := cur.Lit, cur.Digits, cur.Str
	var c Chunk
	var ok bool
	var turn, step, index int64
	if !lit(`{"turn":`) {
		return c, false
	}
	if turn, ok = digits(); !ok || !lit(`,"step":`) {
		return c, false
	}
	if step, ok = digits(); !ok || !lit(`,"chunk":`) {
		return c, false
	}
	c.Turn, c.Step = float64(turn), float64(step)
	d := delta{}
	switch {
	case lit(`{"type":"text-delta","index":`):
		d.kind = kindText
	case lit(`{"type":"reasoning-delta","index":`):
		d.kind = kindReasoning
	case lit(`{"type":"tool-call-delta","index":`):
		d.kind = kindToolCall
	default:
		// another chunk: its type (its first member, which no other member repeats in canonical JSON)
		// must be no delta's, whatever the rest of it holds
		chunk := cur.Rest()
		if !lit(`{"type":`) {
			return c, false
		}
		switch typ, ok := str(); {
		case !ok, typ == "text-delta", typ == "reasoning-delta", typ == "tool-call-delta":
			return c, false
		}
		end := skipValue(chunk, 0)
		if end < 0 || string(chunk[end:]) != "}" {
			return c, false
		}
		return c, true
	}
	if index, ok = digits(); !ok {
		return c, false
	}
	if d.kind == kindToolCall {
		if !lit(`,"id":`) {
			return c, false
		}
		if d.id, ok = str(); !ok {
			return c, false
		}
		if lit(`,"name":`) {
			if d.name, ok = str(); !ok {
				return c, false
			}
			d.hasName = true
		}
		ok = lit(`,"argumentsDelta":`)
	} else {
		ok = lit(`,"text":`)
	}
	if !ok {
		return c, false
	}
	if d.payload, ok = str(); !ok || !lit("}}") || len(cur.Rest()) != 0 {
		return c, false
	}
	d.seq, d.time = float64(seq), float64(time)
	d.turn, d.step, d.index = c.Turn, c.Step, float64(index)
	c.Packing = Packing{&d}
	return c, true
}

// Cursor reads a line laid out as expected, piece by piece, for the paths that read the harness's own
// layouts without building a tree: each method consumes what it reads, or nothing and reports false.
type Cursor struct{ rest []byte }

// NewCursor starts a cursor at the beginning of b.
func NewCursor(b []byte) *Cursor { return &Cursor{rest: b} }

// Rest is what the cursor has not read.
func (c *Cursor) Rest() []byte { return c.rest }

// Lit reads the literal bytes l.
func (c *Cursor) Lit(l string) bool {
	if len(c.rest) < len(l) || string(c.rest[:len(l)]) != l {
		return false
	}
	c.rest = c.rest[len(l):]
	return true
}

// Digits reads a non-negative safe integer spelled as JSON.stringify spells it: digits, no leading zero.
func (c *Cursor) Digits() (int64, bool) {
	i := 0
	for i < len(c.rest) && i <= 16 && c.rest[i] >= '0' && c.rest[i] <= '9' {
		i++
	}
	if i == 0 || i > 16 || (i > 1 && c.rest[0] == '0') {
		return 0, false
	}
	var n int64
	for _, d := range c.rest[:i] {
		n = n*10 + int64(d-'0')
	}
	if n > MaxSafeInteger {
		return 0, false
	}
	c.rest = c.rest[i:]
	return n, true
}

// Str reads a string token and returns its contents; the token must be canonical (as in a line
// IsCanonical accepts) for them to be its value.
func (c *Cursor) Str() (string, bool) {
	if len(c.rest) == 0 || c.rest[0] != '"' {
		return "", false
	}
	end := skipString(c.rest, 0)
	if end < 0 {
		return "", false
	}
	tok := c.rest[:end]
	c.rest = c.rest[end:]
	return decodeCanonicalString(tok), true
}
