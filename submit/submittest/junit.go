// Package submittest reads back the JUnit XML that `accord submit` writes,
// checked with xmllint against our schema of the common JUnit format
// (junit.xsd), for the tests of package submit and of the command.
package submittest

import (
	_ "embed"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

//go:embed junit.xsd
var schema []byte

// SchemaFile writes junit.xsd into the test's temporary folder, for
// xmllint, and returns its path.
func SchemaFile(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "junit.xsd")
	require.NoError(t, os.WriteFile(file, schema, 0o644))
	return file
}

// JUnit is a JUnit document as the tests read it back.
type JUnit struct {
	Tests    int `xml:"tests,attr"`
	Failures int `xml:"failures,attr"`
	Errors   int `xml:"errors,attr"`
	Skipped  int `xml:"skipped,attr"`
	Suites   []struct {
		Name      string `xml:"name,attr"`
		Tests     int    `xml:"tests,attr"`
		Failures  int    `xml:"failures,attr"`
		Skipped   int    `xml:"skipped,attr"`
		Errors    int    `xml:"errors,attr"`
		Time      string `xml:"time,attr"`
		Timestamp string `xml:"timestamp,attr"`
		Props     []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
			SystemOut string `xml:"system-out"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// Prop is the value of the first suite's property name ("" when absent).
func (s JUnit) Prop(name string) string {
	for _, p := range s.Suites[0].Props {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// ReadJUnit validates the file with xmllint against our schema and parses
// it: one test suite.
func ReadJUnit(t *testing.T, file string) JUnit {
	t.Helper()
	ValidateJUnit(t, file)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	var doc JUnit
	require.NoError(t, xml.Unmarshal(b, &doc))
	require.Len(t, doc.Suites, 1)
	return doc
}

func ValidateJUnit(t *testing.T, file string) {
	t.Helper()
	out, err := exec.Command("xmllint", "--noout", "--schema", SchemaFile(t), file).CombinedOutput()
	require.NoError(t, err, "xmllint --schema junit.xsd %s:\n%s", file, out)
	require.Contains(t, string(out), "validates")
}
