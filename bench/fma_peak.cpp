// fma_peak.cpp - measure this machine's single-precision FMA peak.
//
// Each thread runs a loop of independent fused multiply-adds on 12 vector
// accumulators (enough to cover the FMA latency x throughput of current x86
// cores: 2 FMA pipes x 4-5 cycles), so the loop is bound by FMA throughput,
// not latency, and touches no memory.  Two widths are measured:
//
//   avx2    8-lane  __m256 with _mm256_fmadd_ps  (needs AVX2 + FMA)
//   avx512  16-lane __m512 with _mm512_fmadd_ps  (only when the CPU has AVX-512F)
//
// each on 1 thread ("per core") and on T threads at once (std::thread, one per
// core by default).  FLOPs are counted as 2 per lane per FMA.  The best of
// several timed rounds is reported.
//
// Usage:  fma_peak [--threads T] [--seconds S]
// Output: one JSON object on stdout, e.g.
//   {"threads": 2, "results": [{"isa": "avx2", "threads": 1, "gflops": 99.8}, ...],
//    "peak_1t": 199.1, "peak_all": 397.0, "peak_isa": "avx512"}
// peak_1t / peak_all are the best widths' numbers.
//
// Build: c++ -O3 -march=native -pthread fma_peak.cpp -o fma_peak
// (the wide kernels are compiled with target attributes and only called when
// the running CPU supports them, so -march=native is not required.)

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kAccumulators = 12;

// One FMA per accumulator, written as inline assembly so the compiler can
// neither drop, merge nor constant-fold the chains (with intrinsics, clang
// proved some of the 12 chains redundant and removed them).  `acc = acc * a + b`
// (vfmadd213ps) converges to b / (1 - a) = 1: no overflow, no denormals.
#define FMA12(INSN, CONSTRAINT)                                                          \
  asm volatile(INSN " %[a], %[b], %[r0]\n\t" INSN " %[a], %[b], %[r1]\n\t"                \
               INSN " %[a], %[b], %[r2]\n\t" INSN " %[a], %[b], %[r3]\n\t"                \
               INSN " %[a], %[b], %[r4]\n\t" INSN " %[a], %[b], %[r5]\n\t"                \
               INSN " %[a], %[b], %[r6]\n\t" INSN " %[a], %[b], %[r7]\n\t"                \
               INSN " %[a], %[b], %[r8]\n\t" INSN " %[a], %[b], %[r9]\n\t"                \
               INSN " %[a], %[b], %[r10]\n\t" INSN " %[a], %[b], %[r11]"                    \
               : [r0] "+" CONSTRAINT(acc[0]), [r1] "+" CONSTRAINT(acc[1]),                 \
                 [r2] "+" CONSTRAINT(acc[2]), [r3] "+" CONSTRAINT(acc[3]),                 \
                 [r4] "+" CONSTRAINT(acc[4]), [r5] "+" CONSTRAINT(acc[5]),                 \
                 [r6] "+" CONSTRAINT(acc[6]), [r7] "+" CONSTRAINT(acc[7]),                 \
                 [r8] "+" CONSTRAINT(acc[8]), [r9] "+" CONSTRAINT(acc[9]),                 \
                 [r10] "+" CONSTRAINT(acc[10]), [r11] "+" CONSTRAINT(acc[11])              \
               : [a] CONSTRAINT(b), [b] CONSTRAINT(a))

// Runs `iters` iterations of 12 independent 8-lane FMAs; returns a value that
// depends on every accumulator.
__attribute__((target("avx2,fma"), noinline)) float fmaLoopAvx2(std::int64_t iters) {
  const __m256 a = _mm256_set1_ps(0.999999f);
  const __m256 b = _mm256_set1_ps(1e-6f);
  __m256 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm256_set1_ps(1.0f + 0.01f * i);
  for (std::int64_t it = 0; it < iters; ++it) FMA12("vfmadd213ps", "x");
  __m256 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm256_add_ps(sum, acc[i]);
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  float s = 0;
  for (float x : lanes) s += x;
  return s;
}

// Same with 16-lane AVX-512 registers ("v" allows zmm0-31).
__attribute__((target("avx512f"), noinline)) float fmaLoopAvx512(std::int64_t iters) {
  const __m512 a = _mm512_set1_ps(0.999999f);
  const __m512 b = _mm512_set1_ps(1e-6f);
  __m512 acc[kAccumulators];
  for (int i = 0; i < kAccumulators; ++i) acc[i] = _mm512_set1_ps(1.0f + 0.01f * i);
  for (std::int64_t it = 0; it < iters; ++it) FMA12("vfmadd213ps", "v");
  __m512 sum = acc[0];
  for (int i = 1; i < kAccumulators; ++i) sum = _mm512_add_ps(sum, acc[i]);
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  float s = 0;
  for (float x : lanes) s += x;
  return s;
}

#undef FMA12

struct Isa {
  const char *name;
  int lanes;
  float (*loop)(std::int64_t);
};

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

volatile float gSink;  // keeps results observable

// Runs `iters` iterations on `threads` threads started together; returns the
// wall time from the common start to the last thread's end.
double timeRound(const Isa &isa, int threads, std::int64_t iters) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> end(threads);
  std::vector<float> sink(threads);
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      sink[t] = isa.loop(iters);
      end[t] = now();
    });
  }
  while (ready.load() != threads - 1) {
  }
  double start = now();
  go.store(true, std::memory_order_release);
  sink[0] = isa.loop(iters);
  end[0] = now();
  for (auto &th : pool) th.join();
  float s = 0;
  for (float x : sink) s += x;
  gSink = s;
  return *std::max_element(end.begin(), end.end()) - start;
}

// GFLOP/s of `isa` on `threads` threads: calibrate to ~`seconds` per round,
// then take the best of 5 rounds.
double measure(const Isa &isa, int threads, double seconds) {
  std::int64_t iters = 1 << 16;
  while (timeRound(isa, 1, iters) < 0.02) iters *= 2;
  double t = timeRound(isa, 1, iters);
  iters = std::max<std::int64_t>(1, static_cast<std::int64_t>(iters * seconds / t));
  double best = 1e30;
  for (int round = 0; round < 5; ++round) best = std::min(best, timeRound(isa, threads, iters));
  double flops = 2.0 * isa.lanes * kAccumulators * static_cast<double>(iters) * threads;
  return flops / best * 1e-9;
}

[[noreturn]] void usage(const char *argv0) {
  std::fprintf(stderr, "usage: %s [--threads T] [--seconds S]\n", argv0);
  std::exit(2);
}

}  // namespace

int main(int argc, char **argv) {
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads < 1) threads = 1;
  double seconds = 0.1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else {
      usage(argv[0]);
    }
  }
  if (threads < 1 || !(seconds > 0)) usage(argv[0]);

  __builtin_cpu_init();
  std::vector<Isa> isas;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    isas.push_back({"avx2", 8, fmaLoopAvx2});
  if (__builtin_cpu_supports("avx512f")) isas.push_back({"avx512", 16, fmaLoopAvx512});
  if (isas.empty()) {
    std::fprintf(stderr, "fma_peak: this CPU has neither AVX2+FMA nor AVX-512F\n");
    return 1;
  }

  std::string json = "{\"threads\": " + std::to_string(threads) + ", \"results\": [";
  double peak1 = 0, peakAll = 0;
  const char *peakIsa = "";
  bool first = true;
  for (const Isa &isa : isas) {
    double one = measure(isa, 1, seconds);
    double all = threads == 1 ? one : measure(isa, threads, seconds);
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "%s{\"isa\": \"%s\", \"threads\": 1, \"gflops\": %.2f}, "
                  "{\"isa\": \"%s\", \"threads\": %d, \"gflops\": %.2f}",
                  first ? "" : ", ", isa.name, one, isa.name, threads, all);
    json += buf;
    first = false;
    if (all > peakAll) {
      peakAll = all;
      peak1 = one;
      peakIsa = isa.name;
    }
  }
  char tail[160];
  std::snprintf(tail, sizeof tail,
                "], \"peak_1t\": %.2f, \"peak_all\": %.2f, \"peak_isa\": \"%s\"}", peak1, peakAll,
                peakIsa);
  json += tail;
  std::puts(json.c_str());
  return 0;
}
