/* The one place where CUDA and HIP differ for halo's GPU sources: the runtime header and the
 * names of the runtime calls and warp intrinsics the kernels use. Every .cu file is written
 * against the CUDA names; built with hipcc (-DHALO_HIP) they map to HIP's. HIP on RDNA
 * (gfx10/11, wave32 by default) and CUDA both have 32-lane warps, which the kernels assume. */
#ifndef HALO_BACKEND_CUDA_GPU_H
#define HALO_BACKEND_CUDA_GPU_H

#ifdef HALO_HIP
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

#define GPU_RUNTIME "hip"
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorInvalidValue hipErrorInvalidValue
#define cudaMemcpyKind hipMemcpyKind
#define cudaGetErrorString hipGetErrorString
#define cudaGetErrorName hipGetErrorName
#define cudaGetLastError hipGetLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaSetDevice hipSetDevice
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaDevAttrIntegrated hipDeviceAttributeIntegrated
#define cudaMemGetInfo hipMemGetInfo
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMallocManaged hipMallocManaged
#define cudaMemAttachGlobal hipMemAttachGlobal
/* GPU-visible host memory: hipHostMalloc is what an APU (Strix Halo) reads at full speed. */
#define cudaHostAlloc hipHostMalloc
#define cudaHostAllocMapped hipHostMallocMapped
#define cudaFreeHost hipHostFree
#define cudaHostRegister hipHostRegister
#define cudaHostRegisterMapped hipHostRegisterMapped
#define cudaHostUnregister hipHostUnregister
#define cudaHostGetDevicePointer hipHostGetDevicePointer
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpy hipMemcpy
#define cudaMemcpyDefault hipMemcpyDefault
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyToSymbol(sym, src, n) hipMemcpyToSymbol(HIP_SYMBOL(sym), src, n)
#define cudaStream_t hipStream_t
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaEvent_t hipEvent_t
#define cudaEventCreate hipEventCreate
#define cudaEventRecord hipEventRecord
#define cudaEventElapsedTime hipEventElapsedTime
#define cudaEventDestroy hipEventDestroy
#define cudaGraph_t hipGraph_t
#define cudaGraphExec_t hipGraphExec_t

static __device__ __forceinline__ float gpu_shfl_xor(float v, int m) {
    return __shfl_xor(v, m, 32);
}
static __device__ __forceinline__ int gpu_shfl_xor_i(int v, int m) {
    return __shfl_xor(v, m, 32);
}
static __device__ __forceinline__ float gpu_shfl(float v, int l) {
    return __shfl(v, l, 32);
}
static __device__ __forceinline__ int gpu_shfl_up_i(int v, int d) {
    return __shfl_up(v, d, 32);
}
/* ROCm 5.2's HIP has no __syncwarp. A wavefront runs in lockstep; the wave barrier keeps the
 * compiler from moving shared-memory accesses across it, which is what the kernels need. */
static __device__ __forceinline__ void gpu_syncwarp(void) {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
}
#else
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define GPU_RUNTIME "cuda"
static __device__ __forceinline__ float gpu_shfl_xor(float v, int m) {
    return __shfl_xor_sync(0xffffffffu, v, m);
}
static __device__ __forceinline__ int gpu_shfl_xor_i(int v, int m) {
    return __shfl_xor_sync(0xffffffffu, v, m);
}
static __device__ __forceinline__ float gpu_shfl(float v, int l) {
    return __shfl_sync(0xffffffffu, v, l);
}
static __device__ __forceinline__ int gpu_shfl_up_i(int v, int d) {
    return __shfl_up_sync(0xffffffffu, v, d);
}
static __device__ __forceinline__ void gpu_syncwarp(void) {
    __syncwarp();
}
#endif

#define WARP 32

/* A kernel parameter that device code may take the address of without a local copy. */
#ifdef HALO_HIP
#define GPU_GRID_CONST
#else
#define GPU_GRID_CONST __grid_constant__
#endif

#endif
