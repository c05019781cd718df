/* Calls the token-layout runtime of runtime-contexts.test from two CUDA
 * contexts (two devices) of the stand-in driver, in turn: the kernel is
 * loaded once into each, and each launch uses its own context's function
 * and zeros. */
#include "tokens.ptx.h"

#include <stdint.h>
#include <stdio.h>

const int fake_param_ranks[] = {3, 3, 3, 3, 1, 1, 1, 2};
const int fake_num_params = 8;

static void call(const char *what) {
  int status = swin_window_attention(0x1000100, 0x2000000, 0x3000000,
                                     0x5000000, 0x4000000, 1, 0, (CUstream)0);
  printf("%s: %d %s\n", what, status,
         status ? swin_window_attention_last_error() : "");
}

int main(void) {
  call("no context");
  call("device 0 again");
  cuCtxSetCurrent((CUcontext)(uintptr_t)2);
  call("device 1");
  cuCtxSetCurrent((CUcontext)(uintptr_t)1);
  call("device 0");
  cuCtxSetCurrent((CUcontext)(uintptr_t)2);
  call("device 1 again");
  return 0;
}
