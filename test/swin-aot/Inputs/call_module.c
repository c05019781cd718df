/* Calls the functions of Inputs/module.mlir, compiled by swin-aot --input
 * --name=mod, through both entry points: the plain C one (mod_F) and
 * MLIR's C interface (_mlir_ciface_F), and compares their results with the
 * same functions computed here. Then the plain entry points' refusals:
 * NULL pointers and overlapping results return 1 and write nothing. */
#include "mod.so.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The weight blob of Inputs/module.mlir: w[k][n] = (4k + n) % 7 - 3. */
static float weight(int k, int n) { return (float)((4 * k + n) % 7) - 3.0f; }
static const float kBias[4] = {0.5f, -1.0f, 2.0f, 0.25f};
static const float kX[6] = {0.5f, -1.5f, 2.0f, 1.0f, 0.25f, -0.75f};

/* forward's y [2, 4] and row sums [2]. */
static void referenceForward(float y[8], float sums[2]) {
  for (int m = 0; m < 2; ++m) {
    sums[m] = 0.0f;
    for (int n = 0; n < 4; ++n) {
      float s = kBias[n];
      for (int k = 0; k < 3; ++k)
        s += kX[3 * m + k] * weight(k, n);
      y[4 * m + n] = 0.5f * s * (1.0f + erff(s * 0.70710677f));
      sums[m] += y[4 * m + n];
    }
  }
}

static int near(const float *got, const float *want, int n) {
  for (int i = 0; i < n; ++i)
    if (fabsf(got[i] - want[i]) > 1e-5f * (1.0f + fabsf(want[i])))
      return 0;
  return 1;
}

static const char *verdict(int ok) { return ok ? "ok" : "WRONG"; }

/* A descriptor of a contiguous row-major buffer of `rank` extents. */
#define DESCRIBE(desc, buffer, rank, ...)                                      \
  do {                                                                         \
    int64_t extents[] = {__VA_ARGS__};                                         \
    (desc).allocated = (desc).aligned = (buffer);                              \
    (desc).offset = 0;                                                         \
    int64_t stride = 1;                                                        \
    for (int i = (rank)-1; i >= 0; --i) {                                      \
      (desc).sizes[i] = extents[i];                                            \
      (desc).strides[i] = stride;                                              \
      stride *= extents[i];                                                    \
    }                                                                          \
  } while (0)

int main(void) {
  float wantY[8], wantSums[2];
  referenceForward(wantY, wantSums);

  /* forward, plain. */
  float y[MOD_FORWARD_RESULT0_ELEMENTS], sums[MOD_FORWARD_RESULT1_ELEMENTS];
  int status = mod_forward(kX, y, sums);
  printf("mod_forward: %d, y %s, sums %s\n", status, verdict(near(y, wantY, 8)),
         verdict(near(sums, wantSums, 2)));
  /* The sums as numbers, for the test to compare with its own. */
  printf("mod_forward sums: %.5f %.5f\n", sums[0], sums[1]);

  /* forward, MLIR's C interface: the results are the callee's to free. */
  mod_memref_2d_f32 x;
  DESCRIBE(x, (float *)kX, 2, 2, 3);
  mod_forward_results results;
  _mlir_ciface_forward(&results, &x);
  printf("_mlir_ciface_forward: y %s [%lld, %lld], sums %s\n",
         verdict(near(results.result0.aligned + results.result0.offset, wantY,
                      8)),
         (long long)results.result0.sizes[0],
         (long long)results.result0.sizes[1],
         verdict(near(results.result1.aligned + results.result1.offset,
                      wantSums, 2)));
  free(results.result0.allocated);
  free(results.result1.allocated);

  /* scale: f64 and i64. */
  double a[5] = {1.5, -2.0, 0.25, 3.0, -0.5}, r[5];
  int64_t b[5] = {2, 3, -4, 0, 1000000};
  status = mod_scale(a, b, r);
  int scaled = 1;
  for (int i = 0; i < 5; ++i)
    scaled &= r[i] == a[i] * (double)b[i];
  printf("mod_scale: %d, %s\n", status, verdict(scaled));
  mod_memref_1d_f64 ad, rd;
  mod_memref_1d_i64 bd;
  DESCRIBE(ad, a, 1, 5);
  DESCRIBE(bd, b, 1, 5);
  _mlir_ciface_scale(&rd, &ad, &bd);
  printf("_mlir_ciface_scale: %s\n",
         verdict(memcmp(rd.aligned + rd.offset, r, sizeof r) == 0));
  free(rd.allocated);

  /* passthrough: its argument and a constant twice, each a buffer of the
   * callee's (MLIR's C interface), copied once each (plain). A result may
   * be the argument's own buffer. */
  float p[3] = {7.0f, 8.0f, 9.0f}, ones[3], twos[3];
  const float constant[3] = {1.0f, 2.0f, 3.0f};
  status = mod_passthrough(p, p, ones, twos);
  printf("mod_passthrough in place: %d, %s %s %s\n", status,
         verdict(p[0] == 7.0f && p[2] == 9.0f), verdict(near(ones, constant, 3)),
         verdict(near(twos, constant, 3)));
  mod_memref_1d_f32 pd;
  DESCRIBE(pd, p, 1, 3);
  mod_passthrough_results passed;
  _mlir_ciface_passthrough(&passed, &pd);
  printf("_mlir_ciface_passthrough: argument copied %s, constant %s\n",
         verdict(passed.result0.allocated != p &&
                 near(passed.result0.aligned + passed.result0.offset, p, 3)),
         verdict(near(passed.result1.aligned + passed.result1.offset, constant,
                      3)));
  free(passed.result0.allocated);
  free(passed.result1.allocated);
  if (passed.result2.allocated != passed.result1.allocated)
    free(passed.result2.allocated);

  /* Refusals: 1, and the results keep their mark. */
  float out[12];
  const float mark = -12345.0f;
  for (int i = 0; i < 12; ++i)
    out[i] = mark;
  int untouched = 1;
#define CHECK_REFUSED(what, call)                                              \
  do {                                                                         \
    status = call;                                                             \
    untouched = 1;                                                             \
    for (int i = 0; i < 12; ++i)                                               \
      untouched &= out[i] == mark;                                             \
    printf("%s: %d %s\n", what, status, untouched ? "untouched" : "written");  \
  } while (0)
  CHECK_REFUSED("NULL input", mod_forward(NULL, out, out + 8));
  CHECK_REFUSED("NULL result", mod_forward(kX, out, NULL));
  CHECK_REFUSED("results overlap", mod_forward(kX, out, out + 7));
  CHECK_REFUSED("results overlap (2)", mod_forward(kX, out + 1, out));
  CHECK_REFUSED("NULL f64 input", mod_scale(NULL, b, (double *)out));
  status = mod_forward(kX, out, out + 8);
  printf("results touch: %d, %s\n", status,
         verdict(near(out, wantY, 8) && near(out + 8, wantSums, 2)));
  return 0;
}
