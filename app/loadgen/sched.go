package loadgen

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// schedStat sums what Linux's scheduler says about every thread of some
// processes (/proc/PID/task/TID/schedstat): time on a CPU, time waiting
// for one while runnable, and how many times a thread was put on a CPU.
// Unlike wall-clock latency, these barely move when the machine is shared.
type schedStat struct {
	cpu, wait time.Duration
	slices    uint64
}

// schedTasks is one reading of threads' scheduler figures, by process
// and thread id.
type schedTasks map[[2]int]schedStat

// readSchedTasks reads pids' threads now; what it cannot read is left
// out (not Linux, or a process that has exited).
func readSchedTasks(pids []int) schedTasks {
	out := schedTasks{}
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/task"
		tasks, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
			if err != nil {
				continue
			}
			f := strings.Fields(string(b))
			if len(f) < 3 {
				continue
			}
			cpu, _ := strconv.ParseUint(f[0], 10, 64)
			wait, _ := strconv.ParseUint(f[1], 10, 64)
			n, _ := strconv.ParseUint(f[2], 10, 64)
			out[[2]int{pid, tid}] = schedStat{cpu: time.Duration(cpu), wait: time.Duration(wait), slices: n}
		}
	}
	return out
}

// since is what the threads of after did since before: a thread in both
// counts what it added, one that came since counts all it did, and one
// gone since counts nothing. Summing each reading and taking one sum
// from the other took the whole life of a thread or process that ended
// in between off the others' (a child that exited, a Go thread that
// ended), and could come out below zero.
func (after schedTasks) since(before schedTasks) schedStat {
	var sum schedStat
	for k, a := range after {
		b := before[k]
		if a.cpu < b.cpu || a.slices < b.slices { // the id was reused: another thread
			b = schedStat{}
		}
		sum.cpu += a.cpu - b.cpu
		sum.wait += max(a.wait-b.wait, 0)
		sum.slices += a.slices - b.slices
	}
	return sum
}

// readSched sums pids' threads now.
func readSched(pids []int) schedStat { return readSchedTasks(pids).since(nil) }

// withDescendants is roots and every process below them, from /proc's
// parent links (Linux; elsewhere just roots).
func withDescendants(roots []int) []int {
	children := map[int][]int{}
	if ents, err := os.ReadDir("/proc"); err == nil {
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if ppid := parentOf(pid); ppid > 0 {
				children[ppid] = append(children[ppid], pid)
			}
		}
	}
	seen := map[int]bool{}
	var out []int
	for queue := append([]int(nil), roots...); len(queue) > 0; queue = queue[1:] {
		pid := queue[0]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		out = append(out, pid)
		queue = append(queue, children[pid]...)
	}
	return out
}

// parentOf reads a process's parent from /proc/PID/stat, or 0.
func parentOf(pid int) int {
	f := statFields(pid)
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// cpuWindow is the CPU time some processes used over a measured window.
type cpuWindow struct {
	behind, self time.Duration // the processes behind the client; this process
	complete     bool          // the window ran to its end
}

// sampleCPU reads the CPU time of roots, with their descendants, and of
// this process, at from and at to (schedTasks.since). It gives up,
// incomplete, when quit is closed first (the run ended early).
func sampleCPU(roots []int, from, to time.Time, quit <-chan struct{}) cpuWindow {
	if !sleepUntil(from, quit) {
		return cpuWindow{}
	}
	self := []int{os.Getpid()}
	behind, mine := readSchedTasks(withDescendants(roots)), readSchedTasks(self)
	if !sleepUntil(to, quit) {
		return cpuWindow{}
	}
	// The processes behind the client as they are now: a child started
	// in the window counts too.
	return cpuWindow{behind: readSchedTasks(withDescendants(roots)).since(behind).cpu, self: readSchedTasks(self).since(mine).cpu, complete: true}
}

// sleepUntil waits until t; false when quit is closed before t. (A run
// ends just after its window: quit and the timer can be ready together,
// and select would pick either.)
func sleepUntil(t time.Time, quit <-chan struct{}) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-quit:
		return !time.Now().Before(t)
	}
}
