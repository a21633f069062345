package app

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/switchboard-mcp/switchboard/app/leaks"
	"github.com/switchboard-mcp/switchboard/store"
)

// Bounds of closeGoneChildren: the rows it reads at a time, the rows it
// looks at in all, and how long it may take. A history with more open
// rows of earlier runs gets the rest looked at by the next starts. Vars
// for tests.
var (
	goneChildrenPage    = 256
	goneChildrenMax     = 10_000
	goneChildrenTimeout = time.Minute
)

// closeGoneChildren closes, in st (this run's history), the rows of the
// children that earlier runs started and never saw exit whose process is
// provably gone (leaks.Gone: no process has the PID, or the one that has
// it started at another time). A run that crashed never sees its
// children exit: without this their rows stay open for ever, read by
// every leak scan and never pruned (the children cap keeps open rows:
// they may be leaks), one more set with each crash. A row whose process
// still runs stays open: a leak, which leak detection lists; so does a
// row whose process cannot be read, and one without a recorded start
// whose PID some process has. It looks at no more than goneChildrenMax
// rows, and says how many it closed.
func closeGoneChildren(ctx context.Context, st *store.Store) (closed int, err error) {
	var after int64
	for looked := 0; looked < goneChildrenMax; {
		page, err := st.OpenChildrenOfEarlierRuns(ctx, after, min(goneChildrenPage, goneChildrenMax-looked))
		if err != nil || len(page) == 0 {
			return closed, err
		}
		looked += len(page)
		after = page[len(page)-1].ID
		var gone []store.OpenChild
		for _, c := range page {
			if g, _ := leaks.Gone(ctx, c.PID, c.ProcessStart); g {
				gone = append(gone, c)
			}
		}
		if err := ctx.Err(); err != nil {
			return closed, err
		}
		n, err := st.CloseGoneChildren(ctx, gone, time.Now())
		closed += n
		if err != nil {
			return closed, err
		}
	}
	return closed, nil
}

// sweepGoneChildren is closeGoneChildren of a database that has just
// opened, off the start's path: the goroutine of h that close cancels
// and waits for before it closes st. It ends when it is done, after
// goneChildrenTimeout, or when close cancels it.
func (h *historyState) sweepGoneChildren(st *store.Store, log *slog.Logger) {
	h.sweeps.Go(func() {
		ctx, cancel := context.WithTimeout(h.sweepCtx, goneChildrenTimeout)
		defer cancel()
		n, err := closeGoneChildren(ctx, st)
		switch {
		case err != nil && !errors.Is(err, context.Canceled):
			log.Warn("history: closing the records of earlier runs' children that are gone", "closed", n, "err", err)
		case n > 0:
			log.Info("history: closed the records of earlier runs' children that ended unseen (a crash, or a stop that could not wait for them)", "closed", n)
		}
	})
}
