package views

import (
	"bytes"
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/yuin/goldmark"

	"github.com/dshfs/dshfs/eventstore/event"
)

// TestMarkdownInert renders event text through the Markdown transcript's writer and a CommonMark renderer:
// whatever the text holds, the rendered page shows that text and nothing else — no image fetched, no link,
// no HTML element of the text's own.
func TestMarkdownInert(t *testing.T) {
	cases := []struct{ name, text string }{
		{"image", "![x](http://evil/x.png)"},
		{"image in a sentence", "look: ![tracking pixel](https://evil.example/p.gif?u=1) here"},
		{"link", "[click](javascript:alert(1))"},
		{"reference image", "see ![x][ref]\n\n[ref]: http://evil/x.png"},
		{"reference definition alone", "[ref]: http://evil/x.png \"title\""},
		{"autolink", "<http://evil/autolink>"},
		{"raw HTML image", `<img src="http://evil/x.png" onerror="alert(1)">`},
		{"raw HTML block", "<div>\n<script>alert(1)</script>\n</div>"},
		{"entity", "&lt;b&gt; and &amp; stay as typed"},
		{"escaped brackets", `\[not a link\](http://evil/x.png)`},
		{"backslash before the bang", `\![x](http://evil/x.png)`},
		{"a path", `C:\Users\dev\[draft].md`},
		{"quote end", "> not a nested quote\n>> nor this"},
	}
	tag := regexp.MustCompile(`<[^>]*>`)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := &mdWriter{}
			w.quote(clipText(c.text, messageCut), event.Event{})
			w.heading(2, txt(c.text))
			w.para(txt(c.text))
			var out bytes.Buffer
			if err := goldmark.Convert(w.b, &out); err != nil {
				t.Fatal(err)
			}
			page := out.String()
			// the only elements are the writer's own: no img, a, script or any element of the text
			for _, m := range tag.FindAllString(page, -1) {
				switch strings.Trim(m, "</>") {
				case "blockquote", "p", "h2":
				default:
					t.Errorf("%q renders the element %s:\n%s\nfrom:\n%s", c.text, m, page, w.b)
				}
			}
			// the text, as the reader sees it, three times: quoted, as a heading, as a paragraph
			seen := strings.Fields(html.UnescapeString(tag.ReplaceAllString(page, " ")))
			want := strings.Fields(c.text)
			if strings.Join(seen, " ") != strings.Join(append(append(append([]string(nil), want...), want...), want...), " ") {
				t.Errorf("%q reads as %q\nfrom:\n%s", c.text, strings.Join(seen, " "), w.b)
			}
		})
	}
}
