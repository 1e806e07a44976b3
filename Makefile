# Thin wrapper over CMake: `make` builds, `make test` runs the suite, `make asan` runs it under
# AddressSanitizer + UndefinedBehaviorSanitizer, `make demo` shows halo at work.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all deps test asan demo fuzz clean

all: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

deps:
	@scripts/deps.sh

test: all
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

asan: deps
	@cmake -S . -B build-asan -DHALO_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS) >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS)

# The demo builds quietly (the log is kept) so its output is the demo itself.
demo: deps
	@cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	@echo "building halo (log: $(BUILD)/build.log) ..."
	@cmake --build $(BUILD) -j $(JOBS) >$(BUILD)/build.log 2>&1 || { tail -40 $(BUILD)/build.log; exit 1; }
	@scripts/demo.sh $(BUILD)

fuzz:
	@scripts/deps.sh fuzz
	@CC=clang cmake -S . -B build-fuzz -DHALO_FUZZ=ON -DHALO_SANITIZE=ON >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_gguf fuzz_gguf_seeds fuzz_text fuzz_model \
		fuzz_serve

clean:
	rm -rf $(BUILD) build-asan build-fuzz
