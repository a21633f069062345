package pool_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// The child hears its requests in the order they were queued, whatever
// their sizes: requests queued while the child restarts, X (200 KiB), Y
// (100 KiB) and Z (small), reach the next child as X, Y, Z. The writer
// writes at most 256 KiB at once, so Y does not fit in X's write; Z
// would, and must still wait for Y.
func TestWriterKeepsQueueOrder(t *testing.T) {
	logPath := filepath.Join(shortTempDir(t), "child.log")
	cfg := fake("w", "-log", logPath)
	cfg.Restart = pool.RestartPolicy{MinBackoff: time.Second, MaxBackoff: time.Second}
	tp := newTestPool(t, nil, cfg)
	c := tp.dial(t, "w")
	c.initialize("c", "")
	c.call(`"k"`, "crash", `{}`)
	c.recvID(`"k"`) // the child died: the next starts after the backoff
	c.call(`"x"`, "echo", fmt.Sprintf(`{"text":"X%s"}`, strings.Repeat("a", 200<<10)))
	c.call(`"y"`, "echo", fmt.Sprintf(`{"text":"Y%s"}`, strings.Repeat("a", 100<<10)))
	c.call(`"z"`, "echo", `{"text":"Z"}`)
	for range 3 { // in any order: the child answers each call on its own goroutine
		if m := c.recv(); m.Error != nil || m.Result == nil {
			t.Fatalf("want the answer to a call, got %s", m.raw)
		}
	}
	var got []string
	for _, m := range childLog(t, logPath) {
		if m["method"] != "tools/call" {
			continue
		}
		params, _ := m["params"].(map[string]any)
		args, _ := params["arguments"].(map[string]any)
		if text, _ := args["text"].(string); text != "" {
			got = append(got, text[:1])
		}
	}
	if want := []string{"X", "Y", "Z"}; !slices.Equal(got, want) {
		t.Fatalf("the child read the calls as %v, want %v", got, want)
	}
}
