// occ_sweep: many launches whose occupancy limits differ (block size, registers,
// static and dynamic shared memory, carveout). Profiled with the LaunchStats and
// Occupancy sections, it is the ground truth for ncu_advisor's occupancy calculator.
#include <cstdio>
#include <cstdlib>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
  std::exit(1); } } while (0)

// NACC independent accumulators kept live across the loop raise the register count.
template <int NACC>
__global__ void regs_kernel(float* out, const float* in, int n) {
  float acc[NACC];
#pragma unroll
  for (int k = 0; k < NACC; ++k) acc[k] = in[(threadIdx.x + k) % n];
  for (int it = 0; it < 4; ++it) {
#pragma unroll
    for (int k = 0; k < NACC; ++k) acc[k] = acc[k] * acc[(k + 1) % NACC] + in[(k * 7 + it) % n];
  }
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < NACC; ++k) s += acc[k];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = s;
}

__global__ void dyn_smem_kernel(float* out, const float* in, int n) {
  extern __shared__ float smem[];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  smem[threadIdx.x] = i < n ? in[i] : 0.f;
  __syncthreads();
  if (i < n) out[i] = smem[(threadIdx.x + 1) % blockDim.x];
}

__global__ void static_smem_kernel(float* out, const float* in, int n) {
  __shared__ float buf[6000];  // 24,000 bytes
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = threadIdx.x; k < 6000; k += blockDim.x) buf[k] = in[k % n];
  __syncthreads();
  if (i < n) out[i] = buf[threadIdx.x % 6000];
}

// Launch only what fits: a block too large for the kernel's registers fails to launch.
template <typename K>
bool fits(K kernel, int block) {
  cudaFuncAttributes attr;
  CHECK(cudaFuncGetAttributes(&attr, kernel));
  return block <= attr.maxThreadsPerBlock;
}

int main() {
  const int n = 1 << 20;
  float *a, *b;
  CHECK(cudaMalloc(&a, n * sizeof(float)));
  CHECK(cudaMalloc(&b, n * sizeof(float)));
  CHECK(cudaMemset(a, 0, n * sizeof(float)));
  const int blocks[] = {32, 64, 96, 100, 128, 192, 256, 384, 512, 640, 768, 1024};
  for (int bs : blocks) regs_kernel<1><<<264, bs>>>(b, a, n);
  for (int bs : {128, 256, 512, 1024}) {
    if (fits(regs_kernel<16>, bs)) regs_kernel<16><<<264, bs>>>(b, a, n);
    if (fits(regs_kernel<40>, bs)) regs_kernel<40><<<264, bs>>>(b, a, n);
    if (fits(regs_kernel<72>, bs)) regs_kernel<72><<<264, bs>>>(b, a, n);
    if (fits(regs_kernel<120>, bs)) regs_kernel<120><<<264, bs>>>(b, a, n);
  }
  CHECK(cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  // Every size is > 0: the kernel writes blockDim.x floats of dynamic shared memory.
  for (int kb : {1, 8, 20, 33, 48, 100, 200})
    for (int bs : {128, 512}) dyn_smem_kernel<<<264, bs, kb * 1024>>>(b, a, n);
  for (int carve : {0, 25, 50, 100}) {
    CHECK(cudaFuncSetAttribute(static_smem_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, carve));
    static_smem_kernel<<<264, 256>>>(b, a, n);
    CHECK(cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, carve));
    dyn_smem_kernel<<<264, 256, 10 * 1024>>>(b, a, n);
  }
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::printf("occ_sweep: done\n");
  return 0;
}
