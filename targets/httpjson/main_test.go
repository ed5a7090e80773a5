package main

import (
	"encoding/json"
	"testing"
)

// The append encoder must write what encoding/json writes, byte for byte.
func TestAppendMatchesEncodingJSON(t *testing.T) {
	doc := buildDocument()
	want, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if got := appendDocument(nil, &doc); string(got) != string(want) {
		t.Errorf("append encoder:\n%s\nencoding/json:\n%s", got, want)
	}
	if len(want) < 7000 || len(want) > 9500 {
		t.Errorf("document is %d bytes, want about 8 KB", len(want))
	}
}
