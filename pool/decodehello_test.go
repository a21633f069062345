package pool

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool/wire"
)

// decodeHello decodes what json.Unmarshal does, resume and lost requests
// included, and refuses only a resume with more lost requests than its
// bound.
func TestDecodeHelloAsUnmarshal(t *testing.T) {
	full, _ := json.Marshal(wire.Hello{Server: "a", PID: 7, Attach: true, Ledger: true, Resume: &wire.Resume{
		Run: "r", Session: "s", Initialize: []byte(`{"x":1}`), InitializeID: `"i"`, LogLevel: "debug",
		Subscriptions: []string{"u"}, PendingBytes: 3, Ledger: true, MidLine: true, Began: time.Unix(1e9, 0).UTC(),
		Lost: []wire.Lost{{ID: "1", Written: true}, {ID: `"l"`, Listen: true}},
	}})
	for _, line := range []string{
		string(full),
		`{"server":"a"}`,
		`{"server":"a","resume":null}`,
		`{"server":"a","resume":{"session":"s","lost":null}}`,
		`{"server":"a","resume":{"session":"s","lost":[]}}`,
		`{"server":"a","resume":{"session":"s","lost":[{"id":"1"}],"lost":[{"id":"2"}]}}`,
		`{"server":"a","resume":{"session":"s","lost":[{"id":"1"},{"id":"2"}]}}`,
	} {
		var want Hello
		if err := json.Unmarshal([]byte(line), &want); err != nil {
			t.Fatal(err)
		}
		got, err := decodeHello([]byte(line), 2)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("decodeHello(%s) = %+v, %v; want %+v", line, got, err, want)
		}
	}
	for _, line := range []string{
		`{"server":"a","resume":{"session":"s","lost":{"id":"1"}}}`,
		`{"server":"a","resume":{"session":"s","lost":[1]}}`,
		`{"server":"a","resume":[]}`,
		`{"server":"a","resume":{"session":"s","lost":[{"id":"1"}]}`,
	} {
		if _, err := decodeHello([]byte(line), 2); err == nil {
			t.Errorf("decodeHello(%s): no error", line)
		}
	}
	_, err := decodeHello([]byte(`{"server":"a","resume":{"session":"s","lost":[{"id":"1"},{"id":"2"},{"id":"3"}]}}`), 2)
	if tooMany := (*tooManyLostError)(nil); !errors.As(err, &tooMany) || tooMany.limit != 2 {
		t.Errorf("three lost requests, two allowed: %v", err)
	}
}
