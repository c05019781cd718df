/*===- GpuRuntime.c - host runtime of swin-aot's GPU kernels -------------===*
 *
 * swin-aot --target=nvptx writes NAME.c: this file's text, then the data of
 * one kernel (its image, its parameter table, its launch geometry) and a
 * few lines that give the entry point of NAME.h its C signature and call
 * swin_rt_launch. Everything that is the same for every kernel is here, as
 * C that the build compiles and warning-checks (GpuRuntimeCheck.c); the
 * generated part is data.
 *
 * The runtime uses the CUDA driver API only: it loads the image once per
 * CUDA context, into the one current at the call (device 0's primary one
 * where none is), so that a process may launch on several devices; checks
 * the arguments (as the CPU entry points do: NULL buffers, the count, an
 * output that overlaps another buffer, by the same arithmetic on device
 * addresses), builds the memref descriptors the kernel takes from the
 * device pointers, and launches it on the caller's stream. It never
 * aborts: errors return non-zero and are described by NAME_last_error().
 *
 *===----------------------------------------------------------------------===*/

#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

/* Limits of what a kernel's parameter table may hold, and of the CUDA
 * contexts (one per device, for PyTorch) it may be loaded into. */
enum {
  SWIN_RT_MAX_ARGUMENTS = 8,
  SWIN_RT_MAX_PARAMS = 8,
  SWIN_RT_MAX_RANK = 5,
  SWIN_RT_MAX_CONTEXTS = 64
};

/* A memref parameter of the kernel: a view of a C argument. */
struct swin_rt_param {
  /* The C argument (an index into the entry point's device pointers). */
  int argument;
  int64_t offset;
  int rank;
  /* -1 is the count argument's value. */
  int64_t shape[SWIN_RT_MAX_RANK];
  int64_t strides[SWIN_RT_MAX_RANK];
};

/* What the entry point checks about a C argument. */
enum swin_rt_check {
  SWIN_RT_UNCHECKED = 0,
  /* Must not be NULL. */
  SWIN_RT_NONNULL = 1,
  /* Must be 16-byte aligned (rows move in 16-byte vectors). */
  SWIN_RT_ALIGNED = 2,
  /* May be NULL: zeros of `zero_bytes` bytes are passed instead. */
  SWIN_RT_ZEROS_IF_NULL = 4
};

/* The size of a buffer argument: `bytes` per unit of the count, or in all
 * where `per_count` is 0. */
struct swin_rt_size {
  int64_t bytes;
  int per_count;
};

/* Two arguments that must not overlap: one the kernel writes, and another
 * it reads or writes. */
struct swin_rt_pair {
  int written, other;
};

struct swin_rt_kernel {
  const char *name;
  const unsigned char *image;
  const char *symbol;
  /* The entry point's device-pointer arguments, with their names. */
  int num_arguments;
  const char *const *argument_names;
  const int *argument_checks;
  const struct swin_rt_size *argument_sizes;
  int num_disjoint;
  const struct swin_rt_pair *disjoint;
  int64_t zero_bytes;
  /* The count must be at most this: its buffers' sizes in bytes fit in
   * int64_t, so no product of the count wraps. */
  int64_t max_count;
  /* The count must be a multiple of this (whole images of windows). */
  int64_t count_multiple;
  /* Windows per unit of the count (per image in the token layout). */
  int64_t windows_per_count;
  int64_t heads;
  int num_params;
  const struct swin_rt_param *params;
  unsigned block_size;
  /* (window, head) items per block: the grid is ceil(items / this). */
  int64_t items_per_block;
};

/* The kernel loaded into one CUDA context: a function (and the zeros)
 * of one context cannot be used from another, i.e. on another device. */
struct swin_rt_module {
  CUcontext context;
  CUresult status;
  CUfunction function;
  CUdeviceptr zeros;
};

/* Per-kernel state: the contexts it was loaded into and the last error.
 * A context is assumed to live as long as the process (the primary
 * contexts PyTorch and the runtime API use do). */
struct swin_rt_state {
  pthread_mutex_t lock;
  int num_modules;
  struct swin_rt_module modules[SWIN_RT_MAX_CONTEXTS];
  char error[256];
};

#define SWIN_RT_STATE_INIT {PTHREAD_MUTEX_INITIALIZER, 0, {{0}}, {0}}

static int swin_rt_fail(const struct swin_rt_kernel *kernel,
                        struct swin_rt_state *state, CUresult status,
                        const char *what) {
  const char *text = 0;
  cuGetErrorString(status, &text);
  snprintf(state->error, sizeof state->error, "%s: %s: %s (CUDA error %d)",
           kernel->name, what, text ? text : "unknown error", (int)status);
  return (int)status ? (int)status : 1;
}

static int swin_rt_invalid(const struct swin_rt_kernel *kernel,
                           struct swin_rt_state *state, const char *argument,
                           const char *problem) {
  snprintf(state->error, sizeof state->error, "%s: invalid arguments: %s%s%s",
           kernel->name, argument, argument[0] ? " " : "", problem);
  return 1;
}

/* The size in bytes of argument `i` for `count` (at most max_count). */
static uint64_t swin_rt_bytes(const struct swin_rt_kernel *kernel, int i,
                              int64_t count) {
  const struct swin_rt_size *size = &kernel->argument_sizes[i];
  return (uint64_t)size->bytes * (size->per_count ? (uint64_t)count : 1u);
}

/* Whether [x, x + m) and [y, y + n) overlap: differences rather than
 * ends, which cannot wrap; an empty range overlaps nothing. */
static int swin_rt_overlap(CUdeviceptr x, uint64_t m, CUdeviceptr y,
                           uint64_t n) {
  return x < y ? y - x < m : x - y < n;
}

/* The current context, or device 0's primary one made current where none
 * is (a process that has not used CUDA yet). */
static CUresult swin_rt_context(CUcontext *context) {
  CUdevice device;
  CUresult s = cuCtxGetCurrent(context);
  if (s == CUDA_ERROR_NOT_INITIALIZED) {
    s = cuInit(0);
    if (s == CUDA_SUCCESS)
      s = cuCtxGetCurrent(context);
  }
  if (s != CUDA_SUCCESS || *context)
    return s;
  s = cuDeviceGet(&device, 0);
  if (s == CUDA_SUCCESS)
    s = cuDevicePrimaryCtxRetain(context, device);
  if (s == CUDA_SUCCESS)
    s = cuCtxSetCurrent(*context);
  return s;
}

/* Loads the module into `module->context`; the status is kept. */
static void swin_rt_load_into(const struct swin_rt_kernel *kernel,
                              struct swin_rt_module *module) {
  CUmodule loaded;
  CUresult s = cuModuleLoadData(&loaded, kernel->image);
  if (s == CUDA_SUCCESS)
    s = cuModuleGetFunction(&module->function, loaded, kernel->symbol);
  if (s == CUDA_SUCCESS && kernel->zero_bytes > 0)
    s = cuMemAlloc(&module->zeros, (size_t)kernel->zero_bytes);
  if (s == CUDA_SUCCESS && kernel->zero_bytes > 0)
    s = cuMemsetD8(module->zeros, 0, (size_t)kernel->zero_bytes);
  module->status = s;
}

/* The kernel in the current context, loaded there at the first call from
 * it; a failure is remembered and reported by every later call from that
 * context. */
static CUresult swin_rt_load(const struct swin_rt_kernel *kernel,
                             struct swin_rt_state *state,
                             const struct swin_rt_module **loaded) {
  struct swin_rt_module *module = 0;
  CUcontext context = 0;
  CUresult s = swin_rt_context(&context);
  int i;
  if (s != CUDA_SUCCESS)
    return s;
  pthread_mutex_lock(&state->lock);
  for (i = 0; i < state->num_modules && !module; ++i)
    if (state->modules[i].context == context)
      module = &state->modules[i];
  if (!module && state->num_modules < SWIN_RT_MAX_CONTEXTS) {
    module = &state->modules[state->num_modules++];
    module->context = context;
    swin_rt_load_into(kernel, module);
  }
  s = module ? module->status : CUDA_ERROR_NOT_SUPPORTED;
  pthread_mutex_unlock(&state->lock);
  *loaded = module;
  return s;
}

/* Checks the arguments, loads the kernel and launches it over `count`
 * windows (or images) on `stream`. `arguments` are the entry point's device
 * pointers, in the order of kernel->argument_names. */
static int swin_rt_launch(const struct swin_rt_kernel *kernel,
                          struct swin_rt_state *state, CUdeviceptr *arguments,
                          int64_t count, CUstream stream) {
  const struct swin_rt_module *module;
  CUdeviceptr pointers[SWIN_RT_MAX_PARAMS];
  int64_t descriptors[SWIN_RT_MAX_PARAMS][1 + 2 * SWIN_RT_MAX_RANK];
  void *params[SWIN_RT_MAX_PARAMS * (3 + 2 * SWIN_RT_MAX_RANK)];
  int num_params = 0;
  int64_t windows, items, grid;
  CUresult s;
  int i, j;

  if (kernel->num_arguments > SWIN_RT_MAX_ARGUMENTS ||
      kernel->num_params > SWIN_RT_MAX_PARAMS)
    return swin_rt_invalid(kernel, state, "", "(a corrupt kernel table)");
  for (i = 0; i < kernel->num_arguments; ++i) {
    int check = kernel->argument_checks[i];
    if ((check & SWIN_RT_NONNULL) && !arguments[i])
      return swin_rt_invalid(kernel, state, kernel->argument_names[i],
                             "is NULL");
    if ((check & SWIN_RT_ALIGNED) && arguments[i] % 16)
      return swin_rt_invalid(kernel, state, kernel->argument_names[i],
                             "is not 16-byte aligned");
  }
  if (count < 0)
    return swin_rt_invalid(kernel, state, "", "the count is negative");
  if (count % kernel->count_multiple)
    return swin_rt_invalid(kernel, state, "",
                           "the count is not a multiple of the windows per "
                           "image");
  if (count > kernel->max_count)
    return swin_rt_invalid(kernel, state, "",
                           "the count's buffers would exceed 2^63 - 1 bytes");
  /* At most max_count, neither the items nor the grid wrap. */
  windows = count * kernel->windows_per_count;
  items = windows * kernel->heads;
  grid = (items + kernel->items_per_block - 1) / kernel->items_per_block;
  if (grid > 0x7fffffff)
    return swin_rt_invalid(kernel, state, "",
                           "the count exceeds a grid of 2^31 - 1 blocks");
  for (i = 0; i < kernel->num_disjoint; ++i) {
    int out = kernel->disjoint[i].written, other = kernel->disjoint[i].other;
    char problem[64];
    /* A NULL pad_qkv is the runtime's own zeros. */
    if (!arguments[out] || !arguments[other] ||
        !swin_rt_overlap(arguments[out], swin_rt_bytes(kernel, out, count),
                         arguments[other], swin_rt_bytes(kernel, other, count)))
      continue;
    snprintf(problem, sizeof problem, "overlaps %s",
             kernel->argument_names[other]);
    return swin_rt_invalid(kernel, state, kernel->argument_names[out], problem);
  }
  if (count == 0)
    return 0;
  s = swin_rt_load(kernel, state, &module);
  if (s != CUDA_SUCCESS)
    return swin_rt_fail(kernel, state, s, "loading the kernel");
  for (i = 0; i < kernel->num_arguments; ++i)
    if ((kernel->argument_checks[i] & SWIN_RT_ZEROS_IF_NULL) && !arguments[i])
      arguments[i] = module->zeros;

  /* A memref descriptor is passed expanded: allocated and aligned pointers,
   * offset, sizes, strides. */
  for (i = 0; i < kernel->num_params; ++i) {
    const struct swin_rt_param *param = &kernel->params[i];
    int64_t *descriptor = descriptors[i];
    pointers[i] = arguments[param->argument];
    descriptor[0] = param->offset;
    for (j = 0; j < param->rank; ++j) {
      descriptor[1 + j] = param->shape[j] < 0 ? count : param->shape[j];
      descriptor[1 + param->rank + j] = param->strides[j];
    }
    params[num_params++] = &pointers[i];
    params[num_params++] = &pointers[i];
    for (j = 0; j < 1 + 2 * param->rank; ++j)
      params[num_params++] = &descriptor[j];
  }
  s = cuLaunchKernel(module->function, (unsigned)grid, 1, 1, kernel->block_size,
                     1, 1, 0, stream, params, 0);
  if (s != CUDA_SUCCESS)
    return swin_rt_fail(kernel, state, s, "cuLaunchKernel");
  return 0;
}
