package ui

import (
	"sync"
	"sync/atomic"

	"fyne.io/systray"
)

// The tray menu changes with every count (sessions, in flight, children).
// fyne rebuilds a tray menu whole, with new item ids, so a click on a menu
// opened just before a rebuild is lost. liveMenu keeps the items and
// changes their labels and states in place; it rebuilds only when the
// menu's shape changes (a server added or removed), which is rare. fyne
// still starts and runs fyne.io/systray (desktop.App); liveMenu only adds
// and updates items, which fyne has no API for. An item's action never
// changes in place: a click on an item acts on what the item was built
// for (a reload that replaces one server by another rebuilds the menu).

// trayItem is one item of the system tray's menu.
type trayItem interface {
	SetTitle(string)
	Enable()
	Disable()
	Check()
	Uncheck()
	// clicks delivers the item's clicks; it is closed when the item is
	// removed (by a rebuild, ours or fyne's).
	clicks() <-chan struct{}
}

// trayHost makes menu items: fyne.io/systray's, or a test's.
type trayHost interface {
	reset()
	add(parent trayItem, label string, checkable, checked bool) trayItem
	separator(parent trayItem)
}

// systrayHost is fyne.io/systray, which fyne's desktop.App runs.
type systrayHost struct{}

type systrayItem struct{ *systray.MenuItem }

func (i systrayItem) clicks() <-chan struct{} { return i.ClickedCh }

func (systrayHost) reset() { systray.ResetMenu() }

func (systrayHost) add(parent trayItem, label string, checkable, checked bool) trayItem {
	var it *systray.MenuItem
	p, sub := parent.(systrayItem)
	switch {
	case sub && checkable:
		it = p.AddSubMenuItemCheckbox(label, "", checked)
	case sub:
		it = p.AddSubMenuItem(label, "")
	case checkable:
		it = systray.AddMenuItemCheckbox(label, "", checked)
	default:
		it = systray.AddMenuItem(label, "")
	}
	return systrayItem{it}
}

func (systrayHost) separator(parent trayItem) {
	if p, ok := parent.(systrayItem); ok {
		p.AddSeparator()
		return
	}
	systray.AddSeparator()
}

// menuNode is one built item and what it shows. Its action is fixed when
// it is built, before its click goroutine starts.
type menuNode struct {
	item     trayItem // nil for a separator
	shown    menuItem
	action   menuAction
	children []*menuNode
}

// liveMenu is the tray's menu, kept in place. apply and rebuild run on
// the UI goroutine only; the click goroutines read each node's action.
type liveMenu struct {
	host trayHost
	do   func(menuAction) // runs a clicked item's action; called from click goroutines
	wg   *sync.WaitGroup  // the UI's: click goroutines are waited for
	done <-chan struct{}  // the UI's context ending: click goroutines end

	nodes  []*menuNode
	model  []menuItem
	built  bool
	stop   chan struct{} // closed when these items go: click goroutines end
	broken atomic.Bool   // someone removed our items: rebuild at the next apply
	wake   func()        // asks for a frame, which applies (after broken)

	// Counters, for tests and logs.
	rebuilds, updates int
}

// apply shows model: in place when it has the shape of what is shown,
// else by building the menu again.
func (m *liveMenu) apply(model []menuItem) {
	if !m.built || m.broken.Load() || !sameShape(m.model, model) {
		m.rebuild(model)
		return
	}
	m.update(m.nodes, model)
	m.model = model
}

// rebuild makes the menu anew.
func (m *liveMenu) rebuild(model []menuItem) {
	if m.stop != nil {
		close(m.stop) // before the reset: our click goroutines end quietly
	}
	m.stop = make(chan struct{})
	m.broken.Store(false)
	m.host.reset()
	m.nodes = m.build(nil, model)
	m.model, m.built = model, true
	m.rebuilds++
}

func (m *liveMenu) build(parent trayItem, items []menuItem) []*menuNode {
	out := make([]*menuNode, 0, len(items))
	for _, it := range items {
		n := &menuNode{shown: it}
		if it.Separator {
			m.host.separator(parent)
			out = append(out, n)
			continue
		}
		n.item = m.host.add(parent, it.Label, it.Checkable, it.Checked)
		if it.Disabled {
			n.item.Disable()
		}
		n.action = it.Action
		if len(it.Children) > 0 {
			n.children = m.build(n.item, it.Children)
		} else {
			m.listen(n)
		}
		out = append(out, n)
	}
	return out
}

// listen runs n's click goroutine: until the items are rebuilt (stop) or
// the UI ends (done), or the item is removed under us (its channel
// closes: fyne rebuilt the menu), which marks the menu for a rebuild.
func (m *liveMenu) listen(n *menuNode) {
	clicks, stop, done := n.item.clicks(), m.stop, m.done
	m.wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-done:
				return
			case _, ok := <-clicks:
				if !ok {
					select {
					case <-stop:
					default:
						m.broken.Store(true)
						m.wake()
					}
					return
				}
				if n.action.Kind != actNone {
					m.do(n.action)
				}
			}
		}
	})
}

// update changes what differs, item by item.
func (m *liveMenu) update(nodes []*menuNode, items []menuItem) {
	for i, it := range items {
		n := nodes[i]
		if it.Separator {
			continue
		}
		old := n.shown
		if old.Label != it.Label {
			n.item.SetTitle(it.Label)
			m.updates++
		}
		if old.Disabled != it.Disabled {
			if it.Disabled {
				n.item.Disable()
			} else {
				n.item.Enable()
			}
			m.updates++
		}
		if old.Checked != it.Checked {
			if it.Checked {
				n.item.Check()
			} else {
				n.item.Uncheck()
			}
			m.updates++
		}
		n.shown = it
		if len(it.Children) > 0 {
			m.update(n.children, it.Children)
		}
	}
}

// close ends the click goroutines, as the UI ends.
func (m *liveMenu) close() {
	if m.stop != nil {
		close(m.stop)
		m.stop = nil
	}
}

// sameShape reports whether b can be shown by changing a's items in
// place: the same items in the same places, separators and checkboxes
// where they were, submenus of the same shape, and every item doing what
// it did, on the same server. Actions are compared because an item's
// click acts on what the item was built for: a reload that removes one
// server and adds another keeps the shape, and a click on the removed
// server's Restart must not restart the new one.
func sameShape(a, b []menuItem) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Separator != b[i].Separator || a[i].Checkable != b[i].Checkable || a[i].Action != b[i].Action ||
			(len(a[i].Children) > 0) != (len(b[i].Children) > 0) || !sameShape(a[i].Children, b[i].Children) {
			return false
		}
	}
	return true
}
