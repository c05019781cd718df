/*===- GpuRuntimeCheck.c - the runtime compiled as swin-aot uses it ------===*
 *
 * Built with -std=c11 -Wall -Wextra -Wpedantic -Wconversion -Werror so that
 * the runtime's C stays warning-free: the runtime's text, then a kernel
 * table and an entry point of the shape GpuRuntime.cpp generates: two
 * launches, the first over the items with a scratch of 676 bytes per item,
 * the second of a fixed grid.
 *
 *===----------------------------------------------------------------------===*/

#include "GpuRuntime.c"

int check_entry(CUdeviceptr q, CUdeviceptr out, int64_t num_windows,
                CUstream stream);

static const unsigned char check_image[] = {0x00};
static char check_error[SWIN_RT_ERROR_BYTES];
static const char *const check_argument_names[] = {"q", "out"};
static const int check_argument_checks[] = {SWIN_RT_NONNULL | SWIN_RT_ALIGNED,
                                            SWIN_RT_NONNULL | SWIN_RT_ALIGNED};
static const struct swin_rt_size check_argument_sizes[] = {{18816, 1},
                                                           {18816, 1}};
static const struct swin_rt_pair check_disjoint[] = {{1, 0}};
static const struct swin_rt_param check_params_0[] = {
    {0, 0, 4, {-1, 3, 49, 32}, {4704, 1568, 32, 1}},
    {SWIN_RT_SCRATCH, 0, 2, {-2, 169}, {169, 1}},
};
static const struct swin_rt_param check_params_1[] = {
    {SWIN_RT_SCRATCH, 0, 2, {-2, 169}, {169, 1}},
    {1, 0, 3, {-1, 49, 96}, {4704, 96, 1}},
};
static const struct swin_rt_launch_info check_launches[] = {
    {.symbol = "check_kernel",
     .num_params = 2,
     .params = check_params_0,
     .block_size = 32,
     .items_per_block = 1,
     .grid = 0,
     .dynamic_shared_bytes = 82576},
    {.symbol = "check_kernel_0",
     .num_params = 2,
     .params = check_params_1,
     .block_size = 256,
     .items_per_block = 0,
     .grid = 18},
};
static const struct swin_rt_kernel check_kernel = {
    .name = "check",
    .image = check_image,
    .num_arguments = 2,
    .argument_names = check_argument_names,
    .argument_checks = check_argument_checks,
    .argument_sizes = check_argument_sizes,
    .num_disjoint = 1,
    .disjoint = check_disjoint,
    .zero_bytes = 0,
    .max_count = 490187714543727,
    .count_multiple = 1,
    .windows_per_count = 1,
    .heads = 3,
    .scratch_bytes_per_item = 676,
    .num_launches = 2,
    .launches = check_launches,
};
static struct swin_rt_state check_state = SWIN_RT_STATE_INIT(check_error);

int check_entry(CUdeviceptr q, CUdeviceptr out, int64_t num_windows,
                CUstream stream) {
  CUdeviceptr arguments[] = {q, out};
  return swin_rt_launch(&check_kernel, &check_state, arguments, num_windows,
                        stream);
}
