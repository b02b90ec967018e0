package prefix

import (
	"bytes"
	"testing"
)

// A line written in pieces comes out once whole, with the prefix; an
// unfinished one waits for its end.
func TestWriterPrefixesWholeLines(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out, "c| ")
	for _, s := range []string{"one\ntw", "o\n", "\nthr"} {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if want := "c| one\nc| two\nc| \n"; out.String() != want {
		t.Fatalf("wrote %q, want %q", out.String(), want)
	}
}
