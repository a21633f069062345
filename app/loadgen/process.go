package loadgen

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// ProcessOpener opens each session as a new process speaking MCP on its
// stdin and stdout: a fake server driven over its own pipe, or a
// `switchboard connect` shim; their stderr is discarded. env is added to this process's environment.
// pids, when not nil, receives each process's PID.
func ProcessOpener(argv []string, env []string, pids chan<- int) Opener {
	return func(ctx context.Context, _ int) (*Stream, error) {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), env...)
		// stderr is left out: the fake server's banner is noise, and
		// what goes wrong shows in the counts.
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start %s: %w", argv[0], err)
		}
		if pids != nil {
			select {
			case pids <- cmd.Process.Pid:
			default:
			}
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		return &Stream{W: stdin, R: stdout, PID: cmd.Process.Pid, Close: func() error {
			stdin.Close() // MCP's stdio shutdown: the process exits on EOF
			select {
			case err := <-done:
				return err
			case <-time.After(3 * time.Second):
				_ = cmd.Process.Kill()
				return <-done
			}
		}}, nil
	}
}

// ProcStat is what Linux says about a process: CPU time used so far and
// resident memory now.
type ProcStat struct {
	CPU time.Duration
	RSS uint64 // bytes
	PSS uint64 // bytes, proportional set size
	// Syscalls counts the read and write system calls made so far (the
	// read and write families: readv, writev and the socket calls too).
	// A count, unlike a time, is the same on a busy host as on a quiet
	// one: it shows a change in how the pool batches its I/O that
	// requests per second cannot show through a noisy VM's spread.
	Syscalls uint64
}

// ReadProc reads pid's ProcStat from /proc (Linux); fields it cannot read
// stay zero.
func ReadProc(pid int) ProcStat {
	var st ProcStat
	if f := statFields(pid); len(f) > 12 {
		ut, _ := strconv.ParseUint(f[11], 10, 64)
		stt, _ := strconv.ParseUint(f[12], 10, 64)
		st.CPU = time.Duration(ut+stt) * time.Second / clockTicks
	}
	st.RSS = statusKB(pid, "status", "VmRSS:") * 1024
	st.PSS = statusKB(pid, "smaps_rollup", "Pss:") * 1024
	st.Syscalls = statusKB(pid, "io", "syscr:") + statusKB(pid, "io", "syscw:")
	return st
}

// statFields are the fields of /proc/PID/stat after the command name
// (field 3, the state, first), or nil when it cannot be read.
func statFields(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	// The command name (field 2) may hold spaces: count from its end.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

func statusKB(pid int, file, key string) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/" + file)
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, key); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				n, _ := strconv.ParseUint(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}
