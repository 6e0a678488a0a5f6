// Probe of the driver's shared-memory configuration choice: many launches over block size,
// registers, shared memory and carveout (sample_reports/occupancy/occ_probe.import.raw.base.csv.gz).
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
  const int bss[] = {32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 384, 448, 512, 576, 640, 704, 768, 896, 1024};
  // A: registers x block size, no dynamic shared memory
  for (int bs : bss) {
    launch<1>(bs, 0); launch<8>(bs, 0); launch<16>(bs, 0); launch<28>(bs, 0); launch<40>(bs, 0);
    launch<56>(bs, 0); launch<72>(bs, 0); launch<96>(bs, 0); launch<120>(bs, 0); launch<200>(bs, 0);
  }
  // B: dynamic shared memory x block size
  const int dyns[] = {256, 512, 1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 20480, 24576, 28672,
                      32768, 33792, 40960, 49152, 57344, 65536, 81920, 102400, 116736, 135168, 153600,
                      167936, 184320, 204800, 220160, 231424};
  for (int bs : {32, 64, 128, 256, 384, 512, 768, 1024})
    for (int d : dyns) launch<1>(bs, d);
  // C: registers x dynamic shared memory
  for (int bs : {128, 256})
    for (int d : {4096, 8192, 33792, 65536}) {
      launch<16>(bs, d); launch<40>(bs, d); launch<72>(bs, d); launch<120>(bs, d); launch<200>(bs, d);
    }
  // D: static shared memory
  for (int bs : {128, 256, 512}) {
    stat<4096><<<264, bs>>>(b, a, n); stat<24000><<<264, bs>>>(b, a, n); stat<48000><<<264, bs>>>(b, a, n);
  }
  // E: carveout preference
  for (int pct : {0, 5, 10, 25, 33, 50, 66, 75, 100}) {
    carve<1>(pct);
    for (int d : {0, 10240, 40960}) launch<1>(256, d);
    launch<1>(1024, 0);
    launch<1>(64, 0);
  }
  carve<1>(-1);
  // F: cache config
  for (cudaFuncCache c : {cudaFuncCachePreferL1, cudaFuncCachePreferShared, cudaFuncCachePreferEqual}) {
    CHECK(cudaFuncSetCacheConfig(occ<1>, c));
    for (int d : {0, 10240}) launch<1>(256, d);
    launch<1>(1024, 0);
  }
  CHECK(cudaFuncSetCacheConfig(occ<1>, cudaFuncCachePreferNone));
  // G: order effects, repeat a few after big-smem launches
  launch<1>(512, 0); launch<1>(256, 200 * 1024); launch<1>(512, 0); launch<1>(128, 0);
  CHECK(cudaDeviceSynchronize());
  std::printf("occ_probe: done\n");
  return 0;
}
