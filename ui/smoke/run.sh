#!/usr/bin/env bash
# GUI smoke test: the real tray app in a real X server with a real system
# tray. `make test-gui` runs it under dbus-run-session and xvfb-run; run
# alone (bash ui/smoke/run.sh) it starts both itself.
#
# It builds bin/switchboard (no -race: the race detector flags fyne.io/systray
# as soon as a tray host reads the menu) and the fake MCP server, starts a
# StatusNotifierItem host, starts `switchboard --dashboard`, drives three
# sessions through `switchboard connect` (one of them hung in a long tool
# call), and then checks, keeping the evidence in $ARTIFACTS:
#   - one desktop notification (seen on D-Bus) for the hung request;
#   - the dashboard window appears; screenshots of its tabs are not blank
#     (dashboard.png is the In flight tab with the hung request highlighted,
#     then dashboard-sessions, -backends and -history.png);
#   - the tray icon registers, its menu (read over D-Bus) shows the live
#     counts, a click opens it (tray-menu.png, not blank);
#   - a second launch asks the first for its dashboard and exits 0;
#   - Quit in the tray menu ends the app with exit 0 and no child left.
#
# Environment: ARTIFACTS (default artifacts/), SWITCHBOARD_BIN (default
# bin/switchboard), GO (default go), SMOKE_BUILDFLAGS (extra go build flags),
# UPDATE_SCREENSHOTS=1 copies dashboard.png, dashboard-history.png and
# tray-menu.png to ui/testdata/screenshots/ for the README. Works with
# CI=true and without a terminal.
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
rm -f "$OUT"/*.log "$ARTIFACTS"/dashboard*.png "$ARTIFACTS"/tray-menu.png

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
cat >"$SWITCHBOARD_HOME/config.json" <<EOF
{
  "mcpServers": {
    "notes": {"command": "$TMP/fakemcp", "args": ["-stderr", "notes: ready on stdio"]},
    "browser": {"command": "$TMP/fakemcp", "args": ["-delay", "5ms", "-stderr", "browser: ready"]}
  },
  "hangThreshold": "3s"
}
EOF

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
waitfor "session 1's answers" 20 answered 1 3
waitfor "session 2's answer" 20 answered 2 2
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
# tab X: click the tab whose title starts X pixels into the window's tab bar.
tab() {
	shot "$TMP/before.png"
	xdotool mousemove --window "$WID" "$1" 22 click 1
	waitfor "the tab at x=$1 to show" 5 changed "$TMP/before.png"
}

shotwin "$ARTIFACTS/dashboard-sessions.png"
notblank "$ARTIFACTS/dashboard-sessions.png" 64
tab 215 # In flight
shotwin "$ARTIFACTS/dashboard.png"
notblank "$ARTIFACTS/dashboard.png" 64
tab 370 # Backends
cp "$TMP/after.png" "$TMP/before.png"
xdotool mousemove --window "$WID" 40 98 click 1 # select the first backend: its stderr shows below
waitfor "the backend's stderr" 5 changed "$TMP/before.png"
shotwin "$ARTIFACTS/dashboard-backends.png"
notblank "$ARTIFACTS/dashboard-backends.png" 64
tab 485 # History: the requests so far, from SQLite
cp "$TMP/after.png" "$TMP/before.png"
xdotool mousemove --window "$WID" 60 176 click 1 # the newest row, the hung call: its timeline shows below
waitfor "the request's timeline" 5 changed "$TMP/before.png"
shotwin "$ARTIFACTS/dashboard-history.png"
notblank "$ARTIFACTS/dashboard-history.png" 64
tab 215 # back to In flight for what follows

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

menu_windows() { xdotool search --onlyvisible --class gtk-sni-tray-standalone 2>/dev/null | sort; }
menu_windows >"$TMP/windows-before"
menu_open() { menu_windows | comm -13 "$TMP/windows-before" - | grep -q .; }
xdotool mousemove 16 $((SCREEN_H - 16)) click 1
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

# ---- Quit ------------------------------------------------------------------------------

# The clients go away (closing their input alone would be a half-close, which
# waits for the hung call's answer); the hung call is cancelled.
exec 7>&- 8>&- 9>&-
FDS_OPEN=0
# shellcheck disable=SC2086
kill $SHIMS 2>/dev/null || true
# fyne rebuilds the whole tray menu (new item ids) when its counts change; a
# click on a menu opened just before a rebuild is lost. Wait for the counts
# to settle first.
menu_settled() {
	menu_labels >"$TMP/menu.txt"
	grep -qx 'Sessions: 0' "$TMP/menu.txt" && grep -qx 'In flight: 0' "$TMP/menu.txt"
}
waitfor "the tray menu to show the sessions gone" 10 menu_settled
menu_windows >"$TMP/windows-before"
xdotool mousemove 16 $((SCREEN_H - 16)) click 1
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
grep -q 'shutting down' "$TMP/app.log" || fail "the app did not log its shutdown"

if [ "${UPDATE_SCREENSHOTS:-}" = 1 ]; then
	mkdir -p ui/testdata/screenshots
	cp "$ARTIFACTS/dashboard.png" "$ARTIFACTS/dashboard-history.png" "$ARTIFACTS/tray-menu.png" ui/testdata/screenshots/
	log "copied dashboard.png, dashboard-history.png and tray-menu.png to ui/testdata/screenshots/"
fi
