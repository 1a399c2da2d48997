# azsessions: the two commands of the README.
#   make demo   installs what the emulator needs (Debian/Ubuntu) and runs the quickstart
#   make test   installs the same and runs every module's tests (-race, all go vet checks)
GO ?= go
# Modules of the repository (see go.work).
MODULES := . ./cmd/azsessions-mcp ./examples/agent ./adapters/openai ./adapters/anthropic ./adapters/langchaingo
# Debian packages the sandboxed emulator uses (runsc: gVisor, for -sandbox gvisor).
DEBIAN_PACKAGES := bubblewrap python3 python3-ipython python3-numpy python3-pandas python3-matplotlib python3-tz runsc
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
BENCHTIME ?= 1x

.PHONY: demo test test-inspector deps lint vet cross bench bench-smoke emulator

demo: deps
	$(GO) run ./examples/quickstart

# One go test over every module of go.work: the packages of all modules are
# scheduled together, so the adapters and the MCP server (with the README's MCP
# Inspector commands, TestInspectorCLI) build and test while the long sandbox
# package runs. -vet=all runs every go vet check on each package as part of the
# same race build (a separate `go vet` would compile every dependency a second
# time without -race). GORACE=atexit_sleep_ms=0: a race-built binary sleeps 1 s
# at exit by default, holding one of go test's package slots (and the sandbox
# tests' helper processes) for nothing; the 21 small packages took 38-40 s
# instead of 43-49 s with it (BENCHMARKS.md, "Test suite").
test: deps
	@echo "== go test -race -vet=all $(MODULES)"
	GORACE=atexit_sleep_ms=0 AZSESSIONS_REQUIRE_SANDBOX=1 AZSESSIONS_TEST_INSPECTOR=1 $(GO) test -race -vet=all -count=1 -timeout 20m $(addsuffix /...,$(MODULES))

# bench-smoke runs every benchmark once (-short: the default preload set, bwrap
# only) from the race test binaries `make test` built, so nothing is compiled
# again: it proves the benchmarks still work, their figures mean nothing (see
# BENCHMARKS.md and `make bench`). CI (.ci/run) runs it after `make test`.
bench-smoke:
	@echo "== benchmarks run once (-short: the default preload only, bwrap only)"
	AZSESSIONS_REQUIRE_SANDBOX=1 $(GO) test -race -short -run '^$$' -bench . -benchtime $(BENCHTIME) ./...

# test-inspector runs the README's `npx @modelcontextprotocol/inspector --cli`
# commands against the built azsessions-mcp (skipped when npx is missing; the
# first run downloads the inspector, about 110 MB, within the test's 8-minute bound).
test-inspector:
	cd cmd/azsessions-mcp && AZSESSIONS_TEST_INSPECTOR=1 AZSESSIONS_REQUIRE_SANDBOX=1 $(GO) test -race -count=1 -timeout 15m -run 'TestInspectorCLI' -v .

# lint runs staticcheck on the root module (clean as of 0.2.0). .ci/run runs
# it after make test: 24-43 s of CPU with a warm cache (53 s wall on the 2-core
# machine under load, minutes when other jobs take the cores); the first run
# downloads and builds staticcheck through the module proxy.
lint:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# One go vet over every module of go.work (packages checked in parallel).
vet:
	@echo "== go vet $(MODULES)"
	$(GO) vet $(addsuffix /...,$(MODULES))

# cross runs go vet (which compiles the tests too) for macOS and Windows: the
# client, the fake (azsessionstest), the emulator with its scripted executors
# and the commands must build there; only the sandbox (internal/sandbox,
# bubblewrap/gVisor) is Linux-only. .ci/run runs it after make lint. The
# adapters are left out (their code has nothing OS-specific and reaches the
# sandbox only through azsessionstest, checked here; vetting their SDKs for
# each target took minutes with a cold cache).
CROSS_MODULES := . ./cmd/azsessions-mcp ./examples/agent
CROSS_TARGETS := darwin/arm64 windows/amd64
cross:
	@for t in $(CROSS_TARGETS); do \
		echo "== GOOS/GOARCH=$$t go vet $(CROSS_MODULES)"; \
		GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) vet $(addsuffix /...,$(CROSS_MODULES)) || exit 1; \
	done

# deps installs the Debian packages when one is missing (with sudo when not root).
deps:
	@if command -v dpkg >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then \
		missing=""; \
		for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
		if [ -n "$$missing" ]; then \
			echo "== installing$$missing"; \
			$(SUDO) apt-get update -qq && \
			$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
		fi; \
	else \
		echo "not a Debian/Ubuntu system: install bubblewrap, gVisor (runsc, https://gvisor.dev/docs/user_guide/install/) and python3 with IPython, numpy, pandas, matplotlib and pytz by hand (see README)"; \
	fi

emulator: deps
	$(GO) run ./cmd/azsessions-emulator

# bench runs every benchmark with the heavy cases (1 GiB transfers, 1,000
# sessions, 10/50 concurrent sandboxes) and the process-level transfer figures
# (peak RSS of a client process); see BENCHMARKS.md. Compare runs with
# `go run golang.org/x/perf/cmd/benchstat@latest bench.txt`.
bench: deps
	AZSESSIONS_REQUIRE_SANDBOX=1 AZSESSIONS_BENCH_LARGE=1 $(GO) test -run '^$$' -bench . -benchmem -count 6 -timeout 90m ./... | tee bench.txt
	$(GO) run ./internal/cmd/benchtransfer transfer -sizes 16MiB,120MiB,1GiB -runs 5 | tee bench-transfer.md
