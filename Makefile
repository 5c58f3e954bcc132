# gpuaccept — build, test and lab targets. Lab targets need root on Linux.
GO        ?= go
LAB_HOSTS ?= 4
LAB_CAP   ?=
LAB       := bash scripts/lab/lab.sh

.PHONY: build demo test unit lint deps lab-up lab-down bench kubetest

# -buildvcs=auto: the commit goes into the binary (and the reports' sign-off)
# whatever GOFLAGS says, when there is a git checkout to read it from.
build:
	$(GO) build -buildvcs=auto -o bin/gpuaccept ./cmd/gpuaccept

# A whole window on four simulated nodes: no root, no network. It exits 1 on
# purpose (one node fails its GPU diagnostic); make does not count that.
demo: build
	@bin/gpuaccept demo || [ $$? -eq 1 ]

# The whole suite, lab included: installs the lab's packages when missing
# (root), and tears down every test lab whatever the outcome.
# scripts/test.sh runs it in two halves at once, one package at a time in
# each: the lab tests measure tc-shaped links and node timings, which more
# packages sharing two cores would starve.
test: deps
	@rc=0; GO=$(GO) bash scripts/test.sh || rc=$$?; \
	  bash scripts/lab/cleanup-test-labs.sh || rc=1; exit $$rc

# The Kubernetes transport against the lab's two-node cluster, whole: the
# executor contract, windows through the API, a coordinator killed and
# resumed. make test runs it too, less the contract's output-bounds item:
# the lab's containerd cuts an exec carrying 16 MiB in about half the runs
# on an idle machine and most under load (reported as a lost node, never as
# short output), so make kubetest fails that often.
# The binaries take 6-7 minutes to build on a fresh 2-core machine (cached
# in /var/cache/gpuaccept after).
kubetest:
	@bash scripts/deps.sh kube
	$(GO) test -race -count=1 -timeout 40m ./remote/kubetest

# Pure and in-process tests only: no root, no lab.
unit:
	GPUACCEPT_NO_LAB=1 $(GO) test -race -count=1 ./...

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

deps:
	@bash scripts/deps.sh

# The lab of inventories/lab.yaml, with stand-in GPU tools on every host:
# h3 has another driver and h4 a failing GPU diagnostic, the rest are sound.
LAB_PROFILES ?= h100 h100 h100-other-driver h100-diag-fail
lab-up: deps
	$(GO) build -o bin/standin ./scripts/standins/cmd/standin
	$(LAB) up --hosts $(LAB_HOSTS) $(if $(LAB_CAP),--cap $(LAB_CAP))
	@i=1; for p in $(LAB_PROFILES); do [ $$i -le $(LAB_HOSTS) ] || break; \
	  bin/standin --install /tmp/gpuaccept-lab-lab/hosts/h$$i/bin --profile $$p; i=$$((i+1)); done; \
	  while [ $$i -le $(LAB_HOSTS) ]; do bin/standin --install /tmp/gpuaccept-lab-lab/hosts/h$$i/bin --profile h100; i=$$((i+1)); done
	bash scripts/standins/nccl/build.sh /tmp/gpuaccept-lab-lab/nccl
	@for d in /tmp/gpuaccept-lab-lab/hosts/h*/bin; do ln -sf /tmp/gpuaccept-lab-lab/nccl/*_perf $$d/; done

lab-down:
	$(LAB) down

# Figures, not assertions: fan-out vs pdsh on 32 hosts, upload vs scp; an
# image archive pushed to 16 hosts at 200 Mbit/s against naive copies; a
# whole window at 256 and 1,000 simulated nodes (coordinator CPU, memory,
# bundle, report load time, per phase); mpirun's launch over 16..128 lab
# hosts; the bisection on 64 lab hosts in leaves with a slow host, link and
# leaf uplink; the load generator's streams and requests per core; the
# coordinator's telemetry sinks at 100 and 1,000 nodes (CPU, heap, bundle).
bench: deps
	@rc=0; $(GO) run ./remote/bench || rc=$$?; $(LAB) down --name bench; \
	  $(GO) run ./orchestrator/bench || rc=$$?; $(LAB) down --name ibench; \
	  $(GO) run ./orchestrator/launchbench || rc=$$?; $(LAB) down --name lbench; \
	  $(GO) run ./orchestrator/bisectbench -hosts 64,128 || rc=$$?; $(LAB) down --name bbench; \
	  $(GO) run ./orchestrator/fleetbench -nodes 256,1000 || rc=$$?; \
	  $(GO) run ./orchestrator/srunbench -hosts 32,127 || rc=$$?; $(LAB) down --name sbench; \
	  GOMAXPROCS=1 $(GO) test -run '^$$' -bench Streams -benchtime 1x ./loadgen || rc=$$?; \
	  $(GO) test -run '^$$' -bench TelemetryFleet -benchtime 1x ./orchestrator/phases || rc=$$?; \
	  $(GO) test -run '^$$' -bench TelemetryCharts -benchtime 1x ./reports || rc=$$?; exit $$rc
