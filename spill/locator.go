package spill

import (
	"bytes"
	"strings"

	"github.com/dshfs/dshfs/eventstore/event"
)

// Notice text, quoted from upstream spill-policy (spillNotice) and spill-local (retrievalHint).
const (
	// Marker precedes the locator in every spill notice.
	Marker = "Full formatted result stored at: "
	// LocalRetrievalHint is spill-local's retrievalHint; it follows the locator after ". ".
	LocalRetrievalHint = "Use read with offset/limit, or grep this path to search within it."
)

// Event types whose texts can carry a spill notice.
const (
	TypeToolResult   = "tool/result"
	TypeCodeDispatch = "tool/code-dispatch"
)

// Locator is one citation: the citing event and the path it names.
type Locator struct {
	Seq    int64
	CallID string // tool/result: message.source.callId; tool/code-dispatch: subCallId (the spill's callId)
	Path   string // the locator exactly as written in the text
}

var markerBytes = []byte(Marker)

// Extract returns every locator cited by tool/result and tool/code-dispatch events, in log order and, within
// an event, in text order; a path cited more than once by the same event yields one Locator.
func Extract(events []event.Event) []Locator {
	var out []Locator
	for _, ev := range events {
		if ev.Type != TypeToolResult && ev.Type != TypeCodeDispatch {
			continue
		}
		// The marker has no character JSON escapes, so a raw-bytes miss proves there is no notice and saves
		// parsing nearly every event.
		if !bytes.Contains(ev.Raw, markerBytes) {
			continue
		}
		rec, err := ev.Record()
		if err != nil {
			continue
		}
		data, _ := rec.Get("data")
		callID, blocks := citingTexts(ev.Type, data)
		seen := map[string]bool{}
		for _, b := range blocks {
			if b.Kind != event.KindObject {
				continue
			}
			if typ, _ := b.Get("type"); typ.Kind != event.KindString || typ.Str != "text" {
				continue
			}
			text, _ := b.Get("text")
			if text.Kind != event.KindString {
				continue
			}
			for _, p := range Locators(text.Str) {
				if !seen[p] {
					seen[p] = true
					out = append(out, Locator{Seq: ev.Seq, CallID: callID, Path: p})
				}
			}
		}
	}
	return out
}

// citingTexts picks the call id and the content blocks that hold the text of one event's result.
func citingTexts(typ string, data event.Value) (callID string, blocks []event.Value) {
	if typ == TypeCodeDispatch {
		callID = str(data, "subCallId")
		content, _ := data.Get("content")
		return callID, content.Arr
	}
	msg, _ := data.Get("message")
	src, _ := msg.Get("source")
	callID = str(src, "callId")
	content, _ := msg.Get("content")
	if len(content.Arr) == 0 {
		return callID, nil
	}
	inner, _ := content.Arr[0].Get("content")
	return callID, inner.Arr
}

// str is the string member key of v, or "" when v is not an object or the member is not a string.
func str(v event.Value, key string) string {
	m, _ := v.Get(key)
	if m.Kind != event.KindString {
		return ""
	}
	return m.Str
}

// Locators returns the locators of every notice in one text, in order, duplicates included.
//
// A notice is one line, so a locator never spans a line break. Within the marker's line it runs to the
// first ". " + LocalRetrievalHint when there is one (so a path that itself contains ". " or ")" survives);
// otherwise to the first ". " (the start of another backend's hint); otherwise to the last ")" (a notice
// with no hint). A marker with none of these after it (a truncated notice, or prose quoting the marker) and
// an empty locator yield nothing.
func Locators(text string) []string {
	var out []string
	for {
		i := strings.Index(text, Marker)
		if i < 0 {
			return out
		}
		text = text[i+len(Marker):]
		line := text
		if nl := strings.IndexAny(line, "\n\r"); nl >= 0 {
			line = line[:nl]
		}
		end := strings.Index(line, ". "+LocalRetrievalHint)
		if end < 0 {
			end = strings.Index(line, ". ")
		}
		if end < 0 {
			end = strings.LastIndexByte(line, ')')
		}
		if end <= 0 {
			continue
		}
		out = append(out, text[:end])
		text = text[end:]
	}
}
