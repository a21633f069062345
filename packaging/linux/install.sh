#!/usr/bin/env bash
# Installs Switchboard for one user (or system-wide with PREFIX=/usr/local)
# from its per-user tree: the unpacked switchboard_VERSION_linux_amd64.tar.gz,
# where this script sits next to bin/ and share/, or, in a checkout, the tree
# `make package-linux` stages in dist/.
#
#   PREFIX/bin/switchboard, PREFIX/bin/switchboard-connect
#   PREFIX/share/applications/io.github.switchboard_mcp.switchboard.desktop
#   PREFIX/share/icons/hicolor/NxN/apps/io.github.switchboard_mcp.switchboard.png
#   PREFIX/share/switchboard/ (the autostart entry template, the user unit)
#   PREFIX/share/doc/switchboard/copyright
#   and with --service the systemd user unit switchboard.service
#   (~/.config/systemd/user for a PREFIX under $HOME, else PREFIX/lib/systemd/user)
#
# Usage: install.sh [--service] [--uninstall]
#   PREFIX   where to install (default: ~/.local)
#   DESTDIR  staging root for packagers (paths inside the files omit it)
#   TREE     the tree to install from (default: see above)
#   SWITCHBOARD_STOP_WAIT  seconds --uninstall waits for the pool to stop (15)
#
# --uninstall removes the files and the login item, then stops your running
# pool (that of SWITCHBOARD_HOME, else the default one) if it runs this
# install's binary; it exits 1 if the pool did not stop, naming its PID.
#
# `make install` builds the tree and runs this.
set -euo pipefail

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; }

service=0 uninstall=0
for arg in "$@"; do
  case "$arg" in
    --service) service=1 ;;
    --uninstall) uninstall=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install: unknown argument $arg" >&2; usage >&2; exit 2 ;;
  esac
done

here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${TREE:-}" ]; then
  if [ -x "$here/bin/switchboard" ]; then
    TREE=$here # the unpacked tarball
  else
    root=$(cd "$here/../.." && pwd)
    # The newest version's (0.10.0 after 0.9.0: sorted as versions).
    TREE=$(ls -d "$root"/dist/switchboard_*_linux_amd64 2>/dev/null | sort -V | tail -n 1 || true)
  fi
fi
PREFIX=${PREFIX:-$HOME/.local}
PREFIX=${PREFIX%/}
DESTDIR=${DESTDIR:-}
DESTDIR=${DESTDIR%/}
id=io.github.switchboard_mcp.switchboard

bindir=$PREFIX/bin
appdir=$PREFIX/share/applications
case "$PREFIX/" in
  "$HOME"/*) unitdir=${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user ;;
  *) unitdir=$PREFIX/lib/systemd/user ;;
esac

# What is installed, as paths relative to the tree and to PREFIX.
relfiles=(bin/switchboard bin/switchboard-connect "share/applications/$id.desktop"
  "share/switchboard/autostart/$id.desktop" share/switchboard/switchboard.service
  share/doc/switchboard/copyright)
for n in 16 22 24 32 48 64 128 256; do
  relfiles+=("share/icons/hicolor/${n}x$n/apps/$id.png")
done
# What an install from before the app's ID named these files installed
# instead: installing over it, or removing it, removes them too (a second
# menu entry otherwise).
oldid=io.switchboard.app
oldfiles=("share/applications/$oldid.desktop" "share/switchboard/autostart/$oldid.desktop")
for n in 16 22 24 32 48 64 128 256; do
  oldfiles+=("share/icons/hicolor/${n}x$n/apps/$oldid.png")
done

refresh_caches() {
  [ -z "$DESTDIR" ] || return 0
  if command -v update-desktop-database >/dev/null 2>&1; then
    update-desktop-database -q "$appdir" 2>/dev/null || true
  fi
  if command -v gtk-update-icon-cache >/dev/null 2>&1; then
    gtk-update-icon-cache -q -t "$PREFIX/share/icons/hicolor" 2>/dev/null || true
  fi
  if [ $service = 1 ] && command -v systemctl >/dev/null 2>&1; then
    systemctl --user daemon-reload 2>/dev/null || true
  fi
}

# alive PID: the process exists and has not exited (a zombie has).
alive() {
  local state
  state=$(sed -n 's/^[0-9]* (.*) \(.\) .*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# pool_pid: the PID of this user's running pool (the SWITCHBOARD_HOME of
# this environment, else the default one), or nothing. The installed binary
# asks it; if that cannot (a pool that does not answer, or no binary), the
# single-instance lock file names its holder.
pool_pid() {
  local out rc=0 state
  if [ -x "$bindir/switchboard" ]; then
    out=$("$bindir/switchboard" status --json 2>/dev/null) || rc=$?
    case $rc in
      0) sed -n 's/^  "pid": *\([0-9][0-9]*\),*$/\1/p' <<<"$out" | head -n 1; return 0 ;;
      3) return 0 ;; # no pool runs
    esac
  fi
  if [ -n "${SWITCHBOARD_HOME:-}" ]; then
    state=$SWITCHBOARD_HOME
  else
    state=${XDG_STATE_HOME:-$HOME/.local/state}/switchboard
  fi
  sed -n '1s/^\([0-9][0-9]*\)$/\1/p' "$state/run/switchboard.lock" 2>/dev/null || true
}

# The installed binary as /proc/PID/exe names it: links resolved.
real_bin=$(cd "$bindir" 2>/dev/null && pwd -P || echo "$bindir")/switchboard

# runs_ours PID: the process runs the installed binary, also once it is
# removed ("(deleted)"); false for a process it cannot see.
runs_ours() {
  local exe
  exe=$(readlink "/proc/$1/exe" 2>/dev/null) || return 1
  [ "${exe% (deleted)}" = "$real_bin" ]
}

# stop_pool PID: a pool running the installed binary would keep running
# from the deleted file, its MCP servers and sockets with it. SIGTERM is
# its clean stop, as the tray's Quit: it hands sessions back to their
# clients' `connect` and stops its children itself (stdin closed, SIGTERM,
# SIGKILL), well within stop_wait. Sets stop_failed when it is still
# running.
stop_wait=${SWITCHBOARD_STOP_WAIT:-15}
case "$stop_wait" in
  '' | *[!0-9]*) echo "install: SWITCHBOARD_STOP_WAIT is whole seconds, not $stop_wait" >&2; exit 2 ;;
esac
stop_failed=0
stop_pool() {
  local pid=$1 i
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < stop_wait * 10; i++)); do
    alive "$pid" || break
    sleep 0.1
  done
  if alive "$pid"; then
    stop_failed=1
    echo "install: the running Switchboard (pid $pid) did not stop within ${stop_wait} s;" \
      "it and its MCP servers still run. Stop it with: kill $pid" \
      "(if it stays: kill -9 $pid; its MCP servers end with it)" >&2
    return 0
  fi
  echo "install: stopped the running Switchboard (pid $pid) and its MCP servers"
}

# stop_pools PID: stops the pool PID (found while the binary was there to
# ask it), the files being removed already. A session it hands back makes
# its client's `connect` start the next pool at once when the client
# sends something; with the binary gone it cannot (it answers its client
# with an error), but one it started a moment before the removal would
# take the instance lock as this one lets it go. So, for a moment after
# the stop, the lock's holder is looked at too, and stopped if it runs
# the removed binary; at most three more.
stop_pools() {
  local pid=$1 stopped=" " more=0 i exe
  if [ -n "$pid" ] && alive "$pid" && ! runs_ours "$pid"; then
    exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
    echo "install: the running Switchboard (pid $pid) is ${exe:-a program it cannot see}, not this install's; leaving it running"
    return 0
  fi
  if [ -n "$pid" ] && alive "$pid"; then
    stop_pool "$pid"
    stopped+="$pid "
  fi
  # A starting pool waits up to 0.2 s for the lock (app's lockInstance):
  # half a second after the last stop covers it.
  for ((i = 0; i < 5 && stop_failed == 0; i++)); do
    pid=$(pool_pid) # from the lock file: the binary is gone
    if [ -n "$pid" ] && [[ $stopped != *" $pid "* ]] && alive "$pid" && runs_ours "$pid" && ((more++ < 3)); then
      stop_pool "$pid"
      stopped+="$pid "
      i=0
      continue
    fi
    sleep 0.1
  done
}

# desktop_exec PATH: PATH as `switchboard autostart on` writes it in Exec=
# (package autostart's desktopExec): in double quotes, ", `, $ and \ with
# a backslash, then every backslash doubled.
desktop_exec() {
  local p=$1 q= c i
  for ((i = 0; i < ${#p}; i++)); do
    c=${p:i:1}
    case "$c" in '"' | '`' | '$' | '\') q+='\' ;; esac
    q+=$c
  done
  q="\"$q\""
  printf '%s' "${q//\\/\\\\}"
}

# login_starts_ours FILE: the login item FILE starts this install's
# binary, as `switchboard autostart on` writes it: Exec=BIN, or, when it
# pins a Switchboard home, Exec=env "K=V"… BIN. BIN is named as called
# or with links resolved (a HOME or PREFIX through a symlink).
login_starts_ours() {
  local line p q
  line=$(grep -m 1 '^Exec=' "$1") || return 1
  for p in "$real_bin" "$bindir/switchboard"; do
    q=$(desktop_exec "$p")
    case "$line" in
      "Exec=$q" | "Exec=env "*" $q") return 0 ;;
    esac
  done
  return 1
}

if [ $uninstall = 1 ]; then
  # The pool is found while the binary can be asked, and stopped (the
  # user unit's too) once the files are gone: a `connect` whose session
  # the stop hands back then finds no binary to start the next pool from.
  pid=
  [ -n "$DESTDIR" ] || pid=$(pool_pid)
  for f in "${relfiles[@]}" "${oldfiles[@]}"; do rm -f "$DESTDIR$PREFIX/$f"; done
  if [ $service = 1 ] && [ -z "$DESTDIR" ] && command -v systemctl >/dev/null 2>&1; then
    systemctl --user disable --now switchboard.service 2>/dev/null || true
  fi
  [ $service = 0 ] || rm -f "$DESTDIR$unitdir/switchboard.service"
  # The login item `switchboard autostart on` made for this binary: left,
  # it would start a program that is gone at every login.
  login=${XDG_CONFIG_HOME:-$HOME/.config}/autostart/switchboard.desktop
  if [ -z "$DESTDIR" ] && [ -f "$login" ] && login_starts_ours "$login"; then
    rm -f "$login"
  fi
  rmdir "$DESTDIR$PREFIX/share/switchboard/autostart" "$DESTDIR$PREFIX/share/switchboard" \
    "$DESTDIR$PREFIX/share/doc/switchboard" 2>/dev/null || true
  [ -n "$DESTDIR" ] || stop_pools "$pid"
  refresh_caches
  echo "install: removed Switchboard from $PREFIX"
  exit $stop_failed
fi

if [ -z "$TREE" ] || [ ! -x "$TREE/bin/switchboard" ]; then
  echo "install: no Switchboard tree to install from; run \`make package-linux\` first (or set TREE)" >&2
  exit 1
fi

# Desktop Exec= needs the absolute path: ~/.local/bin is often not on the
# PATH that a desktop session starts programs with.
exec_path=$bindir/switchboard
case "$exec_path" in
  *[[:space:]]*) exec_quoted="\"$exec_path\"" ;;
  *) exec_quoted=$exec_path ;;
esac

for f in "${oldfiles[@]}"; do rm -f "$DESTDIR$PREFIX/$f"; done
for f in "${relfiles[@]}"; do
  mode=0644
  case "$f" in bin/*) mode=0755 ;; esac
  install -D -m "$mode" "$TREE/$f" "$DESTDIR$PREFIX/$f"
done
for f in "share/applications/$id.desktop" "share/switchboard/autostart/$id.desktop"; do
  sed -i -e "s|^Exec=.*|Exec=$exec_quoted|" -e "s|^TryExec=.*|TryExec=$exec_path|" "$DESTDIR$PREFIX/$f"
done
sed -i "s|^ExecStart=.*|ExecStart=$exec_quoted serve|" "$DESTDIR$PREFIX/share/switchboard/switchboard.service"
if [ $service = 1 ]; then
  install -D -m 0644 "$DESTDIR$PREFIX/share/switchboard/switchboard.service" "$DESTDIR$unitdir/switchboard.service"
fi
refresh_caches

echo "install: installed Switchboard into $PREFIX${DESTDIR:+ under $DESTDIR} from $TREE"
case ":$PATH:" in
  *":$bindir:"*) ;;
  *) echo "install: note: $bindir is not on PATH; MCP clients need the full path $exec_path" ;;
esac
if [ $service = 1 ]; then
  echo "install: start the headless pool with: systemctl --user enable --now switchboard"
fi
