# The library, the CLI and the tests. Each folder's sources are globbed so that
# adding a file to a module needs no edit here.
set(WGML_SRC_DIRS src src/chat src/core src/format src/net src/text src/model src/model/llama src/model/bert src/model/kokoro src/model/whisper src/model/clip src/image src/audio src/tools src/backend src/backend/cpu)
set(WGML_LIB_SOURCES)
foreach(dir ${WGML_SRC_DIRS})
  file(GLOB _s CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${dir}/*.c)
  list(APPEND WGML_LIB_SOURCES ${_s})
endforeach()
# readers of JSON files (json-c): the library wgml_json, for the CLI and the tests
list(FILTER WGML_LIB_SOURCES EXCLUDE REGEX "_json[.]c$")
if(WGML_WASM) # the browser build (cmake/web.cmake): no mmap for the CLI's llama2.c converter, and
  # no downloads (the page fetches models itself, web/src): only the names of src/net/hub.c
  list(FILTER WGML_LIB_SOURCES EXCLUDE REGEX "/format/llama2c[.]c$")
  list(FILTER WGML_LIB_SOURCES EXCLUDE REGEX "/net/(fetch|http)[.]c$")
endif()
include(GNUInstallDirs)

# The sources are compiled once, into the object library wgml_objects (more
# sources and definitions are added to it by cmake/webgpu.cmake and
# cmake/web.cmake), which makes
#   wgml         the static library libwgml.a, always: the CLI and the tests link
#                it, as they use internal symbols too
#   wgml_shared  with -DBUILD_SHARED_LIBS=ON (native builds): the shared library
#                libwgml.so.0 (libwgml.so.<version>), which exports the functions
#                of include/wgml.h and nothing else, and is installed
#   wgml_so      without it, in every other native build (not the sanitizer and
#                fuzz builds): the same shared library from the same objects,
#                built beside libwgml.a but not installed (cmake --install of such
#                a build stays the static library): what the Python package
#                (python/, docs/python.md) loads from <build>/libwgml.so
# The objects are position-independent in every native build, so that one compile
# makes both libraries; -fno-semantic-interposition keeps the calls between the
# library's own functions direct (inlinable) as in a non-PIC build.
# WGML_LIB_TARGETS lists the libraries made, for what every one of them needs.
add_library(wgml_objects OBJECT ${WGML_LIB_SOURCES})
target_include_directories(wgml_objects PUBLIC ${CMAKE_SOURCE_DIR}/include PRIVATE ${CMAKE_SOURCE_DIR}/src)
add_library(wgml STATIC $<TARGET_OBJECTS:wgml_objects>)
set(WGML_LIB_TARGETS wgml)

set(WGML_SO_TARGET "")
if(NOT WGML_WASM)
  if(BUILD_SHARED_LIBS)
    set(WGML_SO_TARGET wgml_shared)
  elseif(NOT WGML_SANITIZE AND NOT WGML_FUZZ)
    set(WGML_SO_TARGET wgml_so)
  endif()
endif()
if(WGML_SO_TARGET)
  set_target_properties(wgml_objects PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(wgml_objects PRIVATE -fno-semantic-interposition)
  endif()
  add_library(${WGML_SO_TARGET} SHARED $<TARGET_OBJECTS:wgml_objects>)
  set_target_properties(${WGML_SO_TARGET} PROPERTIES
    OUTPUT_NAME wgml
    VERSION ${PROJECT_VERSION}
    SOVERSION ${PROJECT_VERSION_MAJOR})
  # The exported symbols: every function include/wgml.h declares, read from the
  # header at configure time (a change to the header configures again).
  file(READ ${CMAKE_SOURCE_DIR}/include/wgml.h _wgml_h)
  string(REGEX MATCHALL "wgml_[a-z0-9_]+[(]" _wgml_api "${_wgml_h}")
  list(TRANSFORM _wgml_api REPLACE "[(]$" "")
  list(REMOVE_DUPLICATES _wgml_api)
  list(SORT _wgml_api)
  list(JOIN _wgml_api ";\n    " _wgml_api)
  set(_wgml_map ${CMAKE_BINARY_DIR}/generated/wgml.map)
  file(CONFIGURE OUTPUT ${_wgml_map} CONTENT "/* the symbols libwgml.so exports: the functions of include/wgml.h */\n{\n  global:\n    ${_wgml_api};\n  local: *;\n};\n")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/include/wgml.h)
  target_link_options(${WGML_SO_TARGET} PRIVATE "LINKER:--version-script=${_wgml_map}" "LINKER:--no-undefined")
  set_property(TARGET ${WGML_SO_TARGET} APPEND PROPERTY LINK_DEPENDS ${_wgml_map})
  list(APPEND WGML_LIB_TARGETS ${WGML_SO_TARGET})
endif()

foreach(_t ${WGML_LIB_TARGETS})
  target_include_directories(${_t} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()
if(NOT WGML_WASM)
  find_package(Threads REQUIRED)
  # zlib (the zlib licence): Whisper's compression-ratio check measures the text with zlib's
  # own deflate, as the official transcribe() does (model/whisper/whisper_ratio.c). The
  # browser build has none: that check is off there.
  find_package(ZLIB REQUIRED)
  target_compile_definitions(wgml_objects PRIVATE WGML_HAVE_ZLIB=1)
  target_link_libraries(wgml_objects PUBLIC Threads::Threads ZLIB::ZLIB)
  target_link_libraries(wgml PUBLIC Threads::Threads ZLIB::ZLIB m)
  if(WGML_SO_TARGET)
    target_link_libraries(${WGML_SO_TARGET} PRIVATE Threads::Threads ZLIB::ZLIB m)
  endif()
  # Models by URL (src/net): libcurl (Debian libcurl4-openssl-dev, the curl licence, MIT-like) for
  # HTTP, and OpenSSL's libcrypto (Apache-2.0) for SHA-256. Without them a model by URL is
  # WGML_ERR_UNSUPPORTED, saying so.
  find_package(CURL QUIET)
  find_package(OpenSSL QUIET COMPONENTS Crypto)
  if(CURL_FOUND AND OpenSSL_FOUND)
    target_compile_definitions(wgml_objects PRIVATE WGML_HAVE_CURL=1)
    target_link_libraries(wgml_objects PUBLIC CURL::libcurl OpenSSL::Crypto)
    target_link_libraries(wgml PUBLIC CURL::libcurl OpenSSL::Crypto)
    if(WGML_SO_TARGET)
      target_link_libraries(${WGML_SO_TARGET} PRIVATE CURL::libcurl OpenSSL::Crypto)
    endif()
    set(WGML_HAVE_CURL ON)
  else()
    message(STATUS "libcurl or libcrypto not found (apt install libcurl4-openssl-dev libssl-dev): no models by URL")
    set(WGML_HAVE_CURL OFF)
  endif()
endif()

file(GLOB WGML_CLI_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tools/wgml/*.c)
if(WGML_CLI_SOURCES AND NOT WGML_WASM)
  add_executable(wgml_cli ${WGML_CLI_SOURCES})
  set_target_properties(wgml_cli PROPERTIES OUTPUT_NAME wgml)
  target_include_directories(wgml_cli PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tools/wgml)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(JSONC REQUIRED IMPORTED_TARGET json-c)
  add_library(wgml_json STATIC ${CMAKE_SOURCE_DIR}/src/model/kokoro/kokoro_config_json.c)
  target_include_directories(wgml_json PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(wgml_json PUBLIC wgml PkgConfig::JSONC)
  target_link_libraries(wgml_cli PRIVATE wgml_json wgml PkgConfig::JSONC)
  # Audio files for `wgml transcribe` and the server's /v1/audio/transcriptions (tools/wgml/audio_file.c):
  # libsndfile (Debian libsndfile1-dev, LGPL-2.1), linked by the CLI only, never by libwgml.
  pkg_check_modules(SNDFILE REQUIRED IMPORTED_TARGET sndfile)
  target_link_libraries(wgml_cli PRIVATE PkgConfig::SNDFILE)
  # Image files for the vision commands and the server's image inputs (tools/wgml/image_file.c):
  # libjpeg-turbo (Debian libjpeg-dev, IJG/BSD) and libpng (Debian libpng-dev, libpng licence),
  # linked by the CLI only, never by libwgml.
  pkg_check_modules(LIBJPEG REQUIRED IMPORTED_TARGET libjpeg)
  pkg_check_modules(LIBPNG REQUIRED IMPORTED_TARGET libpng)
  target_link_libraries(wgml_cli PRIVATE PkgConfig::LIBJPEG PkgConfig::LIBPNG)
  # `wgml serve` needs civetweb (Debian libcivetweb-dev); without it the command is left out.
  find_path(CIVETWEB_INCLUDE_DIR civetweb.h)
  find_library(CIVETWEB_LIBRARY civetweb)
  if(CIVETWEB_INCLUDE_DIR AND CIVETWEB_LIBRARY)
    target_include_directories(wgml_cli PRIVATE ${CIVETWEB_INCLUDE_DIR})
    target_link_libraries(wgml_cli PRIVATE ${CIVETWEB_LIBRARY})
    target_compile_definitions(wgml_cli PRIVATE WGML_HAVE_SERVE=1)
  else()
    message(STATUS "civetweb not found (apt install libcivetweb-dev): wgml serve is left out")
    list(FILTER WGML_CLI_SOURCES EXCLUDE REGEX "/(cmd_serve|serve_[a-z]+)[.]c$")
    set_property(TARGET wgml_cli PROPERTY SOURCES ${WGML_CLI_SOURCES})
  endif()
  # `wgml chat` edits lines with libedit (Debian libedit-dev, BSD) when it is there.
  option(WGML_LIBEDIT "Line editing in wgml chat with libedit, when found" ON)
  if(WGML_LIBEDIT)
    pkg_check_modules(LIBEDIT IMPORTED_TARGET libedit)
    if(LIBEDIT_FOUND)
      target_link_libraries(wgml_cli PRIVATE PkgConfig::LIBEDIT)
      target_compile_definitions(wgml_cli PRIVATE WGML_HAVE_LIBEDIT=1)
    endif()
  endif()
endif()

if(WGML_BUILD_TESTS AND NOT WGML_WASM)
  enable_testing()
  add_subdirectory(tests)
endif()

# WebGPU (Dawn) backend and GPU layer: see cmake/webgpu.cmake.
if(EXISTS ${CMAKE_SOURCE_DIR}/cmake/webgpu.cmake)
  include(cmake/webgpu.cmake)
endif()
# (webgpu.cmake links Dawn to wgml_shared; the uninstalled wgml_so needs it too)
if(TARGET wgml_so AND TARGET wgml_dawn)
  target_link_libraries(wgml_so PRIVATE wgml_dawn)
endif()

if(EXISTS ${CMAKE_SOURCE_DIR}/cmake/fuzz.cmake AND NOT WGML_WASM)
  include(cmake/fuzz.cmake)
endif()

# The browser build: the wasm module itself (WGML_WASM), or from a native
# build, a sub-build that makes it (WGML_WEB): see cmake/web.cmake.
include(cmake/web.cmake)
