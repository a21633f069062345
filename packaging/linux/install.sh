#!/usr/bin/env bash
# Installs Switchboard for one user (or system-wide with PREFIX=/usr/local)
# from its per-user tree: the unpacked switchboard_VERSION_linux_amd64.tar.gz,
# where this script sits next to bin/ and share/, or, in a checkout, the tree
# `make package-linux` stages in dist/.
#
#   PREFIX/bin/switchboard, PREFIX/bin/switchboard-connect
#   PREFIX/share/applications/io.switchboard.app.desktop
#   PREFIX/share/icons/hicolor/NxN/apps/io.switchboard.app.png
#   PREFIX/share/switchboard/ (the autostart entry template, the user unit)
#   PREFIX/share/doc/switchboard/copyright
#   and with --service the systemd user unit switchboard.service
#   (~/.config/systemd/user for a PREFIX under $HOME, else PREFIX/lib/systemd/user)
#
# Usage: install.sh [--service] [--uninstall]
#   PREFIX   where to install (default: ~/.local)
#   DESTDIR  staging root for packagers (paths inside the files omit it)
#   TREE     the tree to install from (default: see above)
#
# `make install` builds the tree and runs this.
set -euo pipefail

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }

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
id=io.switchboard.app

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
  for f in "${relfiles[@]}"; do rm -f "$DESTDIR$PREFIX/$f"; done
  [ $service = 0 ] || rm -f "$DESTDIR$unitdir/switchboard.service"
  # The login item `switchboard autostart on` made for this binary: left,
  # it would start a program that is gone at every login.
  login=${XDG_CONFIG_HOME:-$HOME/.config}/autostart/switchboard.desktop
  if [ -z "$DESTDIR" ] && [ -f "$login" ] && grep -q "^Exec=\"\{0,1\}$bindir/switchboard" "$login"; then
    rm -f "$login"
  fi
  rmdir "$DESTDIR$PREFIX/share/switchboard/autostart" "$DESTDIR$PREFIX/share/switchboard" \
    "$DESTDIR$PREFIX/share/doc/switchboard" 2>/dev/null || true
  refresh_caches
  echo "install: removed Switchboard from $PREFIX"
  exit 0
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

for f in "${relfiles[@]}"; do
  mode=0644
  case "$f" in bin/*) mode=0755 ;; esac
  install -D -m "$mode" "$TREE/$f" "$DESTDIR$PREFIX/$f"
done
for f in "share/applications/$id.desktop" "share/switchboard/autostart/$id.desktop"; do
  sed -i "s|^Exec=.*|Exec=$exec_quoted|" "$DESTDIR$PREFIX/$f"
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
