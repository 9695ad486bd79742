# The library, the CLI and the tests. Each folder's sources are globbed so that
# adding a file to a module needs no edit here.
set(WGML_SRC_DIRS src src/core src/format src/text src/model src/backend src/backend/cpu)
set(WGML_LIB_SOURCES)
foreach(dir ${WGML_SRC_DIRS})
  file(GLOB _s CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.c)
  list(APPEND WGML_LIB_SOURCES ${_s})
endforeach()

add_library(wgml STATIC ${WGML_LIB_SOURCES})
target_include_directories(wgml PUBLIC ${CMAKE_SOURCE_DIR}/include PRIVATE ${CMAKE_SOURCE_DIR}/src)
find_package(Threads REQUIRED)
target_link_libraries(wgml PUBLIC Threads::Threads m)

file(GLOB WGML_CLI_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tools/wgml/*.c)
if(WGML_CLI_SOURCES)
  add_executable(wgml_cli ${WGML_CLI_SOURCES})
  set_target_properties(wgml_cli PROPERTIES OUTPUT_NAME wgml)
  target_include_directories(wgml_cli PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tools/wgml)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(JSONC REQUIRED IMPORTED_TARGET json-c)
  target_link_libraries(wgml_cli PRIVATE wgml PkgConfig::JSONC)
endif()

if(WGML_BUILD_TESTS)
  enable_testing()
  add_subdirectory(tests)
endif()

# WebGPU (Dawn) backend and GPU layer: see cmake/webgpu.cmake.
if(EXISTS ${CMAKE_SOURCE_DIR}/cmake/webgpu.cmake)
  include(cmake/webgpu.cmake)
endif()

if(EXISTS ${CMAKE_SOURCE_DIR}/cmake/fuzz.cmake)
  include(cmake/fuzz.cmake)
endif()
