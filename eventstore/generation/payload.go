package generation

import (
	"slices"
	"strconv"
	"strings"

	"github.com/dshfs/dshfs/eventstore/event"
)

// The v3 codec admits a system message only if its message would pass the released payload rules of a
// user message (content blocks and a plugin source), checked as the user message at seq 0. The rules
// and their texts are the released v0 payload validation's.

const systemLabel = "user/message 0"

// systemMessageSemantics checks a system message's message (already known to hold exactly id, role,
// source and content, a non-empty id and a plugin source) as the released user-message payload.
func systemMessageSemantics(msg event.Value) error {
	content, _ := msg.Get("content")
	if err := contentBlocks(content, systemLabel+" content"); err != nil {
		return err
	}
	src, _ := msg.Get("source")
	return pluginSource(src, systemLabel+" source")
}

// v0Keys is the released payload validation's member check: an unexpected member first, then a missing
// one, both named as JSON strings.
func v0Keys(v event.Value, required, optional []string, label string) error {
	for _, m := range v.Obj {
		if !slices.Contains(required, m.Key) && !slices.Contains(optional, m.Key) {
			return formatErr(label + " has unexpected member " + quote(m.Key))
		}
	}
	for _, k := range required {
		if !v.Has(k) {
			return formatErr(label + " lacks required member " + quote(k))
		}
	}
	return nil
}

func v0Record(v event.Value, ok bool, label string) error {
	if !ok || !isObject(v) {
		return formatErr(label + " must be a JSON object")
	}
	return nil
}

func stringMember(v event.Value, ok bool, label string) error {
	if !ok || v.Kind != event.KindString {
		return formatErr(label + " must be a string")
	}
	return nil
}

func nonEmptyMember(v event.Value, ok bool, label string) error {
	if !ok || v.Kind != event.KindString || v.Str == "" {
		return formatErr(label + " must be a non-empty string")
	}
	return nil
}

func literalMember(v event.Value, ok bool, allowed []string, label string) error {
	if ok && v.Kind == event.KindString && slices.Contains(allowed, v.Str) {
		return nil
	}
	return formatErr(label + " must be one of " + strings.Join(allowed, ", "))
}

func positiveMember(v event.Value, ok bool, label string) error {
	if !ok {
		return formatErr(label + " must be a non-negative safe integer")
	}
	n, err := count(v, label)
	if err != nil {
		return err
	}
	if n == 0 {
		return formatErr(label + " must be positive")
	}
	return nil
}

func contentBlocks(v event.Value, label string) error {
	if v.Kind != event.KindArray {
		return formatErr(label + " must be an array")
	}
	for i, b := range v.Arr {
		if err := contentBlock(b, label+"["+strconv.Itoa(i)+"]"); err != nil {
			return err
		}
	}
	return nil
}

// contentBlock checks one content block of a known kind; a block of another kind needs only a
// non-empty type.
func contentBlock(b event.Value, label string) error {
	if err := v0Record(b, true, label); err != nil {
		return err
	}
	t, tok := b.Get("type")
	kind := ""
	if tok && t.Kind == event.KindString {
		kind = t.Str
	}
	switch kind {
	case "text", "reasoning":
		if err := v0Keys(b, []string{"type", "text"}, nil, label); err != nil {
			return err
		}
		x, ok := b.Get("text")
		return stringMember(x, ok, label+" text")
	case "image":
		if err := v0Keys(b, []string{"type", "attachment"}, nil, label); err != nil {
			return err
		}
		a, _ := b.Get("attachment")
		return imageAttachment(a, label+" attachment")
	case "tool-call":
		if err := v0Keys(b, []string{"type", "id", "name", "arguments"}, nil, label); err != nil {
			return err
		}
		for _, k := range []string{"id", "name"} {
			x, ok := b.Get(k)
			if err := nonEmptyMember(x, ok, label+" "+k); err != nil {
				return err
			}
		}
		x, ok := b.Get("arguments")
		return stringMember(x, ok, label+" arguments")
	case "tool-result":
		if err := v0Keys(b, []string{"type", "toolCallId", "content"}, []string{"isError"}, label); err != nil {
			return err
		}
		x, ok := b.Get("toolCallId")
		if err := nonEmptyMember(x, ok, label+" toolCallId"); err != nil {
			return err
		}
		c, _ := b.Get("content")
		if err := contentBlocks(c, label+" content"); err != nil {
			return err
		}
		if e, ok := b.Get("isError"); ok && e.Kind != event.KindBool {
			return formatErr(label + " isError must be a boolean")
		}
		return nil
	}
	return nonEmptyMember(t, tok, label+" type")
}

func imageAttachment(a event.Value, label string) error {
	if err := v0Record(a, true, label); err != nil {
		return err
	}
	if err := v0Keys(a, []string{"attachmentId", "mediaType", "bytes", "width", "height"}, []string{"name", "originalDimensions"}, label); err != nil {
		return err
	}
	x, ok := a.Get("attachmentId")
	if err := nonEmptyMember(x, ok, label+" attachmentId"); err != nil {
		return err
	}
	x, ok = a.Get("mediaType")
	if err := literalMember(x, ok, []string{"image/png", "image/jpeg", "image/webp", "image/gif"}, label+" mediaType"); err != nil {
		return err
	}
	x, _ = a.Get("bytes")
	if _, err := count(x, label+" bytes"); err != nil {
		return err
	}
	for _, k := range []string{"width", "height"} {
		x, ok := a.Get(k)
		if err := positiveMember(x, ok, label+" "+k); err != nil {
			return err
		}
	}
	if x, ok := a.Get("name"); ok {
		if err := stringMember(x, ok, label+" name"); err != nil {
			return err
		}
	}
	if d, ok := a.Get("originalDimensions"); ok {
		if err := v0Record(d, ok, label+" originalDimensions"); err != nil {
			return err
		}
		if err := v0Keys(d, []string{"width", "height"}, nil, label+" originalDimensions"); err != nil {
			return err
		}
		for _, k := range []string{"width", "height"} {
			x, ok := d.Get(k)
			if err := positiveMember(x, ok, label+" original "+k); err != nil {
				return err
			}
		}
	}
	return nil
}

// pluginSource checks a plugin message source: its admitted members (compaction checkpoints name their
// compaction), and a form with the members that form requires.
func pluginSource(src event.Value, label string) error {
	optional := []string{"form", "sections", "summary"}
	plugin, pok := src.Get("plugin")
	compact := pok && plugin.Kind == event.KindString && plugin.Str == "compact"
	if compact {
		optional = append(optional, "compactionId", "sourceCommandId")
	}
	if err := v0Keys(src, []string{"kind", "plugin"}, optional, label); err != nil {
		return err
	}
	if err := nonEmptyMember(plugin, pok, label+" plugin"); err != nil {
		return err
	}
	if compact {
		x, ok := src.Get("compactionId")
		if err := nonEmptyMember(x, ok, label+" compactionId"); err != nil {
			return err
		}
		if x, ok := src.Get("sourceCommandId"); ok {
			if err := nonEmptyMember(x, ok, label+" sourceCommandId"); err != nil {
				return err
			}
		}
	}
	form, fok := src.Get("form")
	if !fok {
		return nil
	}
	if err := literalMember(form, fok, []string{"instructions", "catalog", "snapshot", "notice", "relay", "recall"}, label+" form"); err != nil {
		return err
	}
	sections, sok := src.Get("sections")
	if form.Str == "snapshot" {
		if sections.Kind != event.KindArray {
			return formatErr(label + " sections must be an array")
		}
		for i, s := range sections.Arr {
			sl := label + " sections[" + strconv.Itoa(i) + "]"
			if err := v0Record(s, true, sl); err != nil {
				return err
			}
			if err := v0Keys(s, []string{"name", "text"}, nil, sl); err != nil {
				return err
			}
			x, ok := s.Get("name")
			if err := nonEmptyMember(x, ok, sl+" name"); err != nil {
				return err
			}
			x, ok = s.Get("text")
			if err := stringMember(x, ok, sl+" text"); err != nil {
				return err
			}
		}
	} else if sok {
		return formatErr(label + " sections require snapshot form")
	}
	summary, mok := src.Get("summary")
	if form.Str == "notice" {
		return stringMember(summary, mok, label+" summary")
	}
	if mok {
		return formatErr(label + " summary requires notice form")
	}
	return nil
}
