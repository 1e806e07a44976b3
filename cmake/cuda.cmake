# The CUDA backend's toolchain. Architectures: every GPU generation halo targets gets machine
# code (A100 sm_80, Ada sm_89, H100/H200 sm_90, B200 sm_100, RTX 50xx sm_120, GB10/DGX Spark
# sm_121) plus PTX of the newest for later ones. Override with -DCMAKE_CUDA_ARCHITECTURES=90
# for a quicker build on one machine.
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80-real 89-real 90-real 100-real 120-real 121)
endif()
enable_language(CUDA)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
find_package(CUDAToolkit REQUIRED)
# Warnings of the host compiler and of nvcc itself; -Werror makes both errors.
add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>")
if(HALO_WERROR)
  add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings;-Xcompiler=-Werror>")
endif()
