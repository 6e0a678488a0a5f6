// One small kernel for counting ncu's replay passes (scripts/gpu_pass_greedy.sh): global loads
// and stores, shared memory, FMA and a transcendental, so every counter family has work.
#include <cstdio>
__global__ void tiny(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float tile[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? in[i] : 0.f;
  tile[threadIdx.x] = v;
  __syncthreads();
  float w = tile[(threadIdx.x * 7) % 256];
  if (i < n) out[i] = fmaf(v, w, __sinf(v));
}
int main() {
  const int n = 1 << 20;
  float *in, *out;
  cudaMalloc(&in, n * sizeof(float));
  cudaMalloc(&out, n * sizeof(float));
  cudaMemset(in, 0, n * sizeof(float));
  tiny<<<n / 256, 256>>>(in, out, n);
  cudaError_t err = cudaDeviceSynchronize();
  printf("tiny: %s\n", cudaGetErrorString(err));
  return err != cudaSuccess;
}
