# The CUDA backend's sources built as HIP with hipcc (gpu.h maps the runtime names). Debian 12's
# hipcc is ROCm 5.2: its device libraries stop at gfx1036 (RDNA2) and gfx90a (CDNA2), so the
# default targets here are gfx1030 and gfx90a; RDNA3 (gfx1100) needs ROCm >= 5.5 and Strix Halo
# (gfx1151) ROCm >= 6.4: set HALO_HIP_ARCHS (docs/hip.md). hipcc is called directly rather than
# through CMake's HIP language, which wants a /opt/rocm layout that Debian does not have.
find_program(HALO_HIPCC hipcc REQUIRED)
set(HALO_HIP_ARCHS "gfx1030;gfx90a" CACHE STRING "AMD GPU targets for -DHALO_HIP=ON")
set(HALO_HIP_DEVICE_LIBS "" CACHE PATH "ROCm device bitcode folder (Debian: found by itself)")
if(NOT HALO_HIP_DEVICE_LIBS AND EXISTS /usr/lib/x86_64-linux-gnu/amdgcn/bitcode)
  set(HALO_HIP_DEVICE_LIBS /usr/lib/x86_64-linux-gnu/amdgcn/bitcode)
endif()
find_library(HALO_AMDHIP64 amdhip64 REQUIRED)

function(halo_add_hip_sources target)
  set(flags -x hip -std=c++17 -O2 -g0 -DHALO_HIP=1 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64
      -I${PROJECT_SOURCE_DIR}/src -I${PROJECT_SOURCE_DIR}/include -Wall -Wextra
      -Wno-unused-parameter -fPIC)
  foreach(arch ${HALO_HIP_ARCHS})
    list(APPEND flags --offload-arch=${arch})
  endforeach()
  if(HALO_HIP_DEVICE_LIBS)
    list(APPEND flags --rocm-device-lib-path=${HALO_HIP_DEVICE_LIBS})
  endif()
  if(HALO_WERROR)
    list(APPEND flags -Werror)
  endif()
  set(objects)
  foreach(src ${ARGN})
    get_filename_component(name ${src} NAME_WE)
    set(obj ${CMAKE_CURRENT_BINARY_DIR}/hip/${name}.o)
    file(GLOB headers ${PROJECT_SOURCE_DIR}/src/backend/cuda/*.h
         ${PROJECT_SOURCE_DIR}/src/backend/cuda/*.cuh ${PROJECT_SOURCE_DIR}/src/backend/backend.h)
    add_custom_command(OUTPUT ${obj}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/hip
      COMMAND ${HALO_HIPCC} ${flags} -c ${CMAKE_CURRENT_SOURCE_DIR}/${src} -o ${obj}
      DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${src} ${headers}
      COMMENT "hipcc ${src}" VERBATIM)
    list(APPEND objects ${obj})
  endforeach()
  # The objects are built in this directory; the library (another directory) waits for them.
  add_custom_target(${target}_hip_objects DEPENDS ${objects})
  add_dependencies(${target} ${target}_hip_objects)
  set_source_files_properties(${objects} DIRECTORY ${PROJECT_SOURCE_DIR}
                              PROPERTIES EXTERNAL_OBJECT TRUE GENERATED TRUE)
  target_sources(${target} PRIVATE ${objects})
  target_link_libraries(${target} PUBLIC ${HALO_AMDHIP64} stdc++)
endfunction()
