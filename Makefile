# The two commands of the README, plus bench. Each sets up its own
# dependencies (scripts/bootstrap.sh) and builds what it runs.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# make test SANITIZE=address,undefined: the whole suite under ASan+UBSan, in
# a build directory of its own (tests/README.md "Sanitizers").
SANITIZE ?=
ifneq ($(SANITIZE),)
comma := ,
BUILD := build-$(subst $(comma),-,$(SANITIZE))
CMAKE_FLAGS += -DSTRAIT_SANITIZE=$(SANITIZE) -DSTRAIT_BUILD_BENCH=OFF
export ASAN_OPTIONS ?= abort_on_error=1:detect_leaks=1
export LSAN_OPTIONS ?= suppressions=$(CURDIR)/tests/sanitizers/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS ?= print_stacktrace=1:halt_on_error=1
export TSAN_OPTIONS ?= halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/sanitizers/tsan.supp
endif

.PHONY: all deps build test demo bench meson-dpdk clean

all: build

deps:
	@bash scripts/bootstrap.sh

$(BUILD)/build.ninja: | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600 -j 1

demo: build
	bash scripts/demo.sh $(BUILD)

bench: build
	bash bench/run.sh $(BUILD) $(if $(QUICK),--quick,)

# DPDK built here from Debian's source, and straitd on it (meson-dpdk/
# README.md; root; about 13 minutes on 2 cores). Nothing else depends on it.
meson-dpdk: deps
	bash meson-dpdk/build.sh

clean:
	rm -rf $(BUILD)
