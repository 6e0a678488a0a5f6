// forms_app: a small CUDA program whose profile exercises every ncu export form.
// Template kernels give names full of '<', '>', ',' and '::'; NVTX ranges give
// the NVTX columns; one kernel runs three times with different grids for the
// per-kernel summary. `--fail` makes the program exit with status 3 after its work.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <nvtx3/nvToolsExt.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
  std::exit(1); } } while (0)

__global__ void copy_coalesced(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i];
}

__global__ void copy_strided(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[(i * 32) % n];
}

template <typename T, int VEC>
__global__ void scale_vec(T* out, const T* in, T alpha, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * VEC;
#pragma unroll
  for (int k = 0; k < VEC; ++k)
    if (i + k < n) out[i + k] = alpha * in[i + k];
}

namespace lab {
template <typename T> struct Mul { __device__ T operator()(T a) const { return a * T(3); } };
template <typename T, int K> struct Add { __device__ T operator()(T a) const { return a + T(K); } };
template <typename F, typename G>
__global__ void apply_pair(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = G()(F()(in[i]));
}
}  // namespace lab

__global__ void saxpy(float* y, const float* x, float a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}

// A deliberately small launch: 4 blocks with a shared-memory reduction and a global atomic.
__global__ void tiny_reduce(float* sum, const float* in, int n) {
  __shared__ float buf[128];
  float acc = 0.f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) acc += in[i];
  buf[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(sum, buf[0]);
}

int main(int argc, char** argv) {
  bool fail = argc > 1 && std::strcmp(argv[1], "--fail") == 0;
  const int n = 1 << 24;
  float *a, *b, *s;
  double *da, *db;
  CHECK(cudaMalloc(&a, n * sizeof(float)));
  CHECK(cudaMalloc(&b, n * sizeof(float)));
  CHECK(cudaMalloc(&s, sizeof(float)));
  CHECK(cudaMalloc(&da, n * sizeof(double)));
  CHECK(cudaMalloc(&db, n * sizeof(double)));
  std::vector<float> h(n);
  for (int i = 0; i < n; ++i) h[i] = float(i % 1000) * 1e-3f;
  CHECK(cudaMemcpy(a, h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  CHECK(cudaMemset(s, 0, sizeof(float)));
  CHECK(cudaMemset(da, 0, n * sizeof(double)));

  nvtxRangePushA("copies");
  copy_coalesced<<<n / 256, 256>>>(b, a, n);
  copy_strided<<<n / 256, 256>>>(b, a, n);
  nvtxRangePop();

  nvtxRangePushA("templates");
  scale_vec<float, 4><<<n / 4 / 256, 256>>>(b, a, 2.0f, n);
  scale_vec<double, 1><<<n / 256, 256>>>(db, da, 2.0, n);
  lab::apply_pair<lab::Mul<float>, lab::Add<float, 2>><<<n / 256, 256>>>(b, a, n);
  nvtxRangePop();

  saxpy<<<132, 256>>>(b, a, 0.5f, 1 << 20);
  saxpy<<<1024, 256>>>(b, a, 0.5f, 1 << 22);
  saxpy<<<n / 256, 256>>>(b, a, 0.5f, n);
  tiny_reduce<<<4, 128>>>(s, a, n);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());

  float total = 0.f;
  CHECK(cudaMemcpy(&total, s, sizeof(float), cudaMemcpyDeviceToHost));
  std::printf("forms_app: 10 kernels done, reduce sum = %.1f\n", total);
  std::printf("forms_app: a line of program output, with, commas and \"quotes\"\n");
  cudaFree(a); cudaFree(b); cudaFree(s); cudaFree(da); cudaFree(db);
  return fail ? 3 : 0;
}
