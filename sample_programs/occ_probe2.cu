// Second probe of the shared-memory configuration choice, with carveout preferences and
// cache configs (sample_reports/occupancy/occ_probe2.import.raw.base.csv.gz).
#include <cstdio>
#include <cstdlib>
#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
  std::exit(1); } } while (0)

template <int NACC>
__global__ void occ(float* out, const float* in, int n, int selems) {
  extern __shared__ float smem[];
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
  if (selems) { smem[threadIdx.x % selems] = s; __syncthreads(); s += smem[(threadIdx.x + 1) % selems]; }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = s;
}

template <int BYTES>
__global__ void stat(float* out, const float* in, int n) {
  __shared__ float buf[BYTES / 4];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  for (int k = threadIdx.x; k < BYTES / 4; k += blockDim.x) buf[k] = in[k % n];
  __syncthreads();
  if (i < n) out[i] = buf[threadIdx.x % (BYTES / 4)];
}

float *a, *b;
const int n = 1 << 20;

template <int NACC>
void launch(int bs, int dyn) {
  cudaFuncAttributes attr;
  CHECK(cudaFuncGetAttributes(&attr, occ<NACC>));
  if (bs > attr.maxThreadsPerBlock) return;
  CHECK(cudaFuncSetAttribute(occ<NACC>, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
  occ<NACC><<<264, bs, dyn>>>(b, a, n, dyn / 4);
  CHECK(cudaGetLastError());
}

template <int NACC>
void carve(int pct) {
  CHECK(cudaFuncSetAttribute(occ<NACC>, cudaFuncAttributePreferredSharedMemoryCarveout, pct));
}


int main() {
  CHECK(cudaMalloc(&a, n * sizeof(float)));
  CHECK(cudaMalloc(&b, n * sizeof(float)));
  CHECK(cudaMemset(a, 0, n * sizeof(float)));
  // P1: no shared memory, every block size
  for (int bs = 32; bs <= 1024; bs += 32) { launch<1>(bs, 0); launch<40>(bs, 0); }
  for (int bs : {100, 200, 300, 500, 700, 1000}) launch<1>(bs, 0);
  // P2: large blocks with dynamic shared memory
  for (int bs : {640, 704, 736, 768, 800, 832, 864, 896, 928, 960, 992, 1000, 1024})
    for (int d : {2048, 4096, 8192}) launch<1>(bs, d);
  for (int d : {2048, 4096, 8192}) { launch<16>(1024, d); launch<40>(1024, d); launch<16>(992, d); }
  // P3: carveout preference
  for (int pct : {0, 20, 40, 60, 66, 70, 80, 90}) {
    carve<1>(pct);
    for (int d : {0, 2048, 10240, 40960}) launch<1>(128, d);
    launch<1>(1024, 2048);
    launch<1>(512, 0);
  }
  carve<1>(-1);
  // P4: the cap, around 2n*s = 132 KB
  for (int bs : {96, 160, 192, 256, 320})
    for (int d : {5120, 6144, 7168, 8192, 9216, 10240, 12288, 14336, 16384}) launch<1>(bs, d);
  CHECK(cudaDeviceSynchronize());
  std::printf("occ_probe2: done\n");
  return 0;
}
