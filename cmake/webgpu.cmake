# webgpu.cmake - the WebGPU side of the build: Dawn, the GPU layer, the WebGPU
# backend, and the WGSL kernels embedded as C strings.
#
#   WGML_DAWN_DIR     a Dawn install: include/webgpu/webgpu.h and lib/libwebgpu_dawn.so
#                     (Dawn's own builds) or lib/libwebgpu_wrapper.so (npm bun-webgpu,
#                     what scripts/setup-deps.sh puts in deps/dawn, the default)
#   WGML_WEBGPU       AUTO (default: ON when a Dawn is found), ON or OFF
#   WGML_DAWN_ABI_CHECK  AUTO (default), ON or OFF: check that the header matches the
#                     npm .so's ABI (feature numbers, instance descriptor, WGPULimits);
#                     AUTO means ON for deps/dawn, OFF for any other Dawn, whose
#                     header is its own
#   WGML_ICD_DIR      Vulkan ICD jsons of the software adapters, compiled in so that the
#                     CLI finds them without environment variables (default deps/icd)

set(WGML_DAWN_DIR "${CMAKE_SOURCE_DIR}/deps/dawn" CACHE PATH "Dawn install (include/webgpu/webgpu.h, lib/)")
set(WGML_ICD_DIR "${CMAKE_SOURCE_DIR}/deps/icd" CACHE PATH "Vulkan ICD jsons of the software adapters")

set(WGML_WEBGPU AUTO CACHE STRING "Build the WebGPU (Dawn) GPU layer and backend: AUTO, ON or OFF")
set_property(CACHE WGML_WEBGPU PROPERTY STRINGS AUTO ON OFF)
set(WGML_DAWN_ABI_CHECK AUTO CACHE STRING "Check webgpu.h against the npm bun-webgpu .so's ABI: AUTO, ON or OFF")
set_property(CACHE WGML_DAWN_ABI_CHECK PROPERTY STRINGS AUTO ON OFF)

# Searched again whenever WGML_DAWN_DIR changes (and while not found).
if(NOT "${WGML_DAWN_DIR}" STREQUAL "${_WGML_DAWN_DIR_SEARCHED}")
  unset(WGML_DAWN_LIBRARY CACHE)
endif()
find_library(WGML_DAWN_LIBRARY NAMES webgpu_dawn webgpu_wrapper
             PATHS "${WGML_DAWN_DIR}/lib" NO_DEFAULT_PATH)
set(_WGML_DAWN_DIR_SEARCHED "${WGML_DAWN_DIR}" CACHE INTERNAL "")
if(WGML_DAWN_LIBRARY AND EXISTS "${WGML_DAWN_DIR}/include/webgpu/webgpu.h")
  set(_wgml_dawn_found ON)
else()
  set(_wgml_dawn_found OFF)
endif()
if(WGML_WEBGPU STREQUAL "AUTO")
  set(_wgml_webgpu ${_wgml_dawn_found})
elseif(WGML_WEBGPU)
  set(_wgml_webgpu ON)
else()
  set(_wgml_webgpu OFF)
endif()

get_filename_component(_wgml_default_dawn "${CMAKE_SOURCE_DIR}/deps/dawn" ABSOLUTE)
get_filename_component(_wgml_dawn_abs "${WGML_DAWN_DIR}" ABSOLUTE)
if(WGML_DAWN_ABI_CHECK STREQUAL "AUTO")
  if(_wgml_dawn_abs STREQUAL _wgml_default_dawn)
    set(_wgml_abi_check ON)
  else()
    set(_wgml_abi_check OFF)
  endif()
elseif(WGML_DAWN_ABI_CHECK)
  set(_wgml_abi_check ON)
else()
  set(_wgml_abi_check OFF)
endif()

# ---- WGSL kernels -> generated C ------------------------------------------------
# Every src/backend/webgpu/kernels/*.wgsl becomes an entry of a {name, source}
# table (name = file name without .wgsl), looked up with wgml_wgsl_source().
# Built in every configuration: the browser build needs the kernels too.
function(wgml_embed_wgsl target)
  file(GLOB _wgsl CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/src/backend/webgpu/kernels/*.wgsl")
  list(SORT _wgsl)
  set(_out "${CMAKE_BINARY_DIR}/generated/wgsl_sources.c")
  string(REPLACE ";" "|" _files "${_wgsl}")
  add_custom_command(
    OUTPUT "${_out}"
    COMMAND "${CMAKE_COMMAND}" "-DOUT=${_out}" "-DFILES=${_files}" -P "${CMAKE_SOURCE_DIR}/cmake/embed_wgsl.cmake"
    DEPENDS ${_wgsl} "${CMAKE_SOURCE_DIR}/cmake/embed_wgsl.cmake"
    COMMENT "Embedding WGSL kernels"
    VERBATIM)
  target_sources(${target} PRIVATE "${_out}")
endfunction()
wgml_embed_wgsl(wgml_objects)

if(NOT _wgml_webgpu)
  if(NOT _wgml_dawn_found)
    message(STATUS "wgml: WebGPU off: no Dawn in ${WGML_DAWN_DIR} (run scripts/setup-deps.sh, or set WGML_DAWN_DIR)")
  else()
    message(STATUS "wgml: WebGPU off (WGML_WEBGPU=${WGML_WEBGPU})")
  endif()
  return()
endif()
if(NOT _wgml_dawn_found)
  message(FATAL_ERROR "WGML_WEBGPU is ON but ${WGML_DAWN_DIR} has no include/webgpu/webgpu.h and "
                      "lib/libwebgpu_dawn.so or lib/libwebgpu_wrapper.so: run scripts/setup-deps.sh "
                      "or point WGML_DAWN_DIR at a Dawn install")
endif()

# Dawn as an imported library. The npm build has no SONAME: IMPORTED_NO_SONAME
# makes CMake link it as -L<dir> -l<name>, so that the binaries record the bare
# name and find it through the rpath, not through the build machine's path.
# CMake puts Dawn's folder in the build tree's rpath of every binary that links
# it, and replaces that with the INSTALL_RPATH at install (cmake/install.cmake).
add_library(wgml_dawn SHARED IMPORTED GLOBAL) # GLOBAL: tests/CMakeLists.txt asks for it
set_target_properties(wgml_dawn PROPERTIES
  IMPORTED_LOCATION "${WGML_DAWN_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${WGML_DAWN_DIR}/include")
if(WGML_DAWN_LIBRARY MATCHES "webgpu_wrapper")
  set_target_properties(wgml_dawn PROPERTIES IMPORTED_NO_SONAME TRUE)
endif()

# ---- what the header speaks ------------------------------------------------------
# Checked at every configure (results are not kept), so that a changed
# WGML_DAWN_DIR or a re-patched header is never judged by an old answer.
include(CheckCSourceCompiles)
set(CMAKE_REQUIRED_INCLUDES "${WGML_DAWN_DIR}/include")
set(CMAKE_REQUIRED_QUIET ON)
unset(WGML_DAWN_INSTANCE_CAPABILITIES CACHE)
unset(WGML_DAWN_INSTANCE_FEATURES CACHE)
unset(WGML_DAWN_ABI_OK CACHE)
# The npm .so takes WGPUInstanceCapabilities in the instance descriptor; Dawn's
# later headers (and releases) take a list of instance features instead.
check_c_source_compiles("
#include <webgpu/webgpu.h>
int main(void) { WGPUInstanceDescriptor d = WGPU_INSTANCE_DESCRIPTOR_INIT; d.capabilities.timedWaitAnyEnable = 1; return (int)d.capabilities.timedWaitAnyEnable - 1; }"
  WGML_DAWN_INSTANCE_CAPABILITIES)
if(NOT WGML_DAWN_INSTANCE_CAPABILITIES)
  check_c_source_compiles("
#include <webgpu/webgpu.h>
int main(void) { WGPUInstanceFeatureName f = WGPUInstanceFeatureName_TimedWaitAny; WGPUInstanceDescriptor d = WGPU_INSTANCE_DESCRIPTOR_INIT; d.requiredFeatureCount = 1; d.requiredFeatures = &f; return 0; }"
    WGML_DAWN_INSTANCE_FEATURES)
  if(NOT WGML_DAWN_INSTANCE_FEATURES)
    message(FATAL_ERROR "${WGML_DAWN_DIR}/include/webgpu/webgpu.h: neither WGPUInstanceDescriptor.capabilities "
                        "nor WGPUInstanceFeatureName_TimedWaitAny: this Dawn is too old or too new for wgml")
  endif()
endif()

# Dawn's blob cache (src/gpu/pipeline_cache.c): a device descriptor chain with load and
# store functions. Without it, the build runs with no pipeline cache on disk.
unset(WGML_DAWN_BLOB_CACHE CACHE)
check_c_source_compiles("
#include <webgpu/webgpu.h>
static size_t ld(void const *k, size_t ks, void *v, size_t vs, void *u) { return 0; }
static void st(void const *k, size_t ks, void const *v, size_t vs, void *u) {}
int main(void) { WGPUDawnCacheDeviceDescriptor d; d.chain.sType = WGPUSType_DawnCacheDeviceDescriptor;
  d.loadDataFunction = ld; d.storeDataFunction = st; d.functionUserdata = 0; d.isolationKey.length = 0;
  return (int)d.isolationKey.length; }"
  WGML_DAWN_BLOB_CACHE)

# The ABI of the npm .so (shared/docs/PLATFORM.md), checked against the header
# here and again, at every build, by static assertions in src/gpu/dawn_adapter.c.
if(_wgml_abi_check)
  check_c_source_compiles("
#include <webgpu/webgpu.h>
_Static_assert(WGPUFeatureName_TimestampQuery == 3, \"TimestampQuery\");
_Static_assert(WGPUFeatureName_ShaderF16 == 10, \"ShaderF16\");
_Static_assert(WGPUFeatureName_Subgroups == 17, \"Subgroups\");
_Static_assert(sizeof(WGPULimits) == 152, \"WGPULimits\");
_Static_assert(sizeof(WGPUInstanceDescriptor) == 4 * sizeof(void *), \"WGPUInstanceDescriptor\");
int main(void) { return 0; }"
    WGML_DAWN_ABI_OK)
  if(NOT WGML_DAWN_ABI_OK)
    message(FATAL_ERROR "${WGML_DAWN_DIR}/include/webgpu/webgpu.h does not match the ABI of the npm "
                        "bun-webgpu-linux-x64@0.1.7 .so (feature numbers TimestampQuery=3, ShaderF16=10, "
                        "Subgroups=17; sizeof(WGPULimits)=152; instance descriptor with capabilities). "
                        "Re-run scripts/setup-deps.sh, or for your own Dawn set -DWGML_DAWN_ABI_CHECK=OFF.")
  endif()
endif()
unset(CMAKE_REQUIRED_INCLUDES)
unset(CMAKE_REQUIRED_QUIET)

# ---- sources -------------------------------------------------------------------------
# (pipeline_cache.c: Dawn's blob cache on disk, which the browser build has no use for)
file(GLOB _wgml_webgpu_sources CONFIGURE_DEPENDS
  "${CMAKE_SOURCE_DIR}/src/gpu/dawn*.c"
  "${CMAKE_SOURCE_DIR}/src/gpu/pipeline_cache.c"
  "${CMAKE_SOURCE_DIR}/src/backend/webgpu/*.c")
target_sources(wgml_objects PRIVATE ${_wgml_webgpu_sources})
target_link_libraries(wgml_objects PRIVATE wgml_dawn) # Dawn's headers
target_compile_definitions(wgml_objects PRIVATE WGML_HAVE_WEBGPU=1 "WGML_ICD_DIR=\"${WGML_ICD_DIR}\"")
if(WGML_DAWN_INSTANCE_CAPABILITIES)
  target_compile_definitions(wgml_objects PRIVATE WGML_DAWN_INSTANCE_CAPABILITIES=1)
endif()
if(WGML_DAWN_BLOB_CACHE)
  target_compile_definitions(wgml_objects PRIVATE WGML_DAWN_BLOB_CACHE=1)
  target_compile_definitions(wgml INTERFACE $<BUILD_INTERFACE:WGML_DAWN_BLOB_CACHE=1>) # the tests ask
else()
  message(STATUS "wgml: this Dawn's webgpu.h has no WGPUDawnCacheDeviceDescriptor: no pipeline cache on disk")
endif()
if(_wgml_abi_check)
  target_compile_definitions(wgml_objects PRIVATE WGML_DAWN_NPM_ABI=1)
endif()
# The libraries link Dawn; what links the static one links Dawn too (installed:
# wgml::dawn, defined by wgmlConfig.cmake), and the CLI and the tests see
# WGML_HAVE_WEBGPU.
target_link_libraries(wgml PUBLIC $<BUILD_INTERFACE:wgml_dawn> $<INSTALL_INTERFACE:wgml::dawn>)
target_compile_definitions(wgml INTERFACE $<BUILD_INTERFACE:WGML_HAVE_WEBGPU=1>)
if(TARGET wgml_shared)
  target_link_libraries(wgml_shared PRIVATE wgml_dawn)
endif()
message(STATUS "wgml: WebGPU on: ${WGML_DAWN_LIBRARY}; software adapters from ${WGML_ICD_DIR}")
