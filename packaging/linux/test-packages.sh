#!/usr/bin/env bash
# Checks the Linux artifacts in DIST the way a user meets them:
#   1. the desktop entries pass desktop-file-validate;
#   2. every library the binary links is a declared dependency of the .deb;
#   3. the per-user tarball installs into a fresh PREFIX with its
#      install.sh, runs from there, and uninstalls leaving nothing;
#   4. as root with apt (CI): `apt-get install ./switchboard_*.deb`, then
#      `switchboard version`, `serve` and `connect` from /usr/bin answer a
#      real MCP exchange, and `apt-get purge` leaves none of its files.
#
# Usage: test-packages.sh DIST FAKEMCP   (make test-package runs it)
set -euo pipefail

dist=${1:?usage: test-packages.sh DIST FAKEMCP}
fake=${2:?usage: test-packages.sh DIST FAKEMCP}
id=io.switchboard.app
deb=$(ls "$dist"/switchboard_*_amd64.deb | tail -n 1)
tree=$(ls -d "$dist"/switchboard_*_linux_amd64 | tail -n 1)
tarball=$tree.tar.gz
version=$(dpkg-deb -f "$deb" Version)
work=$(mktemp -d)
pool_pid=
cleanup() {
  [ -z "$pool_pid" ] || kill "$pool_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
step() { echo "test-packages: $*"; }
fail() { echo "test-packages: FAIL: $*" >&2; exit 1; }

# An MCP exchange through `connect`: initialize, then tools/list.
exchange() { # BIN HOME
  printf '%s\n' \
    '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"package-test","version":"1"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' |
    SWITCHBOARD_HOME=$2 timeout 60 "$1" connect fake | head -n 2
}

step "desktop-file-validate"
desktop-file-validate "$tree/share/applications/$id.desktop"
desktop-file-validate "$tree/share/switchboard/autostart/$id.desktop"
desktop-file-validate "$dist/linux-root/usr/share/applications/$id.desktop"

step "the libraries the binary links are dependencies"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in $(readelf -d "$tree/bin/switchboard" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
  pkg=$(dpkg -S "/usr/lib/x86_64-linux-gnu/$lib" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
  [ -n "$pkg" ] || pkg=$(dpkg -S "/lib/x86_64-linux-gnu/$lib" 2>/dev/null | head -n 1 | cut -d: -f1 || true)
  [ -n "$pkg" ] || fail "no package owns $lib"
  case ", $depends," in
    *", $pkg,"*) echo "  $lib: $pkg" ;;
    *) fail "$lib comes from $pkg, which is not in Depends: $depends" ;;
  esac
done

step "per-user install from the tarball"
mkdir -p "$work/unpack" "$work/home"
tar -C "$work/unpack" -xzf "$tarball"
prefix=$work/prefix
HOME=$work/home PREFIX=$prefix bash "$work/unpack/$(basename "$tree")/install.sh" >/dev/null
[ -x "$prefix/bin/switchboard" ] && [ -x "$prefix/bin/switchboard-connect" ] || fail "binaries not installed"
grep -qx "Exec=$prefix/bin/switchboard" "$prefix/share/applications/$id.desktop" || fail "desktop Exec not absolute"
desktop-file-validate "$prefix/share/applications/$id.desktop"
"$prefix/bin/switchboard" version --json | grep -q "\"version\": *\"$version\"" || fail "installed version is not $version"
HOME=$work/home PREFIX=$prefix bash "$work/unpack/$(basename "$tree")/install.sh" --uninstall >/dev/null
# Desktop and icon caches are the desktop's (refreshed on removal), not ours.
left=$(find "$prefix" -type f ! -name icon-theme.cache ! -name mimeinfo.cache | head -n 5)
[ -z "$left" ] || fail "uninstall left $left"

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  step "SKIP the apt install test: it needs root and apt (CI runs it)"
  exit 0
fi
if dpkg -s switchboard >/dev/null 2>&1; then
  fail "a switchboard package is already installed; not touching it"
fi

step "apt-get install $deb"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$(readlink -f "$deb")" >"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log"; fail "apt-get install"; }
dpkg -L switchboard >"$work/files"
[ "$(command -v switchboard)" = /usr/bin/switchboard ] || fail "switchboard is not /usr/bin/switchboard"
/usr/bin/switchboard version --json | grep -q "\"version\": *\"$version\"" || fail "/usr/bin/switchboard version"

step "serve and connect from /usr/bin"
home=$work/sbhome
mkdir -p "$home"
printf '{"mcpServers":{"fake":{"command":"%s"}}}\n' "$fake" >"$home/config.json"
SWITCHBOARD_HOME=$home /usr/bin/switchboard serve >"$work/serve.log" 2>&1 &
pool_pid=$!
for _ in $(seq 100); do
  SWITCHBOARD_HOME=$home /usr/bin/switchboard status --json >/dev/null 2>&1 && break
  sleep 0.1
done
out=$(exchange /usr/bin/switchboard "$home")
echo "$out" | grep -q '"tools":\[' || { cat "$work/serve.log"; fail "connect answered: $out"; }
kill "$pool_pid"
wait "$pool_pid" || true
pool_pid=

step "apt-get purge switchboard"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -q switchboard >>"$work/apt.log" 2>&1 ||
  { cat "$work/apt.log"; fail "apt-get purge"; }
while read -r f; do
  if [ -f "$f" ] || [ -L "$f" ]; then fail "$f is left after purge"; fi
done <"$work/files"
for d in /usr/share/switchboard /usr/share/doc/switchboard; do
  [ ! -e "$d" ] || fail "$d is left after purge"
done
step "ok: $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB, Installed-Size $(dpkg-deb -f "$deb" Installed-Size) KiB)"
