/* Calls @forward of Inputs/profile_module.mlir, compiled by swin-aot --input
 * --profile --name=prof, twice, checks its results against the same
 * function computed here, and writes its per-op profile to the file named
 * by argv[1]; then the profiling runtime's refusals and its reset. */
#include "prof.so.h"

#include <math.h>
#include <stdio.h>

/* The profiling runtime that --profile links into the library. */
void swin_profile_reset(void);
int swin_profile_write(const char *path);

static const float kBias[8] = {1, -1, 2, -2, 3, -3, 4, -4};

/* forward's t = relu(x w + b)ᵀ [8, 4] (w: all 0.5) and the row sums of
 * relu(x w + b)² [4]. */
static void referenceForward(const float x[32], float t[32], float sums[4]) {
  for (int m = 0; m < 4; ++m) {
    float xw = 0.0f;
    for (int k = 0; k < 8; ++k)
      xw += 0.5f * x[8 * m + k];
    sums[m] = 0.0f;
    for (int n = 0; n < 8; ++n) {
      float y = fmaxf(xw + kBias[n], 0.0f);
      t[4 * n + m] = y;
      sums[m] += y * y;
    }
  }
}

static int near(const float *got, const float *want, int n) {
  for (int i = 0; i < n; ++i)
    if (fabsf(got[i] - want[i]) > 1e-5f * (1.0f + fabsf(want[i])))
      return 0;
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 2)
    return 2;
  float x[PROF_FORWARD_ARG0_ELEMENTS];
  for (int i = 0; i < PROF_FORWARD_ARG0_ELEMENTS; ++i)
    x[i] = (float)(i % 5) - 1.5f;
  float wantT[32], wantSums[4];
  referenceForward(x, wantT, wantSums);

  /* Counters start at zero; a reset keeps them there. */
  swin_profile_reset();
  for (int call = 0; call < 2; ++call) {
    float t[PROF_FORWARD_RESULT0_ELEMENTS], sums[PROF_FORWARD_RESULT1_ELEMENTS];
    int status = prof_forward(x, t, sums);
    printf("call %d: %d, t %s, sums %s\n", call, status,
           near(t, wantT, 32) ? "ok" : "WRONG",
           near(sums, wantSums, 4) ? "ok" : "WRONG");
  }
  printf("write: %d\n", swin_profile_write(argv[1]));

  /* What it cannot write, it refuses, leaving nothing behind. */
  printf("write NULL: %d\n", swin_profile_write(NULL));
  printf("write into a missing directory: %d\n",
         swin_profile_write("missing/profile.json"));

  /* After a reset, nothing has run. */
  swin_profile_reset();
  char path[4096];
  snprintf(path, sizeof path, "%s.reset", argv[1]);
  printf("write after reset: %d\n", swin_profile_write(path));
  return 0;
}
