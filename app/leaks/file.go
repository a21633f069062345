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
	"strconv"
	"sync"
	"time"
)

// FileRecorder persists the pool's children as JSON lines (one "start"
// line per child, one "exit" line when the pool saw it exit), so that the
// next run can find the ones that outlived a crash. It stands in for the
// SQLite store's backends table until that lands.
//
// The file is opened for each append, so a Compact by a later run (which
// replaces the file) never strands an earlier writer on an unlinked
// inode. Appends are single writes to an O_APPEND file.
type FileRecorder struct {
	path string
	run  string

	mu sync.Mutex // serialises appends and Compact
}

// fileLine is one line of the file.
type fileLine struct {
	Op string `json:"op"` // "start" or "exit"
	ChildRecord
}

// NewFileRecorder records into path (created 0600 on first write) as
// this run: a run is one process of the app, named by its PID and start
// time. It does not touch the file until the first Record.
func NewFileRecorder(path string) *FileRecorder {
	return newFileRecorder(path, thisRun())
}

func newFileRecorder(path, run string) *FileRecorder {
	return &FileRecorder{path: path, run: run}
}

// thisRun names this process's run.
var thisRun = sync.OnceValue(func() string {
	start, err := StartTime(context.Background(), os.Getpid())
	if err != nil {
		start = time.Now()
	}
	return strconv.Itoa(os.Getpid()) + "@" + start.UTC().Format("20060102T150405.000Z")
})

// Run is this recorder's run id.
func (r *FileRecorder) Run() string { return r.run }

// Record notes that the pool started a child. StartedAt is replaced by
// the OS's start time of the PID when it can be read, so that Find later
// compares like with like (the pool still holds the child unreaped, so
// the PID cannot have been reused yet).
func (r *FileRecorder) Record(c ChildRecord) error {
	if t, err := StartTime(context.Background(), c.PID); err == nil {
		c.StartedAt = t
	}
	c.Run = r.run
	return r.append(fileLine{Op: "start", ChildRecord: c})
}

// Exited notes that the pool saw its child pid exit.
func (r *FileRecorder) Exited(pid int) error {
	return r.append(fileLine{Op: "exit", ChildRecord: ChildRecord{PID: pid, Run: r.run}})
}

func (r *FileRecorder) append(l fileLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.OpenFile(r.path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("record child: %w", err)
	}
	line := append(b, '\n')
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, fi.Size()-1); err == nil && last[0] != '\n' {
			// A crash cut the last line short: start on a fresh one.
			line = append([]byte{'\n'}, line...)
		}
	}
	_, err = f.Write(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("record child in %s: %w", r.path, err)
	}
	return nil
}

// Earlier lists children that other runs started and never saw exit,
// oldest first.
func (r *FileRecorder) Earlier() ([]ChildRecord, error) {
	open, err := readOpen(r.path)
	if err != nil {
		return nil, err
	}
	out := []ChildRecord{}
	for _, c := range open {
		if c.Run != r.run {
			out = append(out, c)
		}
	}
	return out, nil
}

// ChildrenOfEarlierRuns makes FileRecorder a Source.
func (r *FileRecorder) ChildrenOfEarlierRuns(context.Context) ([]ChildRecord, error) {
	return r.Earlier()
}

// Compact rewrites the file with only the children still unaccounted for
// whose process may still be alive (the same PID with the same start
// time), so the file stays small. Only the single running pool may call
// it: it replaces the file.
func (r *FileRecorder) Compact(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	open, err := readOpen(r.path)
	if err != nil {
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
	tmp, err := os.CreateTemp(filepath.Dir(r.path), ".children-*")
	if err != nil {
		return fmt.Errorf("compact %s: %w", r.path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf); err != nil {
		tmp.Close()
		return fmt.Errorf("compact %s: %w", r.path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("compact %s: %w", r.path, err)
	}
	if err := os.Rename(tmp.Name(), r.path); err != nil {
		return fmt.Errorf("compact %s: %w", r.path, err)
	}
	return nil
}

// FileSource reads a FileRecorder's file without writing it: every
// child in it counts as an earlier run's. The CLI uses it when no pool
// is running.
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
