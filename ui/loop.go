package ui

import (
	"context"
	"slices"
	"time"

	"fyne.io/fyne/v2"
	"github.com/shirou/gopsutil/v4/process"

	"github.com/switchboard-mcp/switchboard/pool"
)

// loop is the UI's one event loop, after tailscale's systray: it holds the
// latest snapshot, drains the pool's event stream, and redraws at most
// every MinRedraw however busy the pool is (events only mark the state
// dirty; a timer turns dirt into one fresh snapshot). When the pool is
// quiet a ticker redraws from the same snapshot, so ages tick. A lagging
// subscription (EventLagged, then the channel closes) subscribes again,
// and the history fills the gap in (gap.go). It exits when ctx ends.
func (u *UI) loop(ctx context.Context) {
	notes := newNotifier()
	snap, events := u.ctrl.Subscribe(ctx, eventBuffer)
	u.track.start(snap)         // and syncs the tracker with it
	fresh := false              // a snapshot taken since the tracker last synced
	var gaps []*gap             // gaps the history fills in, and has lately
	reads := make(chan gapRead) // history reads for gaps, from readGap
	if u.ctrl.HistoryOn() {
		// The retention before this run began (an upgrade, a restart):
		// the history has it.
		g := u.track.startGap(snap)
		gaps = append(gaps, g)
		u.readGap(ctx, g, reads)
	}
	draw := func() {
		now := time.Now()
		if fresh {
			u.track.sync(snap)
			fresh = false
		}
		u.track.reloaded(u.ctrl.ConfigReloads())
		u.track.setHistory(u.ctrl.HistoryOn())
		u.track.trim(now)
		open := u.dashOpen.Load()
		if open && (u.track.changed || u.wfLive.Load() == nil) {
			u.wfLive.Store(u.track.publish(now))
			if u.wfShown.Load() {
				u.pokePainter()
			}
		}
		f := u.frameFor(snap, now, open)
		u.setPIDs(snap)
		if ns := notes.check(snap, now, f.hang); len(ns) > 0 {
			fyne.Do(func() {
				for _, n := range ns {
					u.sendNotification(n)
				}
			})
		}
		u.post(f)
	}
	draw()
	last := time.Now()

	tick := time.NewTicker(u.opts.Tick)
	defer tick.Stop()
	var throttle <-chan time.Time // non-nil while a fresh redraw is due
	schedule := func() {
		if throttle == nil {
			throttle = time.After(max(u.opts.MinRedraw-time.Since(last), 0))
		}
	}
	lagged := false
	var lagAt time.Time // the EventLagged's: every event before it was read
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if ok {
				switch {
				case e.Kind == pool.EventLagged:
					lagged, lagAt = true, cmpOr(e.Time, time.Now())
					u.log.Debug("ui fell behind the pool's events; subscribing again")
				case len(gaps) > 0 && u.track.gapEvent(e, gaps):
					// A request of a gap: taken in, or counted already.
				default:
					u.track.event(e)
				}
				schedule()
				continue
			}
			if ctx.Err() != nil {
				return
			}
			if !lagged {
				// The pool closed: the app is shutting down. Do not spin.
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
			snap, events = u.ctrl.Subscribe(ctx, eventBuffer)
			u.track.releaseLive(gaps, snap)
			if lagged {
				g := u.track.openGap(lagAt, time.Now(), snap)
				gaps = append(gaps, g)
				u.readGap(ctx, g, reads)
			}
			lagged = false
			u.track.start(snap)
			draw()
			last = time.Now()
		case r := <-reads:
			if u.track.refill(r.g, gaps, r.w, r.err) {
				u.readGap(ctx, r.g, reads)
			}
			gaps = liveGaps(gaps, time.Now())
			schedule()
		case <-u.redraw:
			schedule()
		case <-u.wfReady:
			u.postFrame()
		case <-throttle:
			throttle = nil
			snap, fresh = u.ctrl.Snapshot(), true
			gaps = liveGaps(gaps, time.Now())
			u.track.releaseLive(gaps, snap)
			draw()
			last = time.Now()
		case <-tick.C:
			if throttle == nil && time.Since(last) >= u.opts.Tick/2 {
				draw()
				last = time.Now()
			}
		}
	}
}

// setPIDs tells the sampler which children to measure.
func (u *UI) setPIDs(s pool.Snapshot) {
	pids := make([]int, 0, len(s.Backends))
	for _, b := range s.Backends {
		if b.PID > 0 {
			pids = append(pids, b.PID)
		}
	}
	u.mu.Lock()
	u.pids = pids
	u.mu.Unlock()
}

// pollLeaks looks for leaked backends every LeakPoll, and at once when
// asked (the dashboard opened, a kill finished). It exits when ctx ends.
func (u *UI) pollLeaks(ctx context.Context) {
	t := time.NewTicker(u.opts.LeakPoll)
	defer t.Stop()
	for {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		leaks, err := u.ctrl.Leaks(lctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		u.mu.Lock()
		u.leaks, u.leaksErr = leaks, err
		u.mu.Unlock()
		u.requestRedraw()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-u.leaksNow:
		}
	}
}

// sampleLoop measures the children's memory and CPU every SamplePoll while
// the dashboard is open (a closed dashboard costs nothing). It exits when
// ctx ends.
func (u *UI) sampleLoop(ctx context.Context) {
	t := time.NewTicker(u.opts.SamplePoll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !u.dashOpen.Load() {
			continue
		}
		u.mu.Lock()
		pids := slices.Clone(u.pids)
		u.mu.Unlock()
		stats := u.opts.sample(pids, time.Now())
		u.mu.Lock()
		u.stats = stats
		u.mu.Unlock()
		u.requestRedraw()
	}
}

// procSampler measures processes with gopsutil: each child's own CPU
// and memory, and the memory of its whole process tree (an npx child runs
// npm and node under it; a server may fork workers). CPU is the share of
// one core used since the previous sample of the same process. It is
// owned by the sampler goroutine.
type procSampler struct {
	prev map[int]cpuSample
}

type cpuSample struct {
	cpu   float64 // user+system seconds
	at    time.Time
	start int64 // process create time, so a reused PID starts over
}

func newProcSampler() *procSampler { return &procSampler{prev: map[int]cpuSample{}} }

func (s *procSampler) sample(pids []int, now time.Time) map[int]procStat {
	out := make(map[int]procStat, len(pids))
	next := make(map[int]cpuSample, len(pids))
	var kids map[int32][]int32 // parent -> children, read once per sample
	if len(pids) > 0 {
		kids = childrenByParent()
	}
	for _, pid := range pids {
		p, err := process.NewProcess(int32(pid))
		if err != nil {
			continue
		}
		var st procStat
		if mem, err := p.MemoryInfo(); err == nil {
			st.RSS = mem.RSS
		}
		st.TreeRSS, st.TreeProcs = st.RSS, 1
		for _, d := range descendants(kids, int32(pid)) {
			if q, err := process.NewProcess(d); err == nil {
				if mem, err := q.MemoryInfo(); err == nil {
					st.TreeRSS += mem.RSS
					st.TreeProcs++
				}
			}
		}
		created, _ := p.CreateTime()
		if times, err := p.Times(); err == nil {
			cur := cpuSample{cpu: times.User + times.System, at: now, start: created}
			if prev, ok := s.prev[pid]; ok && prev.start == created {
				if dt := now.Sub(prev.at).Seconds(); dt > 0 {
					st.CPU = max((cur.cpu-prev.cpu)/dt*100, 0)
				}
			}
			next[pid] = cur
		}
		out[pid] = st
	}
	s.prev = next
	return out
}

// childrenByParent maps every process to its children, from one pass
// over the process table.
func childrenByParent() map[int32][]int32 {
	procs, err := process.Processes()
	if err != nil {
		return nil
	}
	out := make(map[int32][]int32, len(procs))
	for _, p := range procs {
		if ppid, err := p.Ppid(); err == nil && ppid != p.Pid {
			out[ppid] = append(out[ppid], p.Pid)
		}
	}
	return out
}

// descendants lists pid's children, their children and so on.
func descendants(kids map[int32][]int32, pid int32) []int32 {
	var out []int32
	seen := map[int32]bool{pid: true}
	queue := []int32{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range kids[p] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}
