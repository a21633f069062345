#!/usr/bin/env bash
# GUI smoke test: the real tray app in a real X server with a real system
# tray. `make test-gui` runs it under dbus-run-session and xvfb-run; run
# alone (bash ui/smoke/run.sh) it starts both itself.
#
# It builds bin/switchboard (no -race: the race detector flags fyne.io/systray
# as soon as a tray host reads the menu) and the fake MCP server, starts a
# StatusNotifierItem host, starts `switchboard --dashboard`, drives three
# sessions through `switchboard connect` (calls that end ok, with an error,
# one that crashes its child, one hung in a long tool call) and reloads the
# config, and then checks, keeping the evidence in $ARTIFACTS:
#   - one desktop notification (seen on D-Bus) for the hung request;
#   - the dashboard window appears, its WM_CLASS the desktop entry's
#     StartupWMClass; screenshots of its views are not blank:
#     overview.png (a card per server), waterfall.png (the live waterfall,
#     opened by a click on the hung tray icon at the hung request, with the
#     child's crash and restart and the config reload as markers),
#     dashboard.png (In flight, the hung request highlighted), and
#     dashboard-sessions, -backends and -history.png;
#   - the tray icon registers, its menu (read over D-Bus) shows the live
#     counts, the other button opens it (tray-menu.png, not blank);
#   - a second launch asks the first for its dashboard and exits 0;
#   - Restart Switchboard in the tray menu execs the app in place, same
#     PID, its children carried over (the same PIDs);
#   - the app crashes (SIGKILL) with the call in flight; started again, its
#     waterfall shows the two minutes before the crash from history.db,
#     the call abandoned (waterfall-history.png);
#   - Quit in the tray menu ends the app with exit 0 and no child left, and
#     the dashboard's view (the waterfall) is kept in dashboard.json.
#
# Environment: ARTIFACTS (default artifacts/), SWITCHBOARD_BIN (default
# bin/switchboard), GO (default go), SMOKE_BUILDFLAGS (extra go build flags),
# UPDATE_SCREENSHOTS=1 copies the README's screenshots (overview.png,
# waterfall.png, waterfall-history.png, tray-menu.png) to
# ui/testdata/screenshots/. Works with CI=true and without a terminal.
set -euo pipefail

cd "$(dirname "$0")/../.."
ROOT=$PWD

# Without our own X server and session bus, start them and run again inside.
if [ -z "${SMOKE_INNER:-}" ] && { [ -z "${DISPLAY:-}" ] || [ -z "${DBUS_SESSION_BUS_ADDRESS:-}" ]; }; then
	export SMOKE_INNER=1
	exec dbus-run-session -- xvfb-run -a -s '-screen 0 1024x768x24' bash "$0" "$@"
fi

ARTIFACTS=${ARTIFACTS:-$ROOT/artifacts}
BIN=${SWITCHBOARD_BIN:-$ROOT/bin/switchboard}
GO=${GO:-go}
OUT=$ARTIFACTS/smoke
mkdir -p "$ARTIFACTS" "$OUT"
rm -f "$OUT"/*.log "$ARTIFACTS"/dashboard*.png "$ARTIFACTS"/tray-menu.png "$ARTIFACTS"/overview.png "$ARTIFACTS"/waterfall*.png

# A short path: Unix socket paths are limited to about 100 bytes.
TMP=$(mktemp -d /tmp/sbsmoke.XXXXXX)
FDS_OPEN=0

log() { printf 'smoke: %s\n' "$*" >&2; }

fail() {
	log "FAIL: $*"
	for f in "$TMP"/*.log "$TMP"/*.out; do
		[ -f "$f" ] || continue
		printf -- '--- %s (last 20 lines)\n' "$(basename "$f")" >&2
		tail -n 20 "$f" >&2
	done
	exit 1
}

cleanup() {
	local rc=$?
	if [ "$FDS_OPEN" = 1 ]; then
		exec 7>&- 8>&- 9>&- || true
	fi
	# Only the jobs this script started and that still run.
	local jobs
	jobs=$(jobs -p)
	if [ -n "$jobs" ]; then
		# shellcheck disable=SC2086 # a list of PIDs
		kill $jobs 2>/dev/null || true
		wait 2>/dev/null || true
	fi
	cp "$TMP"/*.log "$TMP"/*.out "$OUT"/ 2>/dev/null || true
	rm -rf "$TMP"
	if [ "$rc" = 0 ]; then log "PASS (artifacts in $ARTIFACTS)"; fi
	exit "$rc"
}
trap cleanup EXIT

# waitfor DESC SECONDS CMD...: poll CMD until it succeeds, or fail.
waitfor() {
	local desc=$1 secs=$2
	shift 2
	local deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			fail "timed out after ${secs}s waiting for $desc"
		fi
		sleep 0.1
	done
}

# notblank PNG MIN: the picture has at least MIN distinct colours.
notblank() {
	local n
	n=$(identify -format '%k' "$1")
	log "$(basename "$1"): $n colours"
	[ "$n" -ge "$2" ] || fail "$1 looks blank ($n colours, want >= $2)"
}

shot() { import -window root "$1"; }
shotwin() { import -window "$WID" "$1"; }

# ---- build ------------------------------------------------------------------

log "building $BIN and the fake MCP server"
mkdir -p "$(dirname "$BIN")"
# shellcheck disable=SC2086 # SMOKE_BUILDFLAGS is a list of flags
GOFLAGS='' CGO_ENABLED=1 "$GO" build -tags sqlite_omit_load_extension ${SMOKE_BUILDFLAGS:-} -o "$BIN" ./cmd/switchboard
GOFLAGS='' CGO_ENABLED=0 "$GO" build -o "$TMP/fakemcp" ./pool/mcptest/fakemcp

# ---- a private desktop ------------------------------------------------------------

export XDG_RUNTIME_DIR=$TMP/xdg
mkdir -p "$XDG_RUNTIME_DIR" && chmod 700 "$XDG_RUNTIME_DIR"
export HOME=$TMP/userhome # fyne's preferences and caches stay in the temp dir
mkdir -p "$HOME"
# Xvfb resets when its last client disconnects, and a client connecting
# during the reset fails (GLFW: "Failed to detect any supported platform").
# One client stays connected for the whole run.
xprop -root -spy >/dev/null 2>&1 &
KEEPER=$!
keeper_connected() { find "/proc/$KEEPER/fd" -lname 'socket:*' | grep -q .; }
waitfor "an X client to hold the server" 10 keeper_connected
read -r SCREEN_W SCREEN_H < <(xdpyinfo | awk '/dimensions:/ {split($2, d, "x"); print d[1], d[2]}')
log "screen ${SCREEN_W}x${SCREEN_H}, display $DISPLAY"

# ---- without a tray host the app still runs, and says so once -------------------------

export SWITCHBOARD_HOME=$TMP/bare
mkdir -p "$SWITCHBOARD_HOME"
printf '{"mcpServers": {"notes": {"command": "%s"}}}\n' "$TMP/fakemcp" >"$SWITCHBOARD_HOME/config.json"
log "starting switchboard with no tray host"
"$BIN" >"$TMP/bare.log" 2>&1 &
BARE=$!
bare_window() { xdotool search --onlyvisible --name '^Switchboard$'; }
waitfor "the dashboard window (the only way in without a tray)" 20 bare_window
waitfor "the no-tray-host log line" 10 grep -q 'no system tray host' "$TMP/bare.log"
kill -TERM "$BARE"
set +e
wait "$BARE"
rc=$?
set -e
[ "$rc" = 0 ] || fail "switchboard without a tray host exited $rc on SIGTERM, want 0"
n=$(grep -c 'no system tray host' "$TMP/bare.log" || true)
[ "$n" = 1 ] || fail "said $n times that there is no tray host, want once"
left=$(pgrep -f "^$TMP/fakemcp" || true)
[ -z "$left" ] || fail "children left after SIGTERM: $left"

# ---- a tray host on the session bus ---------------------------------------------------

watcher_prop() {
	dbus-send --session --print-reply --dest=org.kde.StatusNotifierWatcher /StatusNotifierWatcher \
		org.freedesktop.DBus.Properties.Get string:org.kde.StatusNotifierWatcher "string:$1"
}
host_registered() { watcher_prop IsStatusNotifierHostRegistered | grep -q 'boolean true'; }

status-notifier-watcher >"$TMP/watcher.log" 2>&1 &
waitfor "the StatusNotifierWatcher" 10 watcher_prop IsStatusNotifierHostRegistered
gtk-sni-tray-standalone --bottom --size 32 >"$TMP/tray-host.log" 2>&1 &
waitfor "the tray host to register" 10 host_registered

# ---- the app ----------------------------------------------------------------------

export SWITCHBOARD_HOME=$TMP/home
mkdir -p "$SWITCHBOARD_HOME"
# The clients must not start a pool of their own when this one crashes
# (below): the next one is started by hand, with its dashboard.
config() { # EXTRA: more servers
	cat >"$SWITCHBOARD_HOME/config.json" <<EOF
{
  "mcpServers": {
    "notes": {"command": "$TMP/fakemcp", "args": ["-stderr", "notes: ready on stdio"]},
    "browser": {"command": "$TMP/fakemcp", "args": ["-delay", "5ms", "-stderr", "browser: ready"]}$1
  },
  "history": {"capturePayloads": true},
  "autostart": {"fromClients": false},
  "hangThreshold": "3s"
}
EOF
}
config ""

# Desktop notifications are D-Bus calls to org.freedesktop.Notifications;
# a monitor sees them even with no notification daemon to show them.
dbus-monitor --session "type='method_call',interface='org.freedesktop.Notifications',member='Notify'" >"$TMP/notify.out" 2>&1 &

log "starting switchboard --dashboard"
"$BIN" --dashboard >"$TMP/app.log" 2>&1 &
APP=$!
waitfor "the control socket" 20 "$BIN" status --json
dashboard_window() { xdotool search --onlyvisible --name '^Switchboard$'; }
waitfor "the dashboard window" 20 dashboard_window
WID=$(dashboard_window | head -n 1)
log "dashboard window $WID"
# The launcher ties this window to itself on X11 by its StartupWMClass,
# the class in the window's WM_CLASS (GLFW takes it from the title).
wm_class=$(xprop -id "$WID" WM_CLASS | sed -n 's/^WM_CLASS(STRING) = ".*", "\(.*\)"$/\1/p')
startup_class=$(sed -n 's/^StartupWMClass=//p' "$ROOT/packaging/linux/switchboard.desktop")
[ -n "$wm_class" ] && [ "$wm_class" = "$startup_class" ] ||
	fail "the dashboard window's WM_CLASS class is \"$wm_class\", the desktop entry's StartupWMClass \"$startup_class\""

# ---- three sessions, one hung -------------------------------------------------------

# Each session is a `switchboard connect` whose stdin is a FIFO this script
# holds open, like a client that stays connected.
SHIMS=""
session() { # N SERVER
	mkfifo "$TMP/s$1.in"
	"$BIN" connect "$2" <"$TMP/s$1.in" >"$TMP/s$1.out" 2>"$TMP/s$1.log" &
	SHIMS="$SHIMS $!"
	}
hello() { # NAME VERSION
	printf '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"%s","version":"%s"}}}\n' "$1" "$2"
	printf '{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
}
call() { # ID TOOL ARGS
	printf '{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"%s","arguments":%s}}\n' "$1" "$2" "$3"
}

session 1 notes
session 2 notes
session 3 browser
exec 7>"$TMP/s1.in" 8>"$TMP/s2.in" 9>"$TMP/s3.in"
FDS_OPEN=1
hello claude-code 2.1.3 >&7
hello cursor 1.7.0 >&8
hello vscode 1.105.0 >&9
call 2 echo '{"text":"hello"}' >&7
call 2 echo '{"text":"hello"}' >&8
call 3 echo '{"text":"again"}' >&7
call 2 sleep '{"ms":600000}' >&9 # the hung call

answered() { grep "\"id\":$2[,}]" "$TMP/s$1.out" | grep -q '"result"'; }
replied() { grep -q "\"id\":$2[,}]" "$TMP/s$1.out"; }
waitfor "session 1's answers" 20 answered 1 3
waitfor "session 2's answer" 20 answered 2 2

# Traffic for the waterfall: calls of varying length on both notes
# sessions, two at a time.
traffic() { # FIRST LAST
	local id
	for id in $(seq "$1" "$2"); do
		call "$id" sleep_echo "{\"ms\":$(((id * 37) % 400 + 20)),\"text\":\"t$id\"}" >&7
		call "$id" sleep_echo "{\"ms\":$(((id * 53) % 250 + 10)),\"text\":\"u$id\"}" >&8
		if [ $((id % 2)) = 1 ]; then
			waitfor "call $id of session 1" 10 replied 1 "$id"
			waitfor "call $id of session 2" 10 replied 2 "$id"
		fi
	done
}
# The bursts are paced a second or two apart (pacing the load, not
# waiting for anything), so the waterfall shows them apart.
traffic 10 25
sleep 1.5
# The notes child crashes under a call (its stderr says why); the next
# calls start it again.
call 41 crash '{"code":7}' >&8
waitfor "the crash call's answer" 10 replied 2 41
traffic 50 57
sleep 1.5
# A config reload: a server added.
config ', "extra": {"command": "'"$TMP"'/fakemcp"}'
waitfor "the reload" 10 grep -q 'config reloaded' "$TMP/app.log"
traffic 60 69
call 40 no_such_tool '{}' >&8 # the child answers with an error
waitfor "the error" 10 replied 2 40
sleep 1.5
traffic 70 79
status() { "$BIN" status --json >"$TMP/status.json"; }
count() { grep -c "\"$1\"" "$TMP/status.json" || true; }
three_sessions_one_hung() {
	status || return 1
	[ "$(count clientName)" = 3 ] || return 1
	[ "$(count poolId)" = 1 ] || return 1
	local age
	age=$(grep -o '"ageMs": [0-9]*' "$TMP/status.json" | grep -o '[0-9]*$')
	# Past the 3 s threshold, plus a UI tick.
	[ "${age:-0}" -ge 4500 ]
}
waitfor "3 sessions with 1 request hung past the threshold" 30 three_sessions_one_hung
cp "$TMP/status.json" "$OUT/status.json"
waitfor "a desktop notification for the hung request" 10 grep -q 'Request hung on browser' "$TMP/notify.out"
n=$(grep -c 'Request hung on browser' "$TMP/notify.out" || true)
[ "$n" = 1 ] || fail "notified $n times about the hung request, want once"
log "notified once: $(grep -A1 'Request hung on browser' "$TMP/notify.out" | tail -n 1 | sed 's/^ *string //')"
CHILDREN=$(pgrep -f "^$TMP/fakemcp" | tr '\n' ' ' || true)
log "children: $CHILDREN"
[ "$(echo "$CHILDREN" | wc -w)" = 2 ] || fail "want 2 children of the pool, have: $CHILDREN"

# ---- dashboard screenshots ------------------------------------------------------------

# changed FILE: the screen differs from FILE (a click took effect).
changed() {
	shot "$TMP/after.png"
	[ "$(compare -metric AE "$1" "$TMP/after.png" null: 2>&1 || true)" != 0 ]
}
# view N: Ctrl+N picks the N-th view (1 Overview, 2 Waterfall, 3 Sessions,
# 4 In flight, 5 Backends, 6 History, 7 Leaks).
view() {
	shot "$TMP/before.png"
	xdotool windowfocus --sync "$WID" 2>/dev/null || true
	xdotool key --clearmodifiers "ctrl+$1"
	waitfor "view $1 to show" 5 changed "$TMP/before.png"
}

# A fresh home opens on the overview.
shotwin "$ARTIFACTS/overview.png"
notblank "$ARTIFACTS/overview.png" 64
view 3 # Sessions
shotwin "$ARTIFACTS/dashboard-sessions.png"
notblank "$ARTIFACTS/dashboard-sessions.png" 64
view 4 # In flight
shotwin "$ARTIFACTS/dashboard.png"
notblank "$ARTIFACTS/dashboard.png" 64
view 5 # Backends
cp "$TMP/after.png" "$TMP/before.png"
xdotool mousemove --window "$WID" 200 98 click 1 # select the first backend (its name, right of its buttons): its stderr shows below
waitfor "the backend's stderr" 5 changed "$TMP/before.png"
shotwin "$ARTIFACTS/dashboard-backends.png"
notblank "$ARTIFACTS/dashboard-backends.png" 64
view 6 # History: the requests so far, from SQLite
cp "$TMP/after.png" "$TMP/before.png"
xdotool mousemove --window "$WID" 60 176 click 1 # the newest row, the hung call: its timeline shows below
waitfor "the request's timeline" 5 changed "$TMP/before.png"
shotwin "$ARTIFACTS/dashboard-history.png"
notblank "$ARTIFACTS/dashboard-history.png" 64
view 1 # back to the overview for what follows

# ---- the tray ---------------------------------------------------------------------------

items() { watcher_prop RegisteredStatusNotifierItems | grep -o 'string "[^"]*"' | cut -d'"' -f2; }
waitfor "the tray icon to register" 10 items
ITEM=$(items | head -n 1)
BUS=${ITEM%%/*}
log "tray item $ITEM"
menu_labels() {
	dbus-send --session --print-reply --dest="$BUS" /StatusNotifierItem/menu \
		com.canonical.dbusmenu.GetLayout int32:0 int32:-1 array:string:label |
		tr -d '\n' | grep -o 'string "label" *variant *string "[^"]*"' | sed 's/.*string "//; s/"$//'
}
menu_has_counts() {
	menu_labels >"$TMP/menu.txt"
	grep -qx 'Sessions: 3' "$TMP/menu.txt" && grep -qx 'In flight: 1 (1 hung)' "$TMP/menu.txt" &&
		grep -qx 'Children: 2' "$TMP/menu.txt" && grep -q '^Leaked backends: ' "$TMP/menu.txt" &&
		grep -qx 'Quit' "$TMP/menu.txt"
}
waitfor "the tray menu to show the live counts" 10 menu_has_counts
cp "$TMP/menu.txt" "$OUT/tray-menu.txt"

# The icon is drawn in the tray bar at the bottom left.
shot "$TMP/before.png"
convert "$TMP/before.png" -crop "32x32+0+$((SCREEN_H - 32))" +repage "$ARTIFACTS/tray-icon.png"
notblank "$ARTIFACTS/tray-icon.png" 8

# A click on the hung icon opens the waterfall at the hung request: from
# just before it started to now, following now.
xdotool mousemove 16 $((SCREEN_H - 16)) click 1
waitfor "the click on the icon to show the waterfall" 5 changed "$TMP/before.png"
shotwin "$ARTIFACTS/waterfall.png"
notblank "$ARTIFACTS/waterfall.png" 64

# The menu is on the other button.
menu_windows() { xdotool search --onlyvisible --class gtk-sni-tray-standalone 2>/dev/null | sort; }
menu_windows >"$TMP/windows-before"
menu_open() { menu_windows | comm -13 "$TMP/windows-before" - | grep -q .; }
shot "$TMP/before.png"
xdotool mousemove 16 $((SCREEN_H - 16)) click 3
waitfor "the tray menu to open" 10 menu_open
waitfor "the tray menu to be drawn" 5 changed "$TMP/before.png"
shot "$ARTIFACTS/tray-menu.png"
notblank "$ARTIFACTS/tray-menu.png" 64
xdotool key Escape

# ---- one instance per SWITCHBOARD_HOME ---------------------------------------------------

log "second launch"
set +e
timeout 20 "$BIN" >"$TMP/second.log" 2>&1
rc=$?
set -e
[ "$rc" = 0 ] || fail "a second launch exited $rc, want 0 (it should ask the first for its dashboard)"
grep -q 'already running' "$TMP/second.log" || fail "the second launch did not say the first one is running"
kill -0 "$APP" || fail "the first instance died when the second launched"
n=$(grep -c 'Request hung on browser' "$TMP/notify.out" || true)
[ "$n" = 1 ] || fail "by the end, notified $n times about the one hung request, want once"

# ---- after the fact: the app crashes with the call in flight ----------------------

log "crash: SIGKILL with the hung call in flight"
kill -KILL "$APP"
wait "$APP" 2>/dev/null || true
gone_children() { ! pgrep -f "^$TMP/fakemcp" >/dev/null; }
waitfor "the children to die with the app" 10 gone_children
"$BIN" --dashboard >"$TMP/app2.log" 2>&1 &
APP=$!
waitfor "the control socket of the next run" 20 "$BIN" status --json
waitfor "the dashboard window of the next run" 20 dashboard_window
WID=$(dashboard_window | head -n 1)
view 2 # the waterfall
shot "$TMP/before.png"
xdotool key c # the two minutes before the last crash, from history.db
waitfor "the two minutes before the crash" 10 changed "$TMP/before.png"
# The wheel zooms in where the crash is: near the right of the plot.
shot "$TMP/before.png"
xdotool mousemove --window "$WID" 905 240
for _ in 1 2 3 4 5 6 7; do xdotool click 4; done
waitfor "the zoom on the crash" 5 changed "$TMP/before.png"
# The pointer on the abandoned call's bar, which runs up to the crash:
# its hover tip opens. (Where the pointer rested as the plot zoomed
# depends on the traffic of the run.)
shot "$TMP/before.png"
xdotool mousemove --window "$WID" 880 183
waitfor "the abandoned call's hover tip" 5 changed "$TMP/before.png"
# The pointer leaves the bars (their hover tip closes).
shot "$TMP/before.png"
xdotool mousemove --window "$WID" 120 400
waitfor "the hover tip to close" 5 changed "$TMP/before.png"
shotwin "$ARTIFACTS/waterfall-history.png"
notblank "$ARTIFACTS/waterfall-history.png" 64
"$BIN" hangs --json >"$OUT/hangs.json" 2>/dev/null || true
grep -q '"abandoned"' "$OUT/hangs.json" || fail "the crashed run's call is not abandoned in history: $(cat "$OUT/hangs.json")"

# ---- Restart Switchboard, from the tray menu ---------------------------------------------

# The item above Quit: the app execs its own binary in place (same PID),
# carrying its children over; the next program says what it took over.
log "restart from the tray"
backend_pids() { "$BIN" status --json | sed -n '/"backends"/,/^  \]/p' | grep -o '"pid": [0-9]*' | sort; }
backend_pids >"$TMP/pids-before"
[ -s "$TMP/pids-before" ] || fail "no child running before the restart"
waitfor "the tray icon" 10 items
menu_windows >"$TMP/windows-before"
xdotool mousemove 16 $((SCREEN_H - 16)) click 3
waitfor "the tray menu to open" 10 menu_open
xdotool key Up Up Return # the item above the last: Restart Switchboard
restarted() { "$BIN" status --json 2>/dev/null | grep -q '"carriedChildren": \[$'; }
waitfor "the restarted program to say what it carried over" 30 restarted
kill -0 "$APP" || fail "the app's process is gone after the restart (it should exec in place)"
backend_pids >"$TMP/pids-after"
cmp -s "$TMP/pids-before" "$TMP/pids-after" ||
	fail "the children changed over the restart: $(tr '\n' ' ' <"$TMP/pids-before") then $(tr '\n' ' ' <"$TMP/pids-after")"
grep -q 'upgraded in place' "$TMP/app2.log" || fail "the restarted program did not log the upgrade"

# ---- Quit ------------------------------------------------------------------------------

# The clients go away.
exec 7>&- 8>&- 9>&-
FDS_OPEN=0
# shellcheck disable=SC2086
kill $SHIMS 2>/dev/null || true
waitfor "the next run's tray icon" 10 items
ITEM=$(items | tail -n 1)
BUS=${ITEM%%/*}
menu_settled() {
	menu_labels >"$TMP/menu.txt"
	grep -qx 'Sessions: 0' "$TMP/menu.txt" && grep -qx 'In flight: 0' "$TMP/menu.txt"
}
waitfor "the tray menu to show no session" 10 menu_settled
menu_windows >"$TMP/windows-before"
xdotool mousemove 16 $((SCREEN_H - 16)) click 3
waitfor "the tray menu to open again" 10 menu_open
xdotool key Up Return # the last item: Quit
gone() { ! kill -0 "$APP" 2>/dev/null; }
waitfor "the app to quit" 30 gone
set +e
wait "$APP"
rc=$?
set -e
[ "$rc" = 0 ] || fail "the app exited $rc after Quit, want 0"
left=$(pgrep -f "^$TMP/fakemcp" || true)
[ -z "$left" ] || fail "children left after Quit: $left"
grep -q 'shutting down' "$TMP/app2.log" || fail "the app did not log its shutdown"
! grep -q 'panic:' "$TMP/app2.log" || fail "the app panicked at Quit"
grep -q '"tab": "Waterfall"' "$SWITCHBOARD_HOME/dashboard.json" ||
	fail "the dashboard's view was not kept at Quit: $(cat "$SWITCHBOARD_HOME/dashboard.json" 2>&1)"

if [ "${UPDATE_SCREENSHOTS:-}" = 1 ]; then
	mkdir -p ui/testdata/screenshots
	cp "$ARTIFACTS/overview.png" "$ARTIFACTS/waterfall.png" "$ARTIFACTS/waterfall-history.png" \
		"$ARTIFACTS/tray-menu.png" ui/testdata/screenshots/
	log "copied overview, waterfall, waterfall-history and tray-menu.png to ui/testdata/screenshots/"
fi
