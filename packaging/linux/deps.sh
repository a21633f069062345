#!/usr/bin/env bash
# Installs the system packages Switchboard needs on Debian or Ubuntu.
#
#   deps.sh build   what building and running it need: the cgo headers fyne
#                   and go-sqlite3 compile against (`make build`, `make run`,
#                   `make install`)
#   deps.sh         those, and what the checks and the other packages need
#                   (`make test`): Xvfb, a D-Bus session and a
#                   StatusNotifierItem tray host for the GUI smoke test,
#                   desktop-file-utils, rpm and dpkg-dev for the package
#                   test, and mingw-w64, NSIS and Wine for the Windows build,
#                   installer and its tests
#
# Idempotent: it asks dpkg which packages are missing and only then runs
# `apt-get update` (once) and `apt-get install`. It waits for another apt or
# dpkg holding the lock instead of failing (DEPS_LOCK_TIMEOUT seconds, default
# 900). It prints one line saying what it did; warnings go to stderr.
#
# It also checks that Go 1.26 or newer is on PATH (fatal) and, for the
# checks, that node and npm are (a warning: only the integration tests
# against real npm MCP servers need them).
#
# Never add dbus-x11 here: it leaves a stray dbus-daemon running.
# SWITCHBOARD_SKIP_SYSTEM_DEPS=1 skips the package step (other distributions:
# install the equivalents of the lists below yourself).
set -euo pipefail

build_pkgs=(
  gcc libc6-dev pkg-config
  libgl1-mesa-dev libx11-dev libxcursor-dev libxrandr-dev libxinerama-dev
  libxi-dev libxxf86vm-dev libwayland-dev libxkbcommon-dev
)
check_pkgs=(
  xvfb xauth dbus imagemagick xdotool x11-utils
  haskell-status-notifier-item-utils haskell-gtk-sni-tray-utils
  desktop-file-utils rpm dpkg-dev
  gcc-mingw-w64-x86-64 nsis wine64
)
group=${1:-all}
case "$group" in
  build) pkgs=("${build_pkgs[@]}") for="for building" ;;
  all) pkgs=("${build_pkgs[@]}" "${check_pkgs[@]}") for="for building and the checks" ;;
  *) echo "usage: deps.sh [build]" >&2; exit 2 ;;
esac
min_go_minor=26 # Go 1.26

die() { echo "deps: error: $*" >&2; exit 1; }
warn() { echo "deps: warning: $*" >&2; }

# --- Go -------------------------------------------------------------------
command -v go >/dev/null 2>&1 ||
  die "Go is not on PATH; install Go 1.$min_go_minor or newer (https://go.dev/dl/)"
gov=$(go env GOVERSION 2>/dev/null) || die "\`go env GOVERSION\` failed; is the Go installation broken?"
case "$gov" in
  go1.*)
    minor=${gov#go1.}
    minor=${minor%%[!0-9]*}
    if [ -z "$minor" ] || [ "$minor" -lt "$min_go_minor" ]; then
      die "$gov is too old; Switchboard needs Go 1.$min_go_minor or newer"
    fi
    ;;
  devel*) ;;            # a development toolchain: trust it
  *) die "cannot parse the Go version \"$gov\"" ;;
esac

# --- node / npm (warn only, for the checks) -----------------------------------
if [ "$group" = all ]; then
  nodeless=()
  for tool in node npm npx; do
    command -v "$tool" >/dev/null 2>&1 || nodeless+=("$tool")
  done
  [ ${#nodeless[@]} -eq 0 ] ||
    warn "${nodeless[*]} not found; the integration tests that start real npm MCP servers will be skipped (apt-get install nodejs npm)"
fi

# --- system packages --------------------------------------------------------
if [ "${SWITCHBOARD_SKIP_SYSTEM_DEPS:-}" = 1 ]; then
  echo "deps: $gov; system packages skipped (SWITCHBOARD_SKIP_SYSTEM_DEPS=1)"
  exit 0
fi
if [ "$(uname -s)" != Linux ]; then
  echo "deps: $gov; no system packages needed on $(uname -s) beyond a C compiler for cgo"
  exit 0
fi
if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  die "this is not a Debian-like system (no dpkg-query/apt-get); install the equivalents of: ${pkgs[*]}; then rerun with SWITCHBOARD_SKIP_SYSTEM_DEPS=1"
fi

missing=()
for p in "${pkgs[@]}"; do
  # ${db:Status-Abbrev} is "ii " for an installed package; dpkg-query -W fails
  # for one it has never heard of.
  st=$(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null || true)
  [ "${st:0:2}" = ii ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: $gov; all ${#pkgs[@]} system packages $for already installed"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 ||
    die "not root and no sudo: cannot install ${missing[*]}; run as root: apt-get install ${missing[*]}"
  sudo=(sudo)
  # Never prompt in CI or without a terminal: fail instead.
  if [ "${CI:-}" = true ] || [ ! -t 0 ]; then sudo+=(-n); fi
fi

log=$(mktemp "${TMPDIR:-/tmp}/switchboard-deps.XXXXXX")
trap 'rm -f "$log"' EXIT

# apt_retry runs apt-get, waiting out a lock that another apt or dpkg holds
# (unattended upgrades, a parallel installer) until the deadline passes.
deadline=$(( $(date +%s) + ${DEPS_LOCK_TIMEOUT:-900} ))
apt_retry() {
  local waited=0
  while :; do
    if "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
      apt-get -o DPkg::Lock::Timeout=60 "$@" >"$log" 2>&1; then
      return 0
    fi
    if grep -qiE 'could not get lock|unable to acquire|unable to lock|is another process using it' "$log" &&
      [ "$(date +%s)" -lt "$deadline" ]; then
      [ $waited = 1 ] || warn "apt/dpkg is locked by another process; waiting up to ${DEPS_LOCK_TIMEOUT:-900}s"
      waited=1
      sleep 5
      continue
    fi
    if grep -q 'dpkg --configure -a' "$log" && [ -z "${configured:-}" ]; then
      # An earlier dpkg run was interrupted; finish it once, then retry.
      configured=1
      "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive dpkg --configure -a >>"$log" 2>&1 || true
      continue
    fi
    return 1
  done
}

if ! apt_retry update -q; then
  cat "$log" >&2
  die "apt-get update failed (see above); cannot install ${missing[*]}"
fi
if ! apt_retry install -y -q --no-install-recommends "${missing[@]}"; then
  tail -n 40 "$log" >&2
  die "apt-get install failed (see above); missing: ${missing[*]}"
fi
echo "deps: $gov; installed ${#missing[@]} system package(s): ${missing[*]}"
