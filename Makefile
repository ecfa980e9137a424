# Coffer: `make demo` runs the walkthrough, `make test` runs every test.
# Both install what is missing first (libsodium-dev, libsqlite3-dev, pkg-config, sqlite3 via apt-get).
# The tests run through .ci/with-postgres: a throwaway PostgreSQL (installed with apt-get when
# missing) unless COFFER_TEST_POSTGRES names one (a postgres:// URL) or is `skip`.

SWIFT ?= swift
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_PACKAGES := libsodium-dev libsqlite3-dev pkg-config sqlite3

.PHONY: deps build demo test test-tsan bench install uninstall clean docs

deps:
	@if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists libsodium || ! pkg-config --exists sqlite3 || ! command -v sqlite3 >/dev/null 2>&1; then \
		echo "Installing $(APT_PACKAGES) with apt-get (libsodium, SQLite headers or the sqlite3 shell missing)"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(APT_PACKAGES); \
	fi

build: deps
	$(SWIFT) build

demo: build
	$(SWIFT) run coffer demo

# Two test processes, one after the other (see .ci/test-parts), on one throwaway PostgreSQL.
test: deps
	$(SWIFT) build --build-tests
	SWIFT=$(SWIFT) bash .ci/with-postgres bash .ci/test-parts

# The store's tests under ThreadSanitizer (a build of its own, in .build-tsan), one at a time:
# run in parallel on two cores, ThreadSanitizer slows them so much that PostgreSQL connections
# take longer than the tests' 10 s connect timeout (one at a time, 431 tests took 9 min on 2026-11-26).
test-tsan: deps
	bash .ci/with-postgres $(SWIFT) test --scratch-path .build-tsan --sanitize=thread --no-parallel --filter CofferStoreTests

bench: deps
	$(SWIFT) build -c release --product coffer-bench --scratch-path .build-release
	.build-release/release/coffer-bench $(BENCH_ARGS)

# Builds the DocC archives of CofferStore, CofferCrypto and CofferVault into .build-docs/plugins/Swift-DocC/outputs.
docs: deps
	$(SWIFT) package --scratch-path .build-docs generate-documentation \
		--target CofferStore --target CofferCrypto --target CofferVault

# `make install PREFIX=~/.local`: a release build of coffer, its man page (made by
# swift-argument-parser's generate-manual plugin from the command's own help) and its shell
# completions for bash, zsh and fish. DESTDIR stages the files elsewhere (for packaging).
# CONFIG=debug installs the debug build of .build instead (quick; what CI checks).
PREFIX ?= /usr/local
CONFIG ?= release
SCRATCH := $(if $(filter debug,$(CONFIG)),.build,.build-release)
ROOT := $(DESTDIR)$(PREFIX)

install: deps
	$(SWIFT) build -c $(CONFIG) --product coffer --scratch-path $(SCRATCH)
	$(SWIFT) package --scratch-path $(SCRATCH) plugin generate-manual --configuration $(CONFIG) \
		--authors "The Coffer authors" --section 1
	install -d "$(ROOT)/bin" "$(ROOT)/share/man/man1" "$(ROOT)/share/bash-completion/completions" \
		"$(ROOT)/share/zsh/site-functions" "$(ROOT)/share/fish/vendor_completions.d"
	install -m 0755 "$$($(SWIFT) build -c $(CONFIG) --scratch-path $(SCRATCH) --show-bin-path)/coffer" "$(ROOT)/bin/coffer"
	install -m 0644 "$$(find $(SCRATCH)/plugins -path '*GenerateManual*' -name coffer.1 | head -n 1)" "$(ROOT)/share/man/man1/coffer.1"
	"$(ROOT)/bin/coffer" --generate-completion-script bash > "$(ROOT)/share/bash-completion/completions/coffer"
	"$(ROOT)/bin/coffer" --generate-completion-script zsh > "$(ROOT)/share/zsh/site-functions/_coffer"
	"$(ROOT)/bin/coffer" --generate-completion-script fish > "$(ROOT)/share/fish/vendor_completions.d/coffer.fish"
	@echo "Installed coffer in $(ROOT)/bin, its man page and bash, zsh and fish completions under $(ROOT)/share"

uninstall:
	rm -f "$(ROOT)/bin/coffer" "$(ROOT)/share/man/man1/coffer.1" "$(ROOT)/share/bash-completion/completions/coffer" \
		"$(ROOT)/share/zsh/site-functions/_coffer" "$(ROOT)/share/fish/vendor_completions.d/coffer.fish"

clean:
	rm -rf .build .build-release .build-tsan
