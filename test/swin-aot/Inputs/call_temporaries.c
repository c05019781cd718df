// Calls Inputs/module_temporaries.mlir's @twice three times, with other
// inputs each time, from two threads in turn, and checks every result
// against a C reference: what a call gets back from the allocation cache
// must not carry anything of the call before (module-temporaries.test).
#include "tmp.so.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

enum { N = 256 };
static float x[N * N], w[N * N], a[N * N], b[N * N];

static int check(int call) {
  for (int i = 0; i < N * N; ++i) {
    x[i] = (float)((i * 7 + call * 13) % 17) / 17.0f - 0.5f;
    w[i] = (float)((i * 5 + call * 3) % 11) / 11.0f - 0.5f;
  }
  if (tmp_twice(x, w, a, b) != 0)
    return 0;
  int ok = 1;
  for (int i = 0; i < N && ok; i += 15)
    for (int j = 0; j < N && ok; j += 7) {
      double y = 0;
      for (int k = 0; k < N; ++k)
        y += (double)x[i * N + k] * w[k * N + j];
      ok = fabs(a[i * N + j] - (y + 1)) <= 1e-4 * (1 + fabs(y)) &&
           fabs(b[i * N + j] - 2 * y) <= 2e-4 * (1 + fabs(y));
    }
  return ok;
}

static void *second(void *call) {
  printf("call %d (second thread): %s\n", *(int *)call,
         check(*(int *)call) ? "ok" : "WRONG");
  return NULL;
}

int main(void) {
  for (int call = 0; call < 3; ++call)
    printf("call %d: %s\n", call, check(call) ? "ok" : "WRONG");
  int call = 3;
  pthread_t thread;
  if (pthread_create(&thread, NULL, second, &call) != 0)
    return 1;
  pthread_join(thread, NULL);
  call = 4;
  printf("call %d: %s\n", call, check(call) ? "ok" : "WRONG");
  return 0;
}
