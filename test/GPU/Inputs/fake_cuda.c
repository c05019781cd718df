/* A stand-in for the CUDA driver, for testing swin-aot's host runtime on a
 * machine without a GPU: every call succeeds, the stream-ordered
 * allocations print their sizes, cuFuncSetAttribute the attribute it sets,
 * and cuLaunchKernel prints the grid, the block, the dynamic shared memory
 * (where not 0) and the parameters it was given, so that a test can check the
 * descriptors the runtime builds from its parameter table.
 * Contexts are numbers: none is current at first, device d's primary one
 * is d + 1, and loading a module says into which. */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>

static int launches;
static CUcontext current;

CUresult cuInit(unsigned int flags) { (void)flags; return CUDA_SUCCESS; }
CUresult cuCtxGetCurrent(CUcontext *context) {
  *context = current;
  return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  *context = (CUcontext)(uintptr_t)(device + 1);
  return CUDA_SUCCESS;
}
CUresult cuCtxSetCurrent(CUcontext context) {
  current = context;
  return CUDA_SUCCESS;
}
CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  (void)image;
  *module = (CUmodule)1;
  return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction *function, CUmodule module,
                             const char *name) {
  (void)module;
  printf("function %s in context %d\n", name, (int)(uintptr_t)current);
  *function = (CUfunction)current;
  return CUDA_SUCCESS;
}
CUresult cuFuncSetAttribute(CUfunction function, CUfunction_attribute attribute,
                            int value) {
  (void)function;
  printf("attribute %s %d\n",
         attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
             ? "max dynamic shared"
             : "other",
         value);
  return CUDA_SUCCESS;
}
CUresult cuMemAlloc(CUdeviceptr *pointer, size_t bytes) {
  printf("alloc %zu\n", bytes);
  *pointer = 0x1000;
  return CUDA_SUCCESS;
}
CUresult cuMemAllocAsync(CUdeviceptr *pointer, size_t bytes, CUstream stream) {
  (void)stream;
  printf("alloc async %zu\n", bytes);
  *pointer = 0x7000000;
  return CUDA_SUCCESS;
}
CUresult cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  (void)stream;
  printf("free async 0x%llx\n", (unsigned long long)pointer);
  return CUDA_SUCCESS;
}
CUresult cuMemsetD8(CUdeviceptr pointer, unsigned char value, size_t count) {
  (void)pointer, (void)value, (void)count;
  return CUDA_SUCCESS;
}
CUresult cuGetErrorString(CUresult error, const char **text) {
  (void)error;
  *text = "fake error";
  return CUDA_SUCCESS;
}
/* Prints each memref parameter: pointer, pointer, offset, sizes, strides
 * (`ranks` gives each parameter's rank). */
extern const int fake_param_ranks[];
extern const int fake_num_params;
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz, unsigned shared,
                        CUstream stream, void **params, void **extra) {
  int i, j, k = 0;
  (void)stream, (void)extra;
  printf("launch %d grid %u,%u,%u block %u,%u,%u", ++launches, gx, gy, gz, bx,
         by, bz);
  /* Dynamic shared memory, where a launch has some. */
  if (shared)
    printf(" shared %u", shared);
  /* The function of another context than the current one cannot run. */
  printf("%s\n", f == (CUfunction)current ? "" : " from another context");
  for (i = 0; i < fake_num_params; ++i) {
    printf("  param %d: 0x%llx 0x%llx", i,
           *(unsigned long long *)params[k], *(unsigned long long *)params[k + 1]);
    k += 2;
    for (j = 0; j < 1 + 2 * fake_param_ranks[i]; ++j)
      printf(" %lld", (long long)*(int64_t *)params[k++]);
    printf("\n");
  }
  return CUDA_SUCCESS;
}
