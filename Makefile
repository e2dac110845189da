# The two commands of the README, plus bench. Each sets up its own
# dependencies (scripts/bootstrap.sh) and builds what it runs.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# make test SANITIZE=address,undefined: the whole suite under ASan+UBSan, in
# a build directory of its own (tests/README.md "Sanitizers").
SANITIZE ?=
TSAN_DEFAULT_OPTIONS := halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/sanitizers/tsan.supp
# Extra ctest arguments, e.g. CTEST_ARGS='-L stress' (the threading stress tests).
CTEST_ARGS ?=
ifneq ($(SANITIZE),)
comma := ,
BUILD := build-$(subst $(comma),-,$(SANITIZE))
override CMAKE_FLAGS += -DSTRAIT_SANITIZE=$(SANITIZE) -DSTRAIT_BUILD_BENCH=OFF
export ASAN_OPTIONS ?= abort_on_error=1:detect_leaks=1
export LSAN_OPTIONS ?= suppressions=$(CURDIR)/tests/sanitizers/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS ?= $(TSAN_DEFAULT_OPTIONS)
# For tests/e2e (conftest.py): what straitd is built with, and where DPDK's
# memory goes under ASan (away from its shadow, where dpdk-dumpcap can map it).
export STRAIT_SANITIZE := $(SANITIZE)
ifneq ($(findstring address,$(SANITIZE)),)
export STRAIT_E2E_EAL ?= --base-virtaddr=0x200000000000
endif
endif

.PHONY: all deps build test tsan fuzz demo bench bench-neutron meson-dpdk clean

all: build

deps:
	@bash scripts/bootstrap.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# What the tests add: etcd for control/etcd/, and a real neutron-server
# (MariaDB, python3-neutron: about 8 minutes to install on a fresh machine)
# for networking-strait (tests/e2e/test_neutron.py).
TEST_PKGS := etcd-server etcd-client mariadb-server python3-neutron neutron-common python3-etcd3gw

test: build
	@bash scripts/bootstrap.sh $(TEST_PKGS)
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -j 1 $(CTEST_ARGS)

# The threading contracts (conntrack, publisher) under ThreadSanitizer: only
# the *_stress_test targets are built, in build-thread (tests/README.md).
TSAN_BUILD := build-thread
TSAN_TESTS := $(patsubst tests/%.cc,%,$(wildcard tests/*_stress_test.cc))
tsan: deps
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DSTRAIT_SANITIZE=thread -DSTRAIT_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target $(TSAN_TESTS)
	cd $(TSAN_BUILD) && TSAN_OPTIONS="$${TSAN_OPTIONS:-$(TSAN_DEFAULT_OPTIONS)}" \
	  ctest -L stress --output-on-failure --timeout 600 -j 1

# libFuzzer targets (tests/README.md "Fuzzing"), built with clang in
# build-fuzz, each run FUZZ_SECONDS (or FUZZ_RUNS inputs, within it);
# FUZZ_TARGETS='parse api' picks some; FUZZ_SANITIZE=undefined builds
# without ASan, in build-fuzz-undefined.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
FUZZ_RUNS ?=
FUZZ_SANITIZE ?=
fuzz: deps
	FUZZ_RUNS=$(FUZZ_RUNS) FUZZ_SANITIZE=$(FUZZ_SANITIZE) \
	  bash scripts/fuzz.sh build-fuzz$(if $(FUZZ_SANITIZE),-$(FUZZ_SANITIZE)) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

demo: build
	bash scripts/demo.sh $(BUILD)

bench: build
	bash bench/run.sh $(BUILD) $(if $(QUICK),--quick,)

# neutron-server drives Strait (etcd) and, in the same run, Debian's
# neutron-openvswitch-agent on OVS-DPDK (rabbitmq): ports to ACTIVE, rules to
# enforced, with ratios (bench/neutron_bench.py; QUICK=1: 10 ports, 3 rules).
BENCH_NEUTRON_PKGS := $(TEST_PKGS) neutron-openvswitch-agent rabbitmq-server openvswitch-switch-dpdk
bench-neutron: build
	@bash scripts/bootstrap.sh $(BENCH_NEUTRON_PKGS)
	/usr/bin/python3 bench/neutron_bench.py $(BUILD) $(if $(QUICK),--ports 10 --rules 3,)

# DPDK built here from Debian's source, and straitd on it (meson-dpdk/
# README.md; root; about 13 minutes on 2 cores). Nothing else depends on it.
meson-dpdk: deps
	bash meson-dpdk/build.sh

clean:
	rm -rf $(BUILD)
