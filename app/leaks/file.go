package leaks

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// The children file, children.jsonl, is where versions before the
// history database's backends table recorded children: one "start" line
// per child, one "exit" line when the pool saw it exit. Nothing writes it
// now; it is read, so that children an earlier version left behind are
// still found, and compacted away once none of them runs.

// fileLine is one line of the file.
type fileLine struct {
	Op string `json:"op"` // "start" or "exit"
	ChildRecord
}

// Compact rewrites the file with only the children still unaccounted for
// whose process may still be alive (the same PID with the same start
// time), and removes it when there are none. Only the single running
// pool may call it: it replaces the file.
func (f FileSource) Compact(ctx context.Context) error {
	path := string(f)
	open, err := readOpen(path)
	if err != nil || open == nil {
		return err
	}
	var buf []byte
	for _, c := range open {
		if t, err := StartTime(ctx, c.PID); err != nil || !sameStart(t, c.StartedAt) {
			continue
		}
		b, err := json.Marshal(fileLine{Op: "start", ChildRecord: c})
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
	}
	if len(buf) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("compact %s: %w", path, err)
		}
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".children-*")
	if err != nil {
		return fmt.Errorf("compact %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf); err != nil {
		tmp.Close()
		return fmt.Errorf("compact %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("compact %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("compact %s: %w", path, err)
	}
	return nil
}

// FileSource is the children file of earlier versions: every child in it
// counts as an earlier run's.
type FileSource string

// ChildrenOfEarlierRuns makes FileSource a Source.
func (f FileSource) ChildrenOfEarlierRuns(context.Context) ([]ChildRecord, error) {
	open, err := readOpen(string(f))
	if open == nil {
		open = []ChildRecord{}
	}
	return open, err
}

// readOpen reads the file and returns the children whose exit is not
// recorded, oldest first. A missing file has none; a damaged line (a
// crash mid-append) is skipped.
func readOpen(path string) ([]ChildRecord, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	type runPID struct {
		run string
		pid int
	}
	open := map[runPID]ChildRecord{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l fileLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.PID <= 0 {
			continue
		}
		k := runPID{l.Run, l.PID}
		switch l.Op {
		case "start":
			open[k] = l.ChildRecord
		case "exit":
			delete(open, k)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	out := make([]ChildRecord, 0, len(open))
	for _, c := range open {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(out[j].StartedAt) {
			return out[i].StartedAt.Before(out[j].StartedAt)
		}
		return out[i].PID < out[j].PID
	})
	return out, nil
}
