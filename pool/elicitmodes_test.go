package pool

import (
	"encoding/json"
	"testing"
)

// The elicitation modes a client declares (2025-11-25, and 2026-07-28's
// clientCapabilities alike: an empty object is form mode only) are the
// modes a child is told and the questions its client may be asked: a
// client that declared URL mode alone is neither told nor asked form
// mode. On the first edition {"url":{}} counted as form mode too.
func TestClientCapsElicitationModes(t *testing.T) {
	for _, c := range []struct {
		declared, told string
		form, url      bool
	}{
		{`{}`, `{}`, false, false},
		{`{"elicitation":{}}`, `{"elicitation":{}}`, true, false},
		{`{"elicitation":{"form":{}}}`, `{"elicitation":{}}`, true, false},
		{`{"elicitation":{"url":{}}}`, `{"elicitation":{"url":{}}}`, false, true},
		{`{"elicitation":{"form":{},"url":{}}}`, `{"elicitation":{"form":{},"url":{}}}`, true, true},
		{`{"sampling":{},"elicitation":{"url":{},"form":{}}}`, `{"sampling":{},"elicitation":{"form":{},"url":{}}}`, true, true},
	} {
		caps := clientCapsOf([]byte(c.declared))
		if got := caps.capabilitiesJSON(); got != c.told {
			t.Errorf("%s: the child is told %s, want %s", c.declared, got, c.told)
		}
		for _, q := range []struct {
			params string
			want   bool
		}{
			{`{"message":"?","requestedSchema":{}}`, c.form},
			{`{"mode":"form","message":"?","requestedSchema":{}}`, c.form},
			{`{"mode":"url","message":"?","url":"https://x","elicitationId":"1"}`, c.url},
		} {
			if got := caps.has(questionNeeds("elicitation/create", []byte(q.params))); got != q.want {
				t.Errorf("%s: may be asked %s: %v, want %v", c.declared, q.params, got, q.want)
			}
		}
		if got := caps.has("elicitation"); got != (c.form || c.url) {
			t.Errorf("%s: elicitation in any mode: %v", c.declared, got)
		}
	}
	for capability, want := range map[string]string{
		"elicitation.form": `{"requiredCapabilities":{"elicitation":{"form":{}}}}`,
		"elicitation.url":  `{"requiredCapabilities":{"elicitation":{"url":{}}}}`,
		"sampling":         `{"requiredCapabilities":{"sampling":{}}}`,
	} {
		data, _ := requiredCapability(capability)
		if got, _ := json.Marshal(data); string(got) != want {
			t.Errorf("-32021 for %s: %s, want %s", capability, got, want)
		}
	}
}

// A hand-over keeps the elicitation modes a child was told, and reads the
// records of older pools as they meant them: "elicitation" alone was form
// mode (the child was told {}), with "elicitation.url" both modes.
func TestCarriedChildKeepsElicitationModes(t *testing.T) {
	for _, declared := range []string{`{}`, `{"elicitation":{}}`, `{"elicitation":{"url":{}}}`,
		`{"sampling":{},"elicitation":{"form":{},"url":{}}}`} {
		caps := clientCapsOf([]byte(declared))
		b, err := json.Marshal(CarriedChild{Caps: carriedCaps(caps)})
		if err != nil {
			t.Fatal(err)
		}
		var cc CarriedChild
		if err := json.Unmarshal(b, &cc); err != nil {
			t.Fatal(err)
		}
		if got := cc.caps(); got != caps {
			t.Errorf("%s: carried as %s and adopted as %+v, want %+v", declared, b, got, caps)
		}
	}
	for record, told := range map[string]string{
		`{"caps":["elicitation"]}`:                              `{"elicitation":{}}`,
		`{"caps":["sampling","elicitation","elicitation.url"]}`: `{"sampling":{},"elicitation":{"form":{},"url":{}}}`,
	} {
		var cc CarriedChild
		if err := json.Unmarshal([]byte(record), &cc); err != nil {
			t.Fatal(err)
		}
		if got := cc.caps().capabilitiesJSON(); got != told {
			t.Errorf("an older pool's %s: adopted as told %s, want %s", record, got, told)
		}
	}
}
