package app

import (
	"context"
	"time"
)

// exitWhenIdleLoop calls stop once no session has been seen for the
// config's autostart.idleExit (read on each tick, so a hot reload applies).
// It is how a pool that a client started ends: it outlives that client,
// and serves the next one that comes within the idle time. It exits when
// ctx ends.
func (inst *Instance) exitWhenIdleLoop(ctx context.Context, stop context.CancelFunc) {
	lastSeen := time.Now()
	tick := time.NewTicker(idleTick(inst.idleExit()))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if len(inst.Pool.Snapshot().Sessions) > 0 {
				lastSeen = now
				continue
			}
			idle := inst.idleExit()
			if idle > 0 && now.Sub(lastSeen) >= idle {
				inst.log.Info("no session for the idle time: stopping the pool a client started",
					"idleExit", idle.String())
				stop()
				return
			}
		}
	}
}

func (inst *Instance) idleExit() time.Duration {
	inst.mu.Lock()
	defer inst.mu.Unlock()
	return inst.cfg.Autostart.IdleExitAfter()
}

// idleTick checks often enough to stop within a tenth of the idle time,
// and never more often than every 50 ms or less often than every 10 s.
func idleTick(idle time.Duration) time.Duration {
	return min(max(idle/10, 50*time.Millisecond), 10*time.Second)
}
