package app

import (
	"testing"
	"time"
)

// TestReloadLogKeepsTheLatest: the log is bounded and keeps counting.
func TestReloadLogKeepsTheLatest(t *testing.T) {
	var l reloadLog
	at := time.Now()
	for i := range maxReloads + 10 {
		l.add(at.Add(time.Duration(i)*time.Second), "changed", nil)
	}
	got := l.list()
	if len(got) != maxReloads || got[0].Seq != 11 || got[len(got)-1].Seq != maxReloads+10 {
		t.Errorf("kept %d reloads, %d..%d; want the last %d", len(got), got[0].Seq, got[len(got)-1].Seq, maxReloads)
	}
	got[0].Changes = "edited"
	if l.list()[0].Changes != "changed" {
		t.Error("list shares memory with the log")
	}
}
