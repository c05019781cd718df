// Calls thr_forward (Inputs/module_threads.mlir) and checks both results
// against C; prints a hash of their bits, which must not depend on the
// number of threads (OMP_NUM_THREADS): every iteration is computed once,
// by the same code, whichever thread's share it falls in.
#include "thr.so.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { M = 49, K = 64, N = 96, ROWS = 7 * 5 * 1024 };

static float x[M * K], w[K * N], r[ROWS];
static float y[M * N], s[ROWS];

static uint64_t hash(const float *values, size_t count, uint64_t h) {
  const unsigned char *bytes = (const unsigned char *)values;
  for (size_t i = 0; i < count * sizeof(float); ++i)
    h = (h ^ bytes[i]) * 1099511628211u;
  return h;
}

int main(void) {
  for (int i = 0; i < M * K; ++i)
    x[i] = (float)((i * 7 % 17) - 8) / 8.0f;
  for (int i = 0; i < K * N; ++i)
    w[i] = (float)((i * 5 % 13) - 6) / 6.0f;
  for (int i = 0; i < ROWS; ++i)
    r[i] = (float)((i * 31 % 97) - 48) / 16.0f;
  // NaN where nothing was written.
  memset(y, 0xff, sizeof(y));
  memset(s, 0xff, sizeof(s));
  int status = thr_forward(x, w, r, y, s);

  double worst = 0.0, largest = 0.0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double want = 0.0;
      for (int k = 0; k < K; ++k)
        want += (double)x[i * K + k] * w[k * N + j];
      double error = fabs(y[i * N + j] - want);
      // A NaN fails the comparison below.
      worst = error > worst || error != error ? error : worst;
      largest = fabs(want) > largest ? fabs(want) : largest;
    }
  int rowsExact = 1;
  for (int i = 0; i < ROWS; ++i)
    rowsExact &= s[i] == r[i] * 2.0f + 1.0f;
  printf("status %d\n", status);
  printf("matmul %s\n", worst <= 1e-5 * largest ? "ok" : "WRONG");
  printf("rows %s\n", rowsExact ? "ok" : "WRONG");
  printf("hash %016llx\n", (unsigned long long)hash(
                               s, ROWS, hash(y, M * N, 14695981039346656037u)));
  return 0;
}
