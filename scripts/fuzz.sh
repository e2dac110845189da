#!/usr/bin/env bash
# make fuzz: builds the libFuzzer targets of tests/fuzz with clang (ASan +
# UBSan, coverage-instrumented) in BUILD, then runs each for SECONDS on a
# scratch corpus seeded from tests/fuzz/corpus/<target>. Prints each
# target's executions; a crash, leak or failed check fails the run and
# leaves the input in BUILD/crashes/. FUZZ_MERGE=1 adds the inputs that
# found new coverage to the checked-in corpus (minimised, libFuzzer -merge).
# FUZZ_SANITIZE=undefined builds without ASan (STRAIT_FUZZ_SANITIZE), for more
# executions a second; use its own BUILD.
#
# usage: scripts/fuzz.sh BUILD SECONDS [TARGET...]   (TARGET: parse, api, ...)
set -euo pipefail
build=${1:?build directory}
seconds=${2:?seconds per target}
shift 2
src=$(cd "$(dirname "$0")/.." && pwd)
bash "$src/scripts/bootstrap.sh" clang libclang-rt-14-dev

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
CC=clang CXX=clang++ cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSTRAIT_FUZZ=ON -DSTRAIT_FUZZ_SANITIZE="${FUZZ_SANITIZE:-address,undefined}" "${launcher[@]}" >/dev/null

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$src"/tests/fuzz/*_fuzz.cc; do
    t=$(basename "$f" _fuzz.cc)
    targets+=("$t")
  done
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/%/_fuzz}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$build/crashes"
printf '%-12s %14s %10s %8s %8s\n' target executions exec/s seconds corpus
status=0
for t in "${targets[@]}"; do
  seeds="$src/tests/fuzz/corpus/$t"
  work="$build/corpus/$t"
  mkdir -p "$work" "$seeds"
  log="$build/fuzz-$t.log"
  limit=(-max_total_time="$seconds")
  [ -n "${FUZZ_RUNS:-}" ] && limit+=(-runs="$FUZZ_RUNS")
  dict=()
  [ -f "$src/tests/fuzz/$t.dict" ] && dict=(-dict="$src/tests/fuzz/$t.dict")
  rc=0
  start=$(date +%s)
  # -entropic=0: libFuzzer's entropic schedule (UpdateFeatureFrequency)
  # took more time than the API target itself, whose every input runs the
  # whole coverage-instrumented JSON and model code.
  "$build/tests/fuzz/${t}_fuzz" "${limit[@]}" -entropic=0 -print_final_stats=1 \
    -artifact_prefix="$build/crashes/$t-" "${dict[@]}" "$work" "$seeds" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  printf '%-12s %14s %10s %8s %8s\n' "$t" "${execs:-?}" "${rate:-?}" "$(($(date +%s) - start))" \
    "$(ls "$work" | wc -l)"
  if [ $rc -ne 0 ]; then
    echo "fuzz $t: failed (exit $rc); the input is in $build/crashes/, the log in $log:" >&2
    grep -m 20 -E 'ERROR|SUMMARY|check failed|runtime error|Test unit written' "$log" >&2 || tail -20 "$log" >&2
    status=1
  elif [ "${FUZZ_MERGE:-0}" = 1 ]; then
    "$build/tests/fuzz/${t}_fuzz" -merge=1 "$seeds" "$work" >>"$log" 2>&1
  fi
done
exit $status
