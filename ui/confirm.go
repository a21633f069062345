package ui

import (
	"context"
	"fmt"
	"slices"
	"time"

	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/widget"

	"github.com/switchboard-mcp/switchboard/pool"
)

// The actions that end something ask first. The question names what the
// action acts on (a PID, a request) and what happens, and a Yes acts on
// that, by identity: rows move under the pointer as requests end and
// ages widen their text, and the row the user meant may not be the one
// under the button by the time it is clicked.

// confirm asks msg on the dashboard; verb is the button that acts, No the
// one that does nothing. UI goroutine.
func (d *dashboard) confirm(title, msg, verb string, do func()) {
	c := dialog.NewConfirm(title, msg, func(ok bool) {
		if ok {
			do()
		}
	}, d.win)
	c.SetConfirmText(verb)
	c.SetConfirmImportance(widget.DangerImportance)
	c.SetDismissText("No")
	c.Show()
}

// inFlightFate says what a child's end does to its requests in flight:
// the pool's at-most-once rule.
func inFlightFate(n int) string {
	if n == 0 {
		return "Nothing is in flight on it."
	}
	return plural(n, "request") + " in flight: each is retried where that is safe, else answered with an error."
}

// confirmCancel asks before cancelling the request of an In flight row.
func (d *dashboard) confirmCancel(r row) {
	msg := fmt.Sprintf("Cancel %s?\n\nIt has waited %s. Its client gets an error saying it was cancelled in Switchboard, and the child notifications/cancelled.",
		r.what, r.age)
	d.confirm("Cancel request", msg, "Cancel request", func() {
		d.u.act(fmt.Sprintf("cancel request %d", r.poolID), func(context.Context) error { return d.u.ctrl.Cancel(r.poolID) })
	})
}

// confirmKillChild asks before killing the child of a Backends row.
func (d *dashboard) confirmKillChild(r row) {
	msg := fmt.Sprintf("Kill %s?\n\nIt is killed at once, as in a crash (it counts toward the restart limit), and the pool starts a new child. %s",
		r.what, inFlightFate(r.inflight))
	d.confirm("Kill child", msg, "Kill", func() {
		d.u.act("kill "+r.what, func(context.Context) error { return d.u.ctrl.KillChild(r.pid) })
	})
}

// confirmRestartChild asks before restarting the child slot of a Backends
// row. A slot with a process restarts only while that process runs it: one
// that ended meanwhile (a crash, and the next child started) was not what
// the user confirmed.
func (d *dashboard) confirmRestartChild(r row) {
	var msg string
	switch {
	case r.pid > 0:
		msg = fmt.Sprintf("Restart %s?\n\nIt is stopped gracefully and a new child started; the server's other children run on. %s",
			r.what, inFlightFate(r.inflight))
	case r.state == pool.StateFailed:
		msg = fmt.Sprintf("Start %s again?\n\nIt failed: %s\nIt starts again with a fresh restart budget.", r.what, r.cells[len(r.cells)-1])
	default:
		msg = fmt.Sprintf("Start %s now?\n\nIt is waiting to start again after its child ended; it starts at once.", r.what)
	}
	u := d.u
	d.confirm("Restart child", msg, rowRestart, func() {
		u.act("restart "+r.what, func(context.Context) error {
			if r.pid > 0 && !runsPID(u.ctrl.Snapshot(), r.backend, r.pid) {
				return fmt.Errorf("PID %d has ended since: nothing restarted", r.pid)
			}
			return u.ctrl.RestartBackend(r.backend)
		})
	})
}

// runsPID says whether child slot id runs process pid in s.
func runsPID(s pool.Snapshot, id uint64, pid int) bool {
	return slices.ContainsFunc(s.Backends, func(b pool.BackendInfo) bool { return b.ID == id && b.PID == pid })
}

// confirmKillLeak asks before killing the leaked process of a Leaks row.
func (d *dashboard) confirmKillLeak(r row) {
	d.confirm("Kill leaked backend", fmt.Sprintf("Kill %s?\n\n%s", r.what, r.detail), "Kill", func() {
		d.u.act("kill "+r.what, func(ctx context.Context) error {
			defer d.u.pollLeaksNow()
			return d.u.ctrl.KillLeak(ctx, r.pid)
		})
	})
}

// confirmRestartServer asks before restarting every child of a server:
// an overview card's Restart (verb is its text) and the tray's.
func (d *dashboard) confirmRestartServer(c serverCard, verb string) {
	var msg string
	switch {
	case c.State == pool.StateFailed:
		msg = fmt.Sprintf("Restart %s?\n\nIt failed: %s\nIt starts again with a fresh restart budget.", c.Name, c.Note)
	case c.Children == 0:
		msg = fmt.Sprintf("Restart %s?\n\nNo child of it runs now: the next request starts one.", c.Name)
	default:
		msg = fmt.Sprintf("Restart %s?\n\n%s stopped gracefully and started again. %s", c.Name,
			plural(c.Children, "child is", "children are"), inFlightFate(c.InFlight))
	}
	d.confirm("Restart server", msg, verb, func() {
		d.u.act("restart "+c.Name, func(context.Context) error { return d.u.ctrl.Restart(c.Name) })
	})
}

// confirmStop asks before the tray's Stop of a server.
func (d *dashboard) confirmStop(c serverCard) {
	fate := "Nothing is in flight on it."
	switch {
	case c.InFlight == 1:
		fate = "Its request in flight gets an error."
	case c.InFlight > 1:
		fate = fmt.Sprintf("Its %d requests in flight get an error.", c.InFlight)
	}
	msg := fmt.Sprintf("Stop %s?\n\n%s stopped now. %s The next request starts a child again.", c.Name,
		plural(c.Children, "child is", "children are"), fate)
	d.confirm("Stop server", msg, "Stop", func() {
		d.u.act("stop "+c.Name, func(context.Context) error { return d.u.ctrl.Stop(c.Name) })
	})
}

// serverCardOf is server's card in s, for the tray's questions, which
// need no figures; a server s does not have gets a bare card.
func serverCardOf(s pool.Snapshot, server string, now time.Time, hang time.Duration) serverCard {
	ov := overviewFor(s, now, hang, func(string) serverFigures { return serverFigures{} }, nil)
	for _, c := range ov.Cards {
		if c.Name == server {
			return c
		}
	}
	return serverCard{Name: server}
}
