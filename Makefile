# Accord's two commands for a newcomer: `make run` and `make test`.
# Everything else here is a step they need.

SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin:$(HOME)/go/bin
export DATABASE_URL ?= postgres://127.0.0.1:5432/accord?sslmode=disable
export CGO_ENABLED ?= 0

VENDOR := static/vendor/htmx.min.js static/vendor/echarts.min.js

.PHONY: run test test-long test-setup assets generate build bench check-generated probe-binaries clean

## run: set everything up and serve Accord with demo data on http://localhost:8080
run: build
	@bash .ci/ensure-tools.sh
	@bash .ci/ensure-postgres.sh
	ACCORD_DEV=true ACCORD_PROBE_DIR=$(CURDIR)/bin ./bin/accord serve

# The long tier: the end-to-end tests, which take the demo lab's real runs
# to their verdicts (through the browser, accord submit, a server crash),
# and acceptance's Monte-Carlo simulations. About 130 of the suite's 650
# CPU-seconds on a busy morning: without them make test takes 3 to 5
# minutes on the 2-core machine (2 min 52 s to 3 min 42 s on a quiet
# afternoon, 4 min 35 s to 5 min 21 s on a busy morning). test-long runs them in
# every package that has one (found by name), so that a long test added
# anywhere runs there.
LONG_NAMES := Test(EndToEnd|Simulation)
LONG_TESTS := ^$(LONG_NAMES)
LONG_PACKAGES = $(sort $(dir $(shell grep -rlE --include='*_test.go' --exclude-dir=node_modules '^func $(LONG_NAMES)' .)))

# -ldflags=-w: test binaries without DWARF link in about 30 % less CPU
# (every package's binary is linked again on every run); stack traces
# are unchanged. bin/accord-test is the accord binary the tests run as
# server, worker and probe, built once for all of them (sshtest.BuildAccord).
GO_TEST = ACCORD_TEST_BINARY=$(CURDIR)/bin/accord-test \
	TEST_DATABASE_URL=$${TEST_DATABASE_URL:-postgres://127.0.0.1:5432/postgres?sslmode=disable} \
	go test -count=1 -timeout 20m -ldflags=-w

## test: the tests, without the long tier (as root it installs what the
## tests need: .ci/ensure-test-tools.sh). CI runs the long tier after it.
test: test-setup
	$(GO_TEST) -skip '$(LONG_TESTS)' ./...
	@echo "make test: passed; the long tier ($(LONG_TESTS)) is make test-long, which CI runs too"

## test-long: the long tier only (CI's step after make test)
test-long: test-setup
	$(GO_TEST) -run '$(LONG_TESTS)' $(LONG_PACKAGES)

test-setup: assets generate
	@bash .ci/ensure-test-tools.sh
	@DATABASE_URL=postgres://127.0.0.1:5432/postgres?sslmode=disable bash .ci/ensure-postgres.sh
	go build -ldflags "-s -w" -o bin/accord-test .

## bench: the performance figures (see README: Benchmarks)
bench: assets generate
	go test -run '^$$' -bench . -benchtime 1x -timeout 60m ./...

# Browser libraries from npm (package-lock.json), copied into static/vendor
# and embedded in the binary; nothing is loaded from another host.
assets: $(VENDOR)
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@
static/vendor/htmx.min.js: node_modules/.package-lock.json
	cp node_modules/htmx.org/dist/htmx.min.js $@
static/vendor/echarts.min.js: node_modules/.package-lock.json
	cp node_modules/echarts/dist/echarts.min.js $@

generate:
	go tool templ generate -log-level error

## check-generated: fail when the committed *_templ.go files are stale
check-generated: generate
	@git diff --exit-code -- '*_templ.go' || (echo "templ generate changed files: commit them" && exit 1)

build: assets generate probe-binaries
	go build -trimpath -ldflags "-X main.version=$$(git describe --always --dirty 2>/dev/null || echo dev)" -o bin/accord .

## probe-binaries: static accord binaries for lab hosts of both architectures,
## each rebuilt only when what it is built from changed
probe-binaries: bin/accord-linux-amd64 bin/accord-linux-arm64

# What a build of accord is made from: its Go files (tests aside), go.mod
# and go.sum, and the files it embeds.
BUILD_INPUTS := go.mod go.sum $(VENDOR) $(shell find . \( -path ./node_modules -o -path ./bin -o -path ./tmp -o -path ./data -o -path ./test-artifacts -o -path ./.git \) -prune -o \
	-type f \( \( -name '*.go' ! -name '*_test.go' \) -o -path './static/*' -o -path './migrations/*.sql' -o -name '*.xsd' \) -print)

# Without the symbol table and DWARF (-s -w): a quarter smaller to upload
# to every lab host; stack traces keep their function names and lines.
bin/accord-linux-%: $(BUILD_INPUTS)
	GOOS=linux GOARCH=$* go build -trimpath -ldflags "-s -w" -o $@ .

clean:
	rm -rf bin static/vendor/*.js
