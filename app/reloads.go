package app

import (
	"slices"
	"sync"
	"time"
)

// configReload is one reload of the config file: what the dashboard's
// waterfall marks so that a slow-down can be told from a config change.
type configReload struct {
	Seq     uint64
	At      time.Time
	Changes string // the diff, as the log says it
	Err     string // why it was not applied; empty when it was
}

// maxReloads bounds the reloads an instance remembers.
const maxReloads = 64

// reloadLog is the instance's latest config reloads, oldest first. Its
// methods are safe from any goroutine; reading copies.
type reloadLog struct {
	mu    sync.Mutex
	seq   uint64
	items []configReload
}

func (l *reloadLog) add(at time.Time, changes string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	r := configReload{Seq: l.seq, At: at, Changes: changes}
	if err != nil {
		r.Err = err.Error()
	}
	l.items = append(l.items, r)
	if n := len(l.items); n > maxReloads {
		l.items = slices.Clone(l.items[n-maxReloads:])
	}
}

func (l *reloadLog) list() []configReload {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.items)
}
