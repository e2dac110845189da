# The two commands of the README, plus bench. Each sets up its own
# dependencies (scripts/bootstrap.sh) and builds what it runs.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

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
