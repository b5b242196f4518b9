SHELL := /bin/bash
# The README's test command is `make test`. It fails when code is not gofmt'd,
# go vet or staticcheck complains, the sqlc-generated code is stale, or a test
# fails (with the race detector on).
GO ?= go
SQLC = cd tools && $(GO) tool sqlc -f ../sqlc.yaml
# oapi-codegen turns api/openapi.yaml into internal/httpapi/apigen; it runs in
# tools/, so its paths are relative to that directory.
OAPI_CODEGEN = cd tools && $(GO) tool oapi-codegen -config ../api/oapi-codegen.yaml
API_GEN = internal/httpapi/apigen/apigen.gen.go
# The public Go client (package client) is generated from the same document
# with a configuration of its own.
OAPI_CODEGEN_CLIENT = cd tools && $(GO) tool oapi-codegen -config ../api/oapi-codegen-client.yaml
CLIENT_GEN = client/apiclient.gen.go
# staticcheck is built from tools/go.mod but runs in the directory it lints, so
# it loads that directory's module (./... of the main module, then test/deploy's).
STATICCHECK = $(GO) tool -modfile=$(CURDIR)/tools/go.mod staticcheck
TEST_FLAGS ?= -race -count=1 -timeout 25m

.PHONY: test fmt-check vet lint sqlc-check api-check go-test failover-test generate build image screenshots bench-report

test: fmt-check vet lint sqlc-check api-check go-test

fmt-check:
	@echo "== gofmt"
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	@echo "== go vet"
	$(GO) vet ./...

# staticcheck's default checks on every package and its tests; test/deploy is a
# module of its own. In files with the "Code generated ... DO NOT EDIT." header
# (sqlc, oapi-codegen, protobuf) staticcheck itself leaves out most checks'
# findings (it decides per check: style, simplification and unused code are
# left out, some correctness checks are not). A finding that is wrong for us is
# silenced on its line with //lint:ignore CHECK reason.
lint:
	@echo "== staticcheck"
	$(STATICCHECK) ./...
	cd test/deploy && $(STATICCHECK) ./...

sqlc-check:
	@echo "== sqlc diff and vet (generated code matches migrations/ and queries/)"
	$(SQLC) diff
	$(SQLC) vet

# Every package but test/failover, which takes minutes and has a target of
# its own (failover-test).
go-test:
	@echo "== go test $(TEST_FLAGS)"
	@$(GO) test $(TEST_FLAGS) -v $$($(GO) list ./... | grep -v '/test/failover$$') 2>&1 | tee go-test.out; status=$${PIPESTATUS[0]}; \
	echo "== summary: $$(grep -c '^=== RUN' go-test.out) tests run, $$(grep -c -- '--- PASS' go-test.out) passed, $$(grep -c -- '--- FAIL' go-test.out) failed, $$(grep -c -- '--- SKIP' go-test.out) skipped"; \
	grep -- '--- FAIL' go-test.out || true; \
	exit $$status

# The PostgreSQL failover test (test/failover): a pg_auto_failover formation
# whose primary is SIGKILLed five times under load on every lane. It needs
# pg_auto_failover (apt-get install postgresql-15-auto-failover
# pg-auto-failover-cli), geth (LEDGERQ_TEST_GETH) and a few minutes; `make
# test` leaves it out. Here a missing pg_autoctl is an error, not a skip.
failover-test:
	@echo "== failover test"
	@command -v pg_autoctl >/dev/null || { echo "pg_autoctl is not installed: apt-get install postgresql-15-auto-failover pg-auto-failover-cli" >&2; exit 1; }
	@$(GO) test -count=1 -timeout 15m -v ./test/failover/ 2>&1 | tee failover-test.out; status=$${PIPESTATUS[0]}; \
	if [ "$$status" = 0 ] && ! grep -q -- '--- PASS: TestFailover_' failover-test.out; then \
		echo "the failover test did not run (skipped?)" >&2; status=1; \
	fi; \
	exit $$status

api-check:
	@echo "== oapi-codegen (the server's and the client's generated code match api/openapi.yaml)"
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	($(OAPI_CODEGEN) -o "$$tmp/apigen.gen.go" ../api/openapi.yaml) || exit 1; \
	diff -u $(API_GEN) "$$tmp/apigen.gen.go" || { echo "$(API_GEN) is stale: run make generate"; exit 1; }; \
	($(OAPI_CODEGEN_CLIENT) -o "$$tmp/apiclient.gen.go" ../api/openapi.yaml) || exit 1; \
	diff -u $(CLIENT_GEN) "$$tmp/apiclient.gen.go" || { echo "$(CLIENT_GEN) is stale: run make generate"; exit 1; }

# go generate also writes docs/configuration.md from the settings'
# declarations (ledgerq config docs; a test fails when it is stale).
generate:
	$(SQLC) generate
	$(OAPI_CODEGEN) -o ../$(API_GEN) ../api/openapi.yaml
	$(OAPI_CODEGEN_CLIENT) -o ../$(CLIENT_GEN) ../api/openapi.yaml
	$(GO) generate ./...

build:
	$(GO) build -o bin/ledgerq ./cmd/ledgerq

# The container image ledgerq:local, built without a registry (docs/deployment.md).
image:
	deploy/build-image.sh

# The README's and docs/console.md's pictures of the console (docs/img/console-*.png):
# the browser test drives a `ledgerq dev` in headless Chromium and saves them there.
# Needs Chromium (apt-get install chromium) and a test PostgreSQL (as make test).
screenshots:
	LEDGERQ_SCREENSHOTS_DIR=$(CURDIR)/docs/img $(GO) test -count=1 -run 'TestConsole_InABrowser' -v ./test/integration/

# The Performance table (docs/benchmarking.md): every lane's `ledgerq bench` (and River's
# benchmark) in interleaved rounds, each run on a fresh database of the server
# at LEDGERQ_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres);
# the markdown table on stdout. BENCH_REPORT_FLAGS="--quick --rounds 1" for a
# smoke check; bench/report.sh --help for the rest.
bench-report:
	bench/report.sh $(BENCH_REPORT_FLAGS)
