package ui

import (
	"fmt"
	"time"

	"fyne.io/fyne/v2"

	"github.com/switchboard-mcp/switchboard/pool"
)

// maxHangNotes is how many hung requests get a notification each in one
// check; beyond it they share one, so a stuck server does not bury the
// desktop in bubbles.
const maxHangNotes = 3

// notifier decides which desktop notifications a new snapshot deserves:
// one per request that passed the hang threshold, one per backend that
// entered the failed state. It remembers what it announced so nothing is
// said twice, and forgets requests and backends that are gone. It is owned
// by the event loop's goroutine.
type notifier struct {
	hung   map[uint64]bool
	failed map[string]bool
}

func newNotifier() *notifier {
	return &notifier{hung: map[uint64]bool{}, failed: map[string]bool{}}
}

// check returns the notifications for s at now.
func (n *notifier) check(s pool.Snapshot, now time.Time, hang time.Duration) []*fyne.Notification {
	var out []*fyne.Notification
	var fresh []pool.RequestInfo
	live := make(map[uint64]bool, len(n.hung))
	for _, r := range s.InFlight {
		if hang <= 0 || requestAge(r, s.TakenAt, now) < hang {
			continue
		}
		live[r.PoolID] = true
		if !n.hung[r.PoolID] {
			fresh = append(fresh, r)
		}
	}
	n.hung = live
	if len(fresh) > maxHangNotes {
		out = append(out, fyne.NewNotification(fmt.Sprintf("%d requests hung", len(fresh)),
			fmt.Sprintf("%d requests have waited longer than %s; open the dashboard's In flight tab.",
				len(fresh), formatAge(hang))))
	} else {
		for _, r := range fresh {
			out = append(out, fyne.NewNotification("Request hung on "+r.Server,
				fmt.Sprintf("%s (session %s, PID %s) has waited %s; written to the child: %s.",
					requestWhat(r.Method, r.Name), r.Session, pidText(r.PID), formatAge(requestAge(r, s.TakenAt, now)), yesNo(r.WrittenToChild))))
		}
	}

	failed := map[string]bool{}
	for _, b := range s.Backends {
		if b.State != pool.StateFailed {
			continue
		}
		key := b.Server + "\x00" + b.Session
		failed[key] = true
		if n.failed[key] {
			continue
		}
		msg := "It keeps crashing; requests fail fast until you restart it or change its config."
		if b.LastError != "" {
			msg = b.LastError + ". " + msg
		}
		out = append(out, fyne.NewNotification("Server "+b.Server+" failed", msg))
	}
	n.failed = failed
	return out
}
