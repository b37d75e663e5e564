# outlierd: make demo (the main job on an embedded default), make test (every test).
SHELL := /bin/bash
GO ?= go
BIN := bin/outlierd
# Fuzz budget per target inside `make test`: a count of executions (about 2-8 s each here), not a
# duration, because Go 1.26's fuzz coordinator can fail a duration run with a bare "context
# deadline exceeded" at its end on a loaded machine, with no failing input (golang/go#75804,
# fixed in Go 1.27); a count has no deadline to race. The long run: `make fuzz FUZZTIME=5m`.
FUZZTIME ?= 50000x
# make demo runs this long (make demo DEMO_DURATION=0 runs until Ctrl-C).
DEMO_DURATION ?= 60s

.PHONY: all build test vet unit fuzz bench demo cuda cuda-check ptx clean kafka-start kafka-stop

all: build

# VERSION is what `outlierd version` prints (main.version): the tag or commit of the tree.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/outlierd

# test: formatting and vet, then every package's tests with a real local Apache Kafka broker up
# (started by .ci/kafka.sh, stopped on exit; tests that need it read KAFKA_BOOTSTRAP), then
# each fuzz target briefly.
test: vet unit fuzz

# vet: gofmt, go vet, staticcheck over the CPU and CUDA builds (.ci/staticcheck.sh), go.mod
# tidy, no fused multiply-add in the module's code (.ci/nofma.sh: the CPU twins' bits on every
# platform), and no non-test Go file over 600 lines (split such a file by concept).
vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	GO=$(GO) .ci/staticcheck.sh
	$(GO) mod tidy -diff
	GO=$(GO) .ci/nofma.sh
	@long=$$(git ls-files '*.go' ':!:*_test.go' | xargs wc -l | awk '$$2 != "total" && $$1 > 600 {print $$2 " (" $$1 " lines)"}'); \
	  if [ -n "$$long" ]; then echo "non-test Go files over 600 lines: $$long"; exit 1; fi

unit:
	.ci/with-kafka.sh $(GO) test -count=1 -timeout 40m ./...

# Each fuzz target runs alone (go test -fuzz takes one target per package per run).
FUZZ_TARGETS := $(shell grep -rl --include='*_test.go' '^func Fuzz' . 2>/dev/null | sort)
fuzz:
	@for f in $(FUZZ_TARGETS); do \
	  dir=$$(dirname $$f); \
	  for t in $$(grep -o '^func Fuzz[A-Za-z0-9_]*' $$f | sed 's/^func //'); do \
	    echo "fuzz $$dir $$t ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./$$dir >/tmp/outlierd-fuzz.log 2>&1 || { cat /tmp/outlierd-fuzz.log; exit 1; }; \
	  done; \
	done

# bench: the figures of docs/BENCHMARKS.md (one run each; see that file for the commands of each row).
bench:
	.ci/with-kafka.sh $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./...

demo:
	$(GO) run ./cmd/outlierd demo --duration $(DEMO_DURATION)

# cuda: the GPU build. bin/outlierd-cuda is built with -tags cuda and needs the NVIDIA driver to
# start at all (gorgonia.org/cu loads libcuda.so.1 at start-up); bin/outlierd, the CPU build,
# hands device commands over to it when it starts on the machine (cmd/outlierd/companion.go), so
# ship both side by side. Also builds the kernel tests. .ci/cuda.sh fetches cuda.h and the
# libcuda stub once into ~/.cache/outlierd/cuda (or set CGO_CFLAGS/CGO_LDFLAGS to your toolkit).
cuda: build
	eval "$$(.ci/cuda.sh)" && $(GO) build -tags cuda -o $(BIN)-cuda ./cmd/outlierd && \
	  $(GO) test -c -tags cuda -o .gpubuild/gpukern.test ./gpukern/

# cuda-check: compile-only check of the CUDA build (CI has no GPU), so it never rots.
cuda-check:
	eval "$$(.ci/cuda.sh)" && $(GO) vet -tags cuda ./... && $(GO) build -tags cuda -o /dev/null ./cmd/outlierd && \
	  $(GO) test -c -tags cuda -o /dev/null ./gpukern/

# ptx: regenerate the committed PTX from gpukern/*.cu (needs nvcc 11.8; nobody else needs nvcc).
ptx:
	$(MAKE) -C gpukern ptx

# A local broker for the README's quickstart (and the tests): 127.0.0.1:$KAFKA_PORT, default
# 39092 (KAFKA_PORT=39392 make kafka-start for another); see .ci/kafka.sh.
kafka-start:
	.ci/kafka.sh start
kafka-stop:
	.ci/kafka.sh stop

clean:
	rm -rf bin .gpubuild
