#!/usr/bin/env bash
# Installs Switchboard for one user (or system-wide with PREFIX=/usr/local):
#
#   PREFIX/bin/switchboard
#   PREFIX/bin/switchboard-connect (the small per-session relay; if built)
#   PREFIX/share/applications/io.switchboard.app.desktop
#   PREFIX/share/icons/hicolor/256x256/apps/io.switchboard.app.png
#   and with --service the systemd user unit switchboard.service
#   (~/.config/systemd/user for a PREFIX under $HOME, else PREFIX/lib/systemd/user)
#
# Usage: packaging/linux/install.sh [--service] [--uninstall]
#   PREFIX   where to install (default: ~/.local)
#   DESTDIR  staging root for packagers (paths inside the files omit it)
#   BIN      the binary to install (default: bin/switchboard; `make build`)
#
# `make install` builds and runs this.
set -euo pipefail

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }

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
root=$(cd "$here/../.." && pwd)
PREFIX=${PREFIX:-$HOME/.local}
PREFIX=${PREFIX%/}
DESTDIR=${DESTDIR:-}
DESTDIR=${DESTDIR%/}
BIN=${BIN:-$root/bin/switchboard}
id=io.switchboard.app

bindir=$PREFIX/bin
appdir=$PREFIX/share/applications
icondir=$PREFIX/share/icons/hicolor/256x256/apps
case "$PREFIX/" in
  "$HOME"/*) unitdir=${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user ;;
  *) unitdir=$PREFIX/lib/systemd/user ;;
esac

files=("$bindir/switchboard" "$bindir/switchboard-connect" "$appdir/$id.desktop" "$icondir/$id.png")
[ $service = 0 ] || files+=("$unitdir/switchboard.service")

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

if [ $uninstall = 1 ]; then
  if [ $service = 1 ] && [ -z "$DESTDIR" ] && command -v systemctl >/dev/null 2>&1; then
    systemctl --user disable --now switchboard.service 2>/dev/null || true
  fi
  for f in "${files[@]}"; do rm -f "$DESTDIR$f"; done
  refresh_caches
  echo "install: removed ${files[*]}"
  exit 0
fi

if [ ! -x "$BIN" ]; then
  echo "install: $BIN does not exist; run \`make build\` first (or set BIN)" >&2
  exit 1
fi

# Desktop Exec= needs the absolute path: ~/.local/bin is often not on the
# PATH that a desktop session starts programs with.
exec_path=$bindir/switchboard
case "$exec_path" in
  *[[:space:]]*) exec_quoted="\"$exec_path\"" ;;
  *) exec_quoted=$exec_path ;;
esac

install -d "$DESTDIR$bindir" "$DESTDIR$appdir" "$DESTDIR$icondir"
install -m 0755 "$BIN" "$DESTDIR$bindir/switchboard"
# `switchboard connect` runs this relay when it sits next to the binary.
if [ -x "$(dirname "$BIN")/switchboard-connect" ]; then
  install -m 0755 "$(dirname "$BIN")/switchboard-connect" "$DESTDIR$bindir/switchboard-connect"
fi
sed "s|^Exec=.*|Exec=$exec_quoted|" "$here/switchboard.desktop" >"$DESTDIR$appdir/$id.desktop"
chmod 0644 "$DESTDIR$appdir/$id.desktop"
install -m 0644 "$root/assets/icon.png" "$DESTDIR$icondir/$id.png"
if [ $service = 1 ]; then
  install -d "$DESTDIR$unitdir"
  sed "s|^ExecStart=.*|ExecStart=$exec_quoted serve|" "$here/switchboard.service" \
    >"$DESTDIR$unitdir/switchboard.service"
  chmod 0644 "$DESTDIR$unitdir/switchboard.service"
fi
refresh_caches

echo "install: installed ${files[*]}${DESTDIR:+ under $DESTDIR}"
case ":$PATH:" in
  *":$bindir:"*) ;;
  *) echo "install: note: $bindir is not on PATH; MCP clients need the full path $exec_path" ;;
esac
if [ $service = 1 ]; then
  echo "install: start the headless pool with: systemctl --user enable --now switchboard"
fi
