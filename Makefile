# Switchboard. `make run` runs the app, `make test` runs every test; both
# install what they need the first time.
GO        ?= go
TAGS      := sqlite_omit_load_extension
BIN       := bin/switchboard
RUN_ARGS  ?=
export CGO_ENABLED := 1

.PHONY: all deps build run serve test test-go test-gui bench vet fmt clean

all: build

bin/.deps-ok: packaging/linux/deps.sh
	@mkdir -p bin
	@packaging/linux/deps.sh
	@touch $@

deps: bin/.deps-ok

build: deps
	$(GO) build -tags $(TAGS) -o $(BIN) ./cmd/switchboard

# The tray app with the pool in-process (a starter config is written on
# first run). `make serve` runs the same pool headless.
run: build
	$(BIN) $(RUN_ARGS)

serve: build
	$(BIN) serve

# vet, staticcheck and the race tests share one cgo build through GOFLAGS.
test: deps
	@mkdir -p artifacts
	GOFLAGS="-race -tags=$(TAGS)" $(GO) vet ./...
	GOFLAGS="-race -tags=$(TAGS)" $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	GOFLAGS="-race -tags=$(TAGS)" $(GO) run gotest.tools/gotestsum@v1.13.0 --format testname \
		--junitfile artifacts/junit.xml -- -count=1 -timeout 20m ./...
	@if [ -x ui/smoke/run.sh ]; then $(MAKE) --no-print-directory test-gui; fi

test-gui: deps
	@mkdir -p artifacts
	dbus-run-session -- xvfb-run -a -s '-screen 0 1024x768x24' ui/smoke/run.sh

# Benchmarks and the load tool; never part of `make test`'s pass/fail.
bench: build
	GOFLAGS="-tags=$(TAGS)" $(GO) test -run '^$$' -bench . -benchmem ./...

vet:
	GOFLAGS="-tags=$(TAGS)" $(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin artifacts
