#!/usr/bin/env bash
# Checks the Linux artifacts in DIST the way a user meets them:
#   1. the desktop entries pass desktop-file-validate;
#   2. every library the binary links is a declared dependency of the .deb;
#   3. the per-user tarball installs into a fresh PREFIX with its
#      install.sh, runs from there, and uninstalls leaving nothing: its
#      running pool stopped with its MCP server, or, when the pool does
#      not stop, a failure that names its PID; a client at work, whose
#      `connect` would start the next pool, starts none from the removed
#      binary and gets an error answer; the login item goes also when
#      HOME is reached through a symlink, and when it starts the binary
#      through env(1) with a Switchboard home pinned (another copy's
#      stays), and it names the binary in TryExec too; installed over an
#      install from before the app's ID, it removes that one's desktop
#      entry and icons;
#   4. the .rpm's digests verify, it installs the .deb's files (its
#      licence where Fedora keeps licences) and requires every library the
#      binary links; as root, rpm (Debian's) installs it into a throwaway
#      root without dependency resolution or scriptlets (there is no RPM
#      system here to resolve against), `version` and a real MCP exchange
#      through `serve` and `connect` run from that root, its scriptlets
#      parse, and `rpm -e` leaves none of its files and directories;
#   5. as root with apt (CI): `apt-get install ./switchboard_*.deb`, then
#      `switchboard version`, `serve` and `connect` from /usr/bin answer a
#      real MCP exchange, and `apt-get purge` leaves none of its files.
#
# Usage: test-packages.sh DIST FAKEMCP   (make test-package runs it)
set -euo pipefail

dist=${1:?usage: test-packages.sh DIST FAKEMCP}
fake=${2:?usage: test-packages.sh DIST FAKEMCP}
id=io.github.switchboard_mcp.switchboard
# The newest version's (0.10.0 after 0.9.0: sorted as versions).
deb=$(ls "$dist"/switchboard_*_amd64.deb | sort -V | tail -n 1)
rpmfile=$(ls "$dist"/switchboard-*.x86_64.rpm | sort -V | tail -n 1)
tree=$(ls -d "$dist"/switchboard_*_linux_amd64 | sort -V | tail -n 1)
tarball=$tree.tar.gz
version=$(dpkg-deb -f "$deb" Version)
work=$(mktemp -d)
pool_pid= client_pid=
cleanup() {
  [ -z "$pool_pid" ] || kill -CONT "$pool_pid" 2>/dev/null || true
  [ -z "$pool_pid" ] || kill "$pool_pid" 2>/dev/null || true
  [ -z "$client_pid" ] || kill "$client_pid" 2>/dev/null || true
  local p
  for p in $(pools_of "$work/prefix/bin/switchboard"); do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
step() { echo "test-packages: $*"; }
fail() { echo "test-packages: FAIL: $*" >&2; exit 1; }

# serve_and_exchange BIN: serve from BIN in a fresh home whose server is the
# fake, then an exchange through BIN's connect; the answer must list tools.
serve_and_exchange() {
  local home
  home=$(mktemp -d "$work/sbhome.XXXX")
  printf '{"mcpServers":{"fake":{"command":"%s"}}}\n' "$fake" >"$home/config.json"
  SWITCHBOARD_HOME=$home "$1" serve >"$work/serve.log" 2>&1 &
  pool_pid=$!
  for _ in $(seq 100); do
    SWITCHBOARD_HOME=$home "$1" status --json >/dev/null 2>&1 && break
    sleep 0.1
  done
  out=$(exchange "$1" "$home")
  echo "$out" | grep -q '"tools":\[' || { cat "$work/serve.log"; fail "connect answered: $out"; }
  kill "$pool_pid"
  wait "$pool_pid" || true
  pool_pid=
}

# An MCP exchange through `connect`: initialize, then tools/list.
exchange() { # BIN HOME
  mcp_lines | SWITCHBOARD_HOME=$2 timeout 60 "$1" connect fake | head -n 2
}
mcp_lines() {
  printf '%s\n' \
    '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"package-test","version":"1"}}}' \
    '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
    '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
}

# as_user CMD...: CMD as the per-user install's user, whose Switchboard
# home is the default one under $work/home, with no desktop (a client
# starts the headless pool).
user_env=(env -u SWITCHBOARD_HOME -u XDG_CONFIG_HOME -u XDG_STATE_HOME -u DISPLAY -u WAYLAND_DISPLAY HOME="$work/home")
as_user() { "${user_env[@]}" "$@"; }

# gone PID: no such process, or one that has exited (a zombie).
gone() {
  local state
  state=$(sed -n 's/^[0-9]* (.*) \(.\) .*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 0
  [ -z "$state" ] || [ "$state" = Z ]
}

# wait_gone PID...: true once every PID is gone, false after 30 s.
wait_gone() {
  local p
  for _ in $(seq 300); do
    for p in "$@"; do gone "$p" || { sleep 0.1; continue 2; }; done
    return 0
  done
  return 1
}

# pools_of BIN: the PIDs of this user's processes that run BIN, removed
# ("(deleted)"), other than a `connect`: pools left running from it.
pools_of() {
  local d exe arg1 bin
  bin=$(cd "$(dirname "$1")" 2>/dev/null && pwd -P)/$(basename "$1") || return 0
  for d in /proc/[0-9]*; do
    exe=$(readlink "$d/exe" 2>/dev/null) || continue
    [ "$exe" = "$bin (deleted)" ] || continue
    arg1=$(tr '\0' '\n' <"$d/cmdline" 2>/dev/null | sed -n 2p)
    [ "$arg1" = connect ] || echo "${d#/proc/}"
  done
}

# start_user_pool BIN: BIN serve as the user, with the fake as its server,
# and a session through BIN's connect, which starts the fake; sets pool_pid
# and child_pid (the pool's child).
start_user_pool() {
  mkdir -p "$work/home/.config/switchboard"
  printf '{"mcpServers":{"fake":{"command":"%s"}}}\n' "$fake" >"$work/home/.config/switchboard/config.json"
  "${user_env[@]}" "$1" serve >"$work/serve.log" 2>&1 & # env execs it: $! is the pool
  pool_pid=$!
  for _ in $(seq 100); do
    as_user "$1" status --json >/dev/null 2>&1 && break
    sleep 0.1
  done
  out=$(mcp_lines | as_user timeout 60 "$1" connect fake | head -n 2)
  echo "$out" | grep -q '"tools":\[' || { cat "$work/serve.log"; fail "connect answered: $out"; }
  child_pid=$(grep -l "^PPid:[[:space:]]*$pool_pid\$" /proc/[0-9]*/status 2>/dev/null | head -n 1 | cut -d/ -f3 || true)
  [ -n "$child_pid" ] || fail "the pool (pid $pool_pid) started no child for the session"
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
    *", $pkg,"* | *", $pkg ("*) echo "  $lib: $pkg" ;;
    *) fail "$lib comes from $pkg, which is not in Depends: $depends" ;;
  esac
done

step "Depends holds what dpkg-shlibdeps finds, versions too (glibc, Wayland)"
# dpkg-shlibdeps wants a source tree; an empty control file is one.
mkdir -p "$work/shlibs/debian" && : >"$work/shlibs/debian/control"
bin=$(readlink -f "$tree/bin/switchboard")
shlibs=$(cd "$work/shlibs" && dpkg-shlibdeps -O -e "$bin" 2>/dev/null |
  sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || fail "dpkg-shlibdeps found no dependencies of $tree/bin/switchboard"
IFS=, read -ra needs <<<"$shlibs"
for need in "${needs[@]}"; do
  need=$(echo $need) # trimmed
  pkg=${need%% *}
  have=$(tr ',' '\n' <<<"$depends" | sed 's/^ *//' | grep -E "^$pkg( |\$)" | head -n 1 || true)
  [ -n "$have" ] || fail "the binary needs $need (dpkg-shlibdeps), which is not in Depends: $depends"
  case "$need" in
    *"(>= "*)
      want=${need#*(>= } want=${want%)}
      got=$(sed -n 's/.*(>= \(.*\))/\1/p' <<<"$have")
      [ -n "$got" ] && dpkg --compare-versions "$got" ge "$want" ||
        fail "the binary needs $need (dpkg-shlibdeps); Depends has $have"
      ;;
  esac
  echo "  $need: $have"
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
HOME=$work/home XDG_CONFIG_HOME= "$prefix/bin/switchboard" autostart on >/dev/null || fail "autostart on"
login=$work/home/.config/autostart/switchboard.desktop
[ -f "$login" ] || fail "autostart on made no login item at $login"
start_user_pool "$prefix/bin/switchboard"
as_user PREFIX="$prefix" bash "$work/unpack/$(basename "$tree")/install.sh" --uninstall >"$work/uninstall.log" 2>&1 ||
  { cat "$work/uninstall.log"; fail "uninstall with the pool running failed"; }
[ ! -e "$login" ] || fail "uninstall left the login item $login, which starts a program that is gone"
# Desktop and icon caches are the desktop's (refreshed on removal), not ours.
left=$(find "$prefix" -type f ! -name icon-theme.cache ! -name mimeinfo.cache | head -n 5)
[ -z "$left" ] || fail "uninstall left $left"
gone "$pool_pid" || { cat "$work/uninstall.log"; fail "uninstall left the pool (pid $pool_pid) running from the removed binary"; }
gone "$child_pid" || fail "uninstall left the pool's MCP server (pid $child_pid) running"
grep -q "stopped the running Switchboard (pid $pool_pid)" "$work/uninstall.log" ||
  { cat "$work/uninstall.log"; fail "uninstall did not say it stopped the pool"; }
[ ! -e "$work/home/.local/state/switchboard/run/control.sock" ] || fail "uninstall left the control socket"
wait "$pool_pid" || true
pool_pid=

step "per-user uninstall with a pool that does not stop names its PID"
as_user PREFIX="$prefix" bash "$work/unpack/$(basename "$tree")/install.sh" >/dev/null
start_user_pool "$prefix/bin/switchboard"
kill -STOP "$pool_pid" # it answers nothing and cannot stop
if as_user PREFIX="$prefix" SWITCHBOARD_STOP_WAIT=1 bash "$work/unpack/$(basename "$tree")/install.sh" --uninstall >"$work/uninstall.log" 2>&1; then
  cat "$work/uninstall.log"; fail "uninstall exited 0 with the pool still running"
fi
grep -q "(pid $pool_pid) did not stop within 1 s.*kill $pool_pid" "$work/uninstall.log" ||
  { cat "$work/uninstall.log"; fail "uninstall did not name the pool it could not stop"; }
[ ! -e "$prefix/bin/switchboard" ] || fail "uninstall kept the binary"
kill -CONT "$pool_pid" # the SIGTERM uninstall sent is delivered now
wait_gone "$pool_pid" "$child_pid" || fail "the pool (pid $pool_pid) or its child did not stop on uninstall's SIGTERM"
wait "$pool_pid" || true
pool_pid=

step "per-user uninstall with a client at work starts no pool from the removed binary"
as_user PREFIX="$prefix" bash "$work/unpack/$(basename "$tree")/install.sh" >/dev/null
start_user_pool "$prefix/bin/switchboard"
# A client that keeps sending: the pool's stop hands its session back to
# its connect, which starts the next pool for it when it can.
busy_client() {
  mcp_lines | head -n 2
  for i in $(seq 100000); do
    printf '{"jsonrpc":"2.0","id":%d,"method":"tools/list"}\n' "$i" || return 0
    sleep 0.02
  done
}
# Its stdout a pipe, as a client's: the pool takes the session's pipes.
mkfifo "$work/client.pipe"
cat "$work/client.pipe" >"$work/client.out" &
busy_client | "${user_env[@]}" "$prefix/bin/switchboard-connect" fake >"$work/client.pipe" 2>"$work/client.err" &
client_pid=$! # env execs the connect
for _ in $(seq 300); do grep -q '"tools":\[' "$work/client.out" && break; sleep 0.1; done
grep -q '"tools":\[' "$work/client.out" || { cat "$work/serve.log" "$work/client.err"; fail "the busy client got no answer"; }
as_user PREFIX="$prefix" bash "$work/unpack/$(basename "$tree")/install.sh" --uninstall >"$work/uninstall.log" 2>&1 ||
  { cat "$work/uninstall.log"; fail "uninstall with a busy client failed"; }
wait_gone "$pool_pid" "$child_pid" || fail "uninstall left the pool (pid $pool_pid) or its MCP server running"
# Its connect either starts a pool (from the removed binary) or gives up.
for _ in $(seq 300); do
  [ -z "$(pools_of "$prefix/bin/switchboard")" ] || break
  gone "$client_pid" && break
  sleep 0.1
done
left=$(pools_of "$prefix/bin/switchboard")
[ -z "$left" ] || { cat "$work/uninstall.log"; fail "a pool runs from the removed binary after uninstall: $(ps -o pid=,args= -p "${left//$'\n'/,}")"; }
gone "$client_pid" || fail "the busy client's connect neither started a pool nor gave up"
grep -q '"error":.*starting one failed' "$work/client.out" ||
  { cat "$work/client.out" "$work/client.err"; fail "the busy client got no error answer saying no pool could start"; }
wait "$pool_pid" "$client_pid" || true
pool_pid= client_pid=

step "per-user uninstall removes the login item when HOME is a symlink"
mkdir -p "$work/realhome"
ln -s "$work/realhome" "$work/linkhome"
linked_env=(env -u SWITCHBOARD_HOME -u XDG_CONFIG_HOME -u XDG_STATE_HOME HOME="$work/linkhome")
"${linked_env[@]}" bash "$work/unpack/$(basename "$tree")/install.sh" >/dev/null
"${linked_env[@]}" "$work/linkhome/.local/bin/switchboard" autostart on >/dev/null || fail "autostart on (linked HOME)"
login=$work/linkhome/.config/autostart/switchboard.desktop
[ -f "$login" ] || fail "autostart on made no login item at $login"
"${linked_env[@]}" bash "$work/unpack/$(basename "$tree")/install.sh" --uninstall >"$work/uninstall.log" 2>&1 ||
  { cat "$work/uninstall.log"; fail "uninstall (linked HOME) failed"; }
[ ! -e "$login" ] || fail "uninstall under a linked HOME left the login item $login: $(grep ^Exec= "$login")"

step "per-user uninstall removes the login item that pins a Switchboard home, and no other"
inst=$work/unpack/$(basename "$tree")/install.sh
as_user PREFIX="$prefix" bash "$inst" >/dev/null
grep -qxF "TryExec=$prefix/bin/switchboard" "$prefix/share/switchboard/autostart/$id.desktop" ||
  fail "the installed autostart template's TryExec is not $prefix/bin/switchboard: $(grep ^TryExec= "$prefix/share/switchboard/autostart/$id.desktop" || echo none)"
login=$work/home/.config/autostart/switchboard.desktop
as_user SWITCHBOARD_HOME="$work/pinned" "$prefix/bin/switchboard" autostart on >/dev/null || fail "autostart on (SWITCHBOARD_HOME)"
grep -q '^Exec=env ' "$login" || fail "autostart on with SWITCHBOARD_HOME wrote no env(1) Exec: $(grep ^Exec= "$login")"
# Where the binary is gone, desktops skip the item instead of failing to
# start it at every login.
grep -qxF "TryExec=$prefix/bin/switchboard" "$login" ||
  fail "the login item's TryExec is not the binary: $(grep ^TryExec= "$login" || echo none)"
as_user PREFIX="$prefix" bash "$inst" --uninstall >"$work/uninstall.log" 2>&1 ||
  { cat "$work/uninstall.log"; fail "uninstall failed"; }
[ ! -e "$login" ] || fail "uninstall left the login item $login, which starts a program that is gone: $(grep ^Exec= "$login")"
# Another copy's login item is not this install's to remove.
mkdir -p "$work/other"
cp "$tree/bin/switchboard" "$work/other/switchboard"
as_user SWITCHBOARD_HOME="$work/pinned" "$work/other/switchboard" autostart on >/dev/null || fail "autostart on (another copy)"
as_user PREFIX="$prefix" bash "$inst" >/dev/null
as_user PREFIX="$prefix" bash "$inst" --uninstall >"$work/uninstall.log" 2>&1 ||
  { cat "$work/uninstall.log"; fail "uninstall failed"; }
[ -e "$login" ] || fail "uninstall removed the login item of another copy of Switchboard ($work/other/switchboard)"
rm -f "$login"

step "installing over an install from before the app's ID removes its desktop entry and icons"
olds=("$prefix/share/applications/io.switchboard.app.desktop" "$prefix/share/icons/hicolor/48x48/apps/io.switchboard.app.png")
for f in "${olds[@]}"; do mkdir -p "$(dirname "$f")" && : >"$f"; done
as_user PREFIX="$prefix" bash "$inst" >/dev/null
for f in "${olds[@]}"; do [ ! -e "$f" ] || fail "installing left $f of the earlier install (a second menu entry)"; done
as_user PREFIX="$prefix" bash "$inst" --uninstall >/dev/null 2>&1 || fail "uninstall failed"

step "the .rpm: digests, files, requires"
command -v rpm >/dev/null 2>&1 || fail "rpm is not installed (make deps installs it)"
rpm -K --nosignature "$rpmfile" >/dev/null || fail "rpm -K $rpmfile"
debfiles=$(dpkg-deb -c "$deb" | grep -v '^d' | awk '{print $6}' | sed 's#^\./#/#' |
  sed 's#^/usr/share/doc/switchboard/copyright$#/usr/share/licenses/switchboard/LICENSE#' | sort)
rpmlist=$(rpm -qp --qf '[%{FILEMODES:perms} %{FILENAMES}\n]' "$rpmfile" 2>/dev/null)
rpmfiles=$(sed -n 's/^[^d][^ ]* //p' <<<"$rpmlist" | sort)
[ "$debfiles" = "$rpmfiles" ] || fail "the .rpm and the .deb install different files: $(diff <(echo "$debfiles") <(echo "$rpmfiles") | tr '\n' ' ')"
# Its own directories are the package's too, so that rpm -e removes them
# (rpm removes only what a package owns); the system's are not.
rpmdirs=$(sed -n 's/^d[^ ]* //p' <<<"$rpmlist" | sort)
wantdirs=$(printf '%s\n' /usr/share/licenses/switchboard /usr/share/switchboard /usr/share/switchboard/autostart)
[ "$rpmdirs" = "$wantdirs" ] || fail "the .rpm owns the directories [$(echo $rpmdirs)], want [$(echo $wantdirs)]"
requires=$(rpm -qp --requires "$rpmfile" 2>/dev/null)
for lib in $(readelf -d "$tree/bin/switchboard" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p'); do
  case "$lib" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|ld-linux*) continue ;; # glibc's: every system has them
  esac
  echo "$requires" | grep -qxF "$lib()(64bit)" || fail "$lib is linked but not required by the .rpm: $(echo $requires)"
  echo "  $lib: required"
done
# The newest GLIBC_x.y of each glibc library the binary needs: without
# it the loader refuses to start it ("GLIBC_2.34 not found").
while read -r lib v; do
  echo "$requires" | grep -qxF "$lib(GLIBC_$v)(64bit)" ||
    fail "the binary needs $lib version GLIBC_$v, which the .rpm does not require: $(echo $requires)"
  echo "  $lib(GLIBC_$v)(64bit): required"
done < <(readelf -V --wide "$tree/bin/switchboard" | awk '
  /^Version needs section/ { needs = 1; next }
  /^Version / { needs = 0 }
  needs && /File:/ { for (i = 1; i < NF; i++) if ($i == "File:") lib = $(i + 1) }
  needs && /Name: GLIBC_[0-9]/ { for (i = 1; i < NF; i++) if ($i == "Name:") { v = $(i + 1); sub(/^GLIBC_/, "", v); print lib, v } }' |
  sort -k1,1 -k2,2V | awk '{ newest[$1] = $2 } END { for (l in newest) print l, newest[l] }')

if [ "$(id -u)" = 0 ]; then
  step "the .rpm installed into a throwaway root, run, erased"
  root=$work/rpmroot
  # (Debian's rpm warns that dpkg owns this system; the log keeps that.)
  rpm --root "$root" --initdb 2>"$work/rpm.log" || { cat "$work/rpm.log"; fail "rpm --initdb"; }
  rpm --root "$root" -i --nodeps --noscripts "$(readlink -f "$rpmfile")" 2>>"$work/rpm.log" ||
    { cat "$work/rpm.log"; fail "rpm -i"; }
  "$root/usr/bin/switchboard" version --json | grep -q "\"version\": *\"$version\"" || fail "the .rpm's switchboard version"
  serve_and_exchange "$root/usr/bin/switchboard"
  for script in POSTIN POSTUN; do
    rpm -qp --qf "%{$script}" "$rpmfile" 2>/dev/null >"$work/$script.sh"
    sh -n "$work/$script.sh" || fail "the .rpm's $script scriptlet does not parse"
  done
  rpm --root "$root" -e --noscripts switchboard 2>>"$work/rpm.log" || { cat "$work/rpm.log"; fail "rpm -e"; }
  left=$(find "$root/usr" -type f 2>/dev/null | head -n 5)
  [ -z "$left" ] || fail "rpm -e left $left"
  left=$(find "$root/usr" -path '*switchboard*' 2>/dev/null | head -n 5)
  [ -z "$left" ] || fail "rpm -e left $(echo $left)"
fi

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
serve_and_exchange /usr/bin/switchboard

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
