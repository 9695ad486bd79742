# The library, the CLI and the tests. Each folder's sources are globbed so that
# adding a file to a module needs no edit here.
set(WGML_SRC_DIRS src src/core src/format src/text src/model src/backend src/backend/cpu)
set(WGML_LIB_SOURCES)
foreach(dir ${WGML_SRC_DIRS})
  file(GLOB _s CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.c)
  list(APPEND WGML_LIB_SOURCES ${_s})
endforeach()
if(WGML_WASM) # the browser build (cmake/web.cmake): no mmap for the CLI's llama2.c converter, no threads
  list(FILTER WGML_LIB_SOURCES EXCLUDE REGEX "/format/llama2c[.]c$")
endif()

add_library(wgml STATIC ${WGML_LIB_SOURCES})
target_include_directories(wgml PUBLIC ${CMAKE_SOURCE_DIR}/include PRIVATE ${CMAKE_SOURCE_DIR}/src)
if(NOT WGML_WASM)
  find_package(Threads REQUIRED)
  target_link_libraries(wgml PUBLIC Threads::Threads m)
endif()

file(GLOB WGML_CLI_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tools/wgml/*.c)
if(WGML_CLI_SOURCES AND NOT WGML_WASM)
  add_executable(wgml_cli ${WGML_CLI_SOURCES})
  set_target_properties(wgml_cli PROPERTIES OUTPUT_NAME wgml)
  target_include_directories(wgml_cli PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tools/wgml)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(JSONC REQUIRED IMPORTED_TARGET json-c)
  target_link_libraries(wgml_cli PRIVATE wgml PkgConfig::JSONC)
endif()

if(WGML_BUILD_TESTS AND NOT WGML_WASM)
  enable_testing()
  add_subdirectory(tests)
endif()

# WebGPU (Dawn) backend and GPU layer: see cmake/webgpu.cmake.
if(EXISTS ${CMAKE_SOURCE_DIR}/cmake/webgpu.cmake)
  include(cmake/webgpu.cmake)
endif()

if(EXISTS ${CMAKE_SOURCE_DIR}/cmake/fuzz.cmake AND NOT WGML_WASM)
  include(cmake/fuzz.cmake)
endif()

# The browser build: the wasm module itself (WGML_WASM), or from a native
# build, a sub-build that makes it (WGML_WEB): see cmake/web.cmake.
include(cmake/web.cmake)
