package schema

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// TestDecodeSummary: a user's program decodes probe's summary.json
// (probe's golden file) into Summary with no field left over, and writes
// it back byte for byte as probe does.
func TestDecodeSummary(t *testing.T) {
	b, err := os.ReadFile("../report/testdata/summary.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var s Summary
	if err := d.Decode(&s); err != nil {
		t.Fatalf("summary.golden.json: %v", err)
	}
	if s.Schema != SummarySchema || s.PerRequest.Allocs == nil {
		t.Fatalf("decoded %q, allocs %v", s.Schema, s.PerRequest.Allocs)
	}
	again, err := json.MarshalIndent(&s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(again, '\n'), b) {
		t.Errorf("written back, summary.golden.json differs:\n%s", again)
	}
}
