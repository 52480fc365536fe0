// Package htmltest reads rendered pages in tests as a browser's parser
// does: by element id, by predicate, their text and attributes.
package htmltest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
)

// Parse parses a page.
func Parse(t testing.TB, page string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	require.NoError(t, err)
	return doc
}

// Attr is an element's attribute ("" when it has none).
func Attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// All returns the elements under n (n included) that match, in document order.
func All(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	if n.Type == html.ElementNode && match(n) {
		out = append(out, n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		out = append(out, All(c, match)...)
	}
	return out
}

// ByID returns the element with the id (nil when there is none).
func ByID(n *html.Node, id string) *html.Node {
	if found := All(n, func(e *html.Node) bool { return Attr(e, "id") == id }); len(found) > 0 {
		return found[0]
	}
	return nil
}

// RawText is an element's text as the DOM holds it, line breaks kept.
func RawText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// Text is an element's text with white space collapsed, as it reads.
func Text(n *html.Node) string { return strings.Join(strings.Fields(RawText(n)), " ") }

// Rows reads the rows of the tables under n (n included) as the text of
// their cells, header rows too.
func Rows(n *html.Node) [][]string {
	var out [][]string
	for _, tr := range All(n, func(e *html.Node) bool { return e.Data == "tr" }) {
		var row []string
		for c := tr.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.ElementNode && (c.Data == "td" || c.Data == "th") {
				row = append(row, Text(c))
			}
		}
		out = append(out, row)
	}
	return out
}

// ProseText is what a page says in words: its text outside code (pre,
// code, textarea: YAML, commands, raw values shown as such) and outside
// script and style, white space collapsed.
func ProseText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "pre", "code", "textarea", "script", "style", "template":
				return
			}
		}
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteString(" ")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}
