# flatline — developer entry points. `make` (or `make help`) lists them.

GO       ?= go
FUZZTIME ?= 1m
BENCH    ?= .
SHELL    := bash
.SHELLFLAGS := -eu -o pipefail -c

.DEFAULT_GOAL := help

# Go sources to format-check: everything but vendored code and testdata.
GOFILES = $(shell find . -name '*.go' -not -path './vendor/*' -not -path '*/testdata/*' -not -path './.git/*')

.PHONY: help build run test fuzz bench lint fmt-check vet clean screenshot check-rules helm-check

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)

# The Dockerfile builds with this target too, as `CGO_ENABLED=0 make build`:
# go build reads CGO_ENABLED (and GOFLAGS) from the environment, and with cgo
# off the binary is static.
build: ## build bin/flatline (flatline version prints VERSION, default: git describe)
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/flatline ./cmd/flatline

run: ## zero-setup demo: embedded Kafka, a Redis, serve and a simulated fleet
	$(GO) run ./cmd/flatline dev

# The end-to-end packages (internal/e2e/...) run after the others, two at a
# time: they keep fleets beating against real Redis and Kafka and mostly wait
# (timeouts, failovers, restarts), using about a third of 2 cores one at a
# time (213 s) and 58 % two at a time (126 s), with the same test times. (In
# the seed's first layout, end-to-end suites beside everything else starved
# each other's fleets; `-p 1` here is the fallback if that comes back.) Their
# test binaries are built beforehand (-run '^$' runs none of their tests), so
# that building one does not wait for the tests of another.
E2E_PKGS = ./internal/e2e/...
# The tests of the largest layout (4,096 shards) run without the race
# detector, which slows 4,096 scanners about tenfold on two cores; under
# -race they skip, saying so.
LARGE_TESTS = ^(TestFourThousandShards|TestDoublingToTheLargestLayoutUnderLoad)$$
test: lint ## gofmt check, go vet, all tests with -race (fuzz seed corpora included)
	$(GO) test -race -count=1 -p 2 -timeout 5m $$($(GO) list ./... | grep -v /internal/e2e/)
	$(GO) test -race -count=1 -p 2 -run '^$$' $(E2E_PKGS)
	$(GO) test -race -count=1 -p 2 -timeout 8m $(E2E_PKGS)
	$(GO) test -count=1 -timeout 8m -run '$(LARGE_TESTS)' -v ./internal/e2e/pipeline | grep -E '^(=== RUN|--- |PASS|FAIL|ok|\s+\S+_test.go)'

lint: fmt-check vet ## gofmt check and go vet

fmt-check: ## fail listing the files gofmt would change
	@unformatted="$$(gofmt -l $(GOFILES))"; \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt needed (run gofmt -w):"; echo "$$unformatted"; exit 1; \
	fi

vet: ## go vet ./...
	$(GO) vet ./...

fuzz: ## run every fuzz target for FUZZTIME (default 1m) each
	@found=0; \
	for pkg in $$($(GO) list ./...); do \
		list="$$($(GO) test -list '^Fuzz' "$$pkg")"; \
		for target in $$(grep '^Fuzz' <<<"$$list" || true); do \
			found=1; \
			echo "== $$pkg $$target ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
		done; \
	done; \
	if [ "$$found" = 0 ]; then echo "no fuzz targets found"; fi

# make bench: the end-to-end scenarios (about 12 min on 2 cores), a table on the
# terminal and bench/results/<run>.json. BENCH selects the Go micro-benchmarks,
# BENCH_COUNT repeats them (6 for benchstat), BENCH_ARGS goes to flatline-bench
# (e.g. BENCH_ARGS='-scale 0.5 -cpuprofile /tmp/fl'; see bin/flatline-bench -h).
bench: BENCH_COUNT ?= 1
bench: MICRO_PKGS ?= ./shard ./scanner ./ingest ./decode ./maintenance
bench: ## end-to-end benchmark: table + bench/results/<run>.json (BENCH, BENCH_COUNT, BENCH_ARGS)
	$(GO) build -o bin/flatline-bench ./bench/cmd/flatline-bench
	cd bench/peers && $(GO) build -o ../../bin/flatline-bench-peers .
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(BENCH_COUNT) $(MICRO_PKGS) | tee bin/bench-micro.txt
	bin/flatline-bench -peers bin/flatline-bench-peers -micro bin/bench-micro.txt $(BENCH_ARGS)

.PHONY: bench-large
bench-large: ## Redis memory per device at 10,000,000 devices against a bare ZSET (BENCH_ARGS)
	$(GO) build -o bin/flatline-bench ./bench/cmd/flatline-bench
	bin/flatline-bench -scenarios memory -mem-devices 10000000 $(BENCH_ARGS)

# make soak: flatline run the way a platform runs it for SOAK_DURATION
# (default 20m; at least 2m): two `flatline serve` on one redis-server and
# an in-process Kafka, 5,000 devices beating every second, probes and
# scrapes at platform cadence, a rolling restart, a third instance, shards
# scaled up and back, devices joining, leaving and going silent. It prints
# each resource's slope over the second half with a verdict, and 0 false /
# 0 missed timeouts, and writes bench/results/soak-<UTC time>.json; it
# fails when a verdict does. Takes about SOAK_DURATION + 1 minute.
SOAK_DURATION ?= 20m
.PHONY: soak
soak: ## SOAK_DURATION (default 20m) of steady load and platform disturbances: resource slopes, verdicts, bench/results/soak-*.json
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o bin/flatline ./cmd/flatline
	$(GO) build -o bin/flatline-soak ./bench/cmd/flatline-soak
	bin/flatline-soak -duration $(SOAK_DURATION) -flatline bin/flatline

check-rules: ## promtool: check deploy/prometheus/alerts.yml and run its unit tests (Debian package prometheus)
	promtool check rules deploy/prometheus/alerts.yml
	promtool test rules deploy/prometheus/alerts_test.yml

# Helm from the Go module proxy, pinned: CI (.ci/run) builds it once into
# bin/ (a few minutes on 2 cores); `make bin/helm` does the same here. The
# build is kept per version in the user's cache (like Go's module and build
# caches), so another clone on the same machine copies it instead of
# building it again; delete HELM_CACHE to rebuild.
HELM_VERSION ?= v3.22.0
HELM ?= bin/helm
HELM_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/flatline/helm-$(HELM_VERSION)
CHART := deploy/helm/flatline

bin/helm:
	@if [ ! -x "$(HELM_CACHE)/helm" ]; then \
		echo "GOBIN=$(HELM_CACHE) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)"; \
		GOBIN="$(HELM_CACHE)" $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION); \
	fi
	@mkdir -p bin
	cp "$(HELM_CACHE)/helm" bin/helm

# The chart's copy of the alert rules must equal deploy/prometheus/alerts.yml
# (the PrometheusRule reads it with .Files.Get, which cannot reach outside the
# chart); go test ./deploy checks the same and more.
helm-check: ## helm lint the chart, helm template it into bin/helm-template.yaml (needs bin/helm: make bin/helm)
	@$(HELM) version --short
	@cmp deploy/prometheus/alerts.yml $(CHART)/files/alerts.yml || \
		{ echo "$(CHART)/files/alerts.yml differs from deploy/prometheus/alerts.yml: cp deploy/prometheus/alerts.yml $(CHART)/files/alerts.yml"; exit 1; }
	$(HELM) lint --strict $(CHART)
	$(HELM) lint --strict $(CHART) --set serviceMonitor.enabled=true,prometheusRule.enabled=true
	@mkdir -p bin
	$(HELM) template flatline $(CHART) --set serviceMonitor.enabled=true,prometheusRule.enabled=true > bin/helm-template.yaml
	@echo "rendered: bin/helm-template.yaml"

screenshot: build ## refresh docs/status-page.png from `flatline dev` (needs chromium and python3)
	@log="$$(mktemp)"; trap 'rm -f "$$log"' EXIT; \
	bin/flatline dev --http 127.0.0.1:0 --duration 40s >"$$log" 2>&1 & pid=$$!; \
	addr=""; for _ in $$(seq 100); do \
		addr="$$(sed -n 's|.*status page: http://\([^/]*\)/.*|\1|p' "$$log")"; \
		[ -n "$$addr" ] && break; sleep 0.2; \
	done; \
	if [ -z "$$addr" ]; then cat "$$log"; kill "$$pid" 2>/dev/null; exit 1; fi; \
	python3 docs/screenshot.py "http://$$addr/" docs/status-page.png --wait 27; \
	wait "$$pid"

clean: ## remove build output and test caches
	rm -rf bin/
	$(GO) clean -testcache
