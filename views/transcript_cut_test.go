package views_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/dshfs/dshfs/views"
)

// TestTranscriptCutsHugeMessages: a session whose messages hold megabytes of text (a paste, a reasoning
// dump, a message of many parts) renders transcript.md and transcript.html of a size bounded whatever the
// text's, each cut message saying how long it was and naming its event.
func TestTranscriptCutsHugeMessages(t *testing.T) {
	const huge = 8 << 20
	big := strings.Repeat("paste é ", huge/9) // two-byte characters: every cut must fall between them
	st := store(t,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":2,"data":{"id":"u","role":"user","content":[{"type":"text","text":"`+big+`"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"assistant/message","seq":2,"time":3,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"reasoning","text":"`+big+`"},{"type":"text","text":"`+big+`"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`,
		`{"type":"user/message","seq":3,"time":4,"data":{"id":"u2","role":"user","content":[{"type":"text","text":"`+big+`"},{"type":"image"},{"type":"text","text":"`+big+`"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"turn/end","seq":4,"time":5,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	)
	s, err := views.Load(context.Background(), st, "s", views.Options{})
	if err != nil || s.Refusal != nil {
		t.Fatal(err, s.Refusal)
	}
	for _, v := range []views.View{views.Transcript, views.TranscriptHTML} {
		out, err := s.Render(context.Background(), v)
		if err != nil {
			t.Fatal(err)
		}
		text := string(out)
		// four messages of 8 MiB: the view holds a bounded share of each
		if len(text) > 512<<10 {
			t.Errorf("%s: %d bytes for four cut messages", v, len(text))
		}
		for _, note := range []string{
			"events/" + views.EventName(1, "user/message"),
			"events/" + views.EventName(2, "assistant/message"),
			"events/" + views.EventName(3, "user/message"),
		} {
			if !strings.Contains(text, note) {
				t.Errorf("%s names no %s in a cut note", v, note)
			}
		}
		if n := strings.Count(text, "… cut: "); n != 4 {
			t.Errorf("%s: %d cut notes, want 4 (the reasoning, two texts, a message of parts)", v, n)
		}
		if !strings.Contains(text, "… cut: "+strconv.Itoa(len(big))+" bytes in all") || !strings.Contains(text, "… cut: "+strconv.Itoa(2*len(big)+len("\n[image]\n"))+" bytes in all") {
			t.Errorf("%s: the cut notes do not give the messages' sizes", v)
		}
		if strings.ContainsRune(text, '\uFFFD') {
			t.Errorf("%s: a cut fell inside a character", v)
		}
		if !strings.Contains(text, "paste é paste é") {
			t.Errorf("%s shows nothing of the messages", v)
		}
	}
}
