/* Calls the backward of backward.test's runtime (Swin-T stage 1, windows
 * layout, 14x14 map: 4 windows per image, 3 heads; or 12x12 windows of a
 * 24x24 map, also 4 per image, whose grad.ptx.h is in another directory)
 * with valid and invalid arguments. */
#include "grad.ptx.h"

#include <stdio.h>

/* Only the grids are checked: the two launches take different parameters. */
const int fake_param_ranks[] = {0};
const int fake_num_params = 0;

/* q, k, v, table, out, dout, dq, dk, dv, dtable: 16 MiB apart. */
static void call(const char *what, CUdeviceptr dq, int64_t windows) {
  int status = swin_window_attention_backward(
      0x1000000, 0x2000000, 0x3000000, 0x4000000, 0x5000000, 0x6000000, dq,
      0x9000000, 0xa000000, 0xb000000, windows, (CUstream)0);
  printf("%s: %d %s\n", what, status,
         status ? swin_window_attention_last_error() : "");
}

int main(void) {
  call("valid", 0x8000000, 8);
  call("no window", 0x8000000, 0);
  call("dq = k", 0x2000000, 8);
  call("partial image", 0x8000000, 6);
  return 0;
}
