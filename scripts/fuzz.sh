#!/usr/bin/env bash
# Builds tools/swin-opt-fuzz (libFuzzer + ASan/UBSan, assertions on) in
# build-fuzz/ and fuzzes swin-opt's parser, verifiers and rpe passes for a
# bounded time, starting from every .mlir test case. Exits non-zero on any
# finding (crash, assertion, sanitizer report, timeout, out-of-memory); the
# input is then in build-fuzz/findings/ and reproduces with
#   build-fuzz/bin/swin-opt-fuzz build-fuzz/findings/crash-...
#
#   scripts/fuzz.sh                         # 60 s
#   SWIN_FUZZ_TIME=600 scripts/fuzz.sh      # longer
#   scripts/fuzz.sh -seed=1                 # extra arguments go to libFuzzer
#   SWIN_FUZZ_RUNS=50000 scripts/fuzz.sh    # a fixed number of inputs from a
#                                           # fixed seed and a fresh corpus
#                                           # (what CI runs)
#
# Known upstream crash, not ours: MLIR 22.1's parser segfaults on a dense
# array of `index` (`{a = array<index: 1>}`, mlir-opt-22 too); the harness
# skips such inputs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$ROOT/build-fuzz"
FUZZ_TIME="${SWIN_FUZZ_TIME:-60}"
FUZZ_RUNS="${SWIN_FUZZ_RUNS:-}"

# OSS-Fuzz's flags: -O1 compiles the sanitized code much faster than -O3 at
# a small cost in executions per second; line tables for the reports.
source "$ROOT/scripts/configure.sh"
swin_configure "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only" -DSWIN_ENABLE_FUZZER=ON
# Only the target: swin-aot and the lit suite are not needed here.
cmake --build "$BUILD_DIR" --target swin-opt-fuzz

# Seeds: every test case of test/, one file per `// -----` split, made afresh
# each run so they follow the tests. New inputs the fuzzer finds accumulate
# in fuzz-corpus/ across local runs.
SEEDS="$BUILD_DIR/fuzz-seeds"
rm -rf "$SEEDS"
mkdir -p "$SEEDS" "$BUILD_DIR/fuzz-corpus" "$BUILD_DIR/findings"
find "$ROOT/test" -name '*.mlir' -print0 | sort -z |
  while IFS= read -r -d '' file; do
    base="$(basename "${file%.mlir}")"
    dir="$(basename "$(dirname "$file")")"
    awk -v out="$SEEDS/$dir-$base" '
      /^\/\/ -----/ { n++; next }
      { print > (out "-" n ".mlir") }' n=0 "$file"
  done
# A counted run starts from the seeds alone, with a fixed random seed and a
# number of inputs rather than a time: its work does not depend on the
# machine's speed (MLIR's pointer-keyed maps still vary the coverage a
# little from run to run). A time-bounded run grows fuzz-corpus/.
CORPUS="$BUILD_DIR/fuzz-corpus"
if [[ -n "$FUZZ_RUNS" ]]; then
  CORPUS="$BUILD_DIR/fuzz-corpus-reproducible"
  rm -rf "$CORPUS" && mkdir -p "$CORPUS"
  BOUND=(-runs="$FUZZ_RUNS" -seed="${SWIN_FUZZ_SEED:-1}")
  echo "fuzz: $(ls "$SEEDS" | wc -l) seeds from test/, $FUZZ_RUNS inputs, seed ${SWIN_FUZZ_SEED:-1}"
else
  BOUND=(-max_total_time="$FUZZ_TIME")
  echo "fuzz: $(ls "$SEEDS" | wc -l) seeds from test/, ${FUZZ_TIME} s"
fi

# A dictionary of the tokens the seeds are made of (op names, attribute
# names, keywords): mutations then splice whole tokens, not single bytes.
DICT="$BUILD_DIR/fuzz.dict"
cat "$SEEDS"/*.mlir | grep -v '^ *//' |
  grep -oE '[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*' | sort -u |
  awk 'length($0) > 1 { printf "\"%s\"\n", $0 }' >"$DICT"
# Extents at the verifiers' bounds and int64_t's: products of such extents
# overflowed in verifiers (test/Dialect/Rpe/invalid.mlir).
printf '"%s"\n' -1 1024 1025 65536 65537 16777216 4294967296 \
  4611686018427387904 9223372036854775807 >>"$DICT"

# Leaks are findings too (LeakSanitizer is on); an input that runs longer
# than 30 s is reported as a hang.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"
# Only our code is instrumented; libMLIR.so is not. Both allocate from the
# context's BumpPtrAllocators, whose inline code poisons a new slab in our
# objects and never unpoisons it in libMLIR's: ASan then reports MLIR's own
# allocations as use-after-poison. Manual poisoning is off so that only
# real errors are reported (the instrumented heap checks stay on).
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allow_user_poisoning=0"
# libFuzzer prints a line per new input: keep them in a log and show the
# summary, or the report when something was found.
LOG="$BUILD_DIR/fuzz.log"
status=0
"$BUILD_DIR/bin/swin-opt-fuzz" "$CORPUS" "$SEEDS" \
  -dict="$DICT" "${BOUND[@]}" -timeout=30 \
  -artifact_prefix="$BUILD_DIR/findings/" -print_final_stats=1 "$@" \
  >"$LOG" 2>&1 || status=$?
if ((status != 0)); then
  tail -n 80 "$LOG"
  echo "fuzz: FINDING (exit $status), input in $BUILD_DIR/findings/, log in $LOG" >&2
  exit "$status"
fi
grep -E '^(Done|stat::)' "$LOG" | sed 's/^/fuzz: /'
echo "fuzz: no findings ($(ls "$CORPUS" | wc -l) inputs in the corpus)"
