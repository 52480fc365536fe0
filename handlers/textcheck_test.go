package handlers

import (
	"net/url"
	"strings"
	"testing"
)

// checkValues agrees with url.ParseQuery: it passes a query exactly when
// every name and value ParseQuery decodes is text.
func FuzzCheckValues(f *testing.F) {
	for _, seed := range []string{"a=b&c=d", "email=a%00b@x.test", "x=%ff", "x=%zz", "a&&b=", "=v", "k=caf%C3%A9", "k=%c3%28"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if strings.Contains(raw, ";") {
			return // ParseQuery refuses semicolons; we decode them as text
		}
		_, ok := checkValues(raw, "the query parameter")
		values, err := url.ParseQuery(raw)
		allText := err == nil
		for k, vs := range values {
			allText = allText && isText(k)
			for _, v := range vs {
				allText = allText && isText(v)
			}
		}
		if ok != allText {
			t.Fatalf("checkValues(%q) = %v, ParseQuery says text: %v (err %v)", raw, ok, allText, err)
		}
	})
}
