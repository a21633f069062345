//go:build linux

package npx

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/pool"
)

// BenchmarkNPXServerStart starts a real npx-configured server as written
// (`npx -y PACKAGE`) and resolved (`node SCRIPT`), in the same run, and
// reports what the child costs the pool: the time from spawn to the
// answer to initialize (package already in npm's cache) and the PSS of
// the child's whole process tree once it answered.
//
//	make bench   (or: SWITCHBOARD_NPX=1 go test -run '^$' -bench NPX ./app/npx)
func BenchmarkNPXServerStart(b *testing.B) {
	if os.Getenv("SWITCHBOARD_NPX") == "" {
		b.Skip("SWITCHBOARD_NPX is not set")
	}
	if _, err := exec.LookPath("npx"); err != nil {
		b.Skip("npx not found")
	}
	written := pool.ServerConfig{Name: "seq", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-sequential-thinking"}}
	res, err := Resolver{}.Resolve(context.Background(), written)
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"as-written", append([]string{written.Command}, written.Args...)},
		{"resolved", append([]string{res.Command}, res.Args...)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var total time.Duration
			var pss float64
			for b.Loop() {
				d, kib, err := startAndMeasure(tc.argv)
				if err != nil {
					b.Fatal(err)
				}
				total += d
				pss += float64(kib) / 1024
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "ms-to-initialize")
			b.ReportMetric(pss/float64(b.N), "MiB-PSS")
		})
	}
}

// startAndMeasure starts argv, times its answer to initialize, sums the
// PSS of its process tree, and ends it.
func startAndMeasure(argv []string) (time.Duration, int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, 0, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", argv[0], err)
	}
	took := time.Since(start)
	if !bytes.Contains(line, []byte(`"id":1`)) {
		return 0, 0, fmt.Errorf("%s answered %s", argv[0], line)
	}
	return took, treePSS(cmd.Process.Pid), nil
}

// treePSS sums the proportional set size (KiB) of pid and its
// descendants.
func treePSS(pid int) int {
	total := 0
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p)); err == nil {
			for l := range strings.SplitSeq(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "Pss:"); ok {
					n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
					total += n
				}
			}
		}
		children, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", p))
		for _, f := range children {
			b, _ := os.ReadFile(f)
			for _, c := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(c); err == nil {
					queue = append(queue, n)
				}
			}
		}
	}
	return total
}
