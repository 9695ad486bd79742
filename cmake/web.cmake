# web.cmake - the browser build of wgml (docs/web.md).
#
# With the wasm32-wasi toolchain (WGML_WASM, cmake/wasm32-wasi.cmake) it makes
#   web/dist/wgml.wasm           the library + the GPU layer over navigator.gpu
#                                (src/gpu/web.c) + the WebGPU backend + the C ABI
#                                the JS side calls (src/web/), a WASI reactor module
#   web/dist/wgml-asyncify.wasm  the same after binaryen's Asyncify pass, for
#                                browsers without JSPI (when wasm-opt is found)
#   web/dist/wgml-threads.wasm   the same objects linked with a shared, imported
#                                memory and src/web/web_threads.c: the CPU
#                                backend on several Web Workers (web/thread.js),
#                                for cross-origin isolated pages with JSPI
#
# In a native build, WGML_WEB (AUTO, ON, OFF) adds a sub-build in <build>/wasm
# that makes them as part of the normal build; AUTO means ON when clang can
# target wasm32-wasi with wasi-libc here, and off for sanitizer builds.
set(WGML_WEB_DIST "${CMAKE_SOURCE_DIR}/web/dist" CACHE PATH "Where the browser build puts wgml.wasm")

if(WGML_WASM)
  file(GLOB _wgml_web_lib CONFIGURE_DEPENDS
    "${CMAKE_SOURCE_DIR}/src/gpu/web*.c" "${CMAKE_SOURCE_DIR}/src/backend/webgpu/*.c")
  target_sources(wgml_objects PRIVATE ${_wgml_web_lib})
  target_compile_definitions(wgml_objects PUBLIC WGML_HAVE_WEBGPU=1)
  target_compile_definitions(wgml INTERFACE WGML_HAVE_WEBGPU=1)

  file(GLOB _wgml_web_glue CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/src/web/*.c")
  list(FILTER _wgml_web_glue EXCLUDE REGEX "/web_threads[.]c$")
  add_executable(wgml_wasm ${_wgml_web_glue})
  target_include_directories(wgml_wasm PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(wgml_wasm PRIVATE wgml)
  set_target_properties(wgml_wasm PROPERTIES OUTPUT_NAME wgml SUFFIX ".wasm" RUNTIME_OUTPUT_DIRECTORY "${WGML_WEB_DIST}")
  # A reactor (no main; _initialize runs the constructors), a 1 MiB stack,
  # memory that grows up to the 4 GiB a wasm32 address space allows.
  set(_wgml_wasm_link -mexec-model=reactor -Wl,-z,stack-size=1048576
      -Wl,--initial-memory=16777216 -Wl,--max-memory=4294967296 -Wl,--strip-debug)
  target_link_options(wgml_wasm PRIVATE ${_wgml_wasm_link})

  # With threads: the memory is shared and imported (web/engine.js creates it,
  # 256 pages up to 65536, and hands it to every worker), __stack_pointer is
  # exported so that each worker's instance gets its own stack, and the glue
  # adds the workers' entry points. wasi-libc (Debian's has no threads) was not
  # compiled with atomics, so the linker's feature check has to be told: none
  # of libc's state is touched off the main thread (workers run kernels only,
  # and never allocate: src/core/threadpool.c).
  add_executable(wgml_wasm_threads ${_wgml_web_glue} "${CMAKE_SOURCE_DIR}/src/web/web_threads.c")
  target_include_directories(wgml_wasm_threads PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_link_libraries(wgml_wasm_threads PRIVATE wgml)
  set_target_properties(wgml_wasm_threads PROPERTIES OUTPUT_NAME wgml-threads SUFFIX ".wasm"
                        RUNTIME_OUTPUT_DIRECTORY "${WGML_WEB_DIST}")
  target_link_options(wgml_wasm_threads PRIVATE ${_wgml_wasm_link} -Wl,--shared-memory -Wl,--import-memory
                      -Wl,--no-check-features -Wl,--export=__stack_pointer)

  # Asyncify: rewrites the module so that the imports JS answers asynchronously
  # (GPU waits, stream reads, the per-token, per-audio-chunk and per-segment yields) can unwind and rewind the
  # wasm stack. The list must match the suspending imports of web/engine.js.
  find_program(WGML_WASM_OPT wasm-opt)
  if(WGML_WASM_OPT)
    set(_async_imports
      wgml.gpu_create wgml.gpu_buffer_create wgml.gpu_kernel_create wgml.gpu_bindgroup_create
      wgml.gpu_submit wgml.read wgml.token wgml.audio wgml.segment)
    string(REPLACE ";" "," _async_imports "${_async_imports}")
    add_custom_command(TARGET wgml_wasm POST_BUILD
      COMMAND "${WGML_WASM_OPT}" -O2 --enable-simd --enable-bulk-memory --enable-sign-ext --enable-threads
              --enable-mutable-globals --enable-nontrapping-float-to-int
              --asyncify "--pass-arg=asyncify-imports@${_async_imports}"
              "${WGML_WEB_DIST}/wgml.wasm" -o "${WGML_WEB_DIST}/wgml-asyncify.wasm"
      COMMENT "Asyncify: web/dist/wgml-asyncify.wasm"
      VERBATIM)
  else()
    message(STATUS "wgml: no wasm-opt (Debian binaryen): no Asyncify build for browsers without JSPI")
  endif()
  return()
endif()

# ---- native build: the wasm as a sub-build ----------------------------------------
set(WGML_WEB AUTO CACHE STRING "Also build web/dist/wgml.wasm (a sub-build in <build>/wasm): AUTO, ON or OFF")
set_property(CACHE WGML_WEB PROPERTY STRINGS AUTO ON OFF)
find_program(WGML_CLANG_WASM NAMES clang-14 clang-15 clang-16 clang)
if(WGML_WEB STREQUAL "AUTO")
  if(WGML_CLANG_WASM AND EXISTS /usr/lib/wasm32-wasi/libc.a AND NOT WGML_SANITIZE AND NOT WGML_FUZZ)
    set(_wgml_web ON)
  else()
    set(_wgml_web OFF)
  endif()
elseif(WGML_WEB)
  set(_wgml_web ON)
else()
  set(_wgml_web OFF)
endif()
if(NOT _wgml_web)
  message(STATUS "wgml: browser build off (WGML_WEB=${WGML_WEB}; needs clang, wasi-libc and libclang-rt-14-dev-wasm32)")
  return()
endif()
include(ExternalProject)
ExternalProject_Add(wgml_web
  SOURCE_DIR "${CMAKE_SOURCE_DIR}"
  BINARY_DIR "${CMAKE_BINARY_DIR}/wasm"
  CMAKE_GENERATOR "${CMAKE_GENERATOR}"
  CMAKE_ARGS "-DCMAKE_TOOLCHAIN_FILE=${CMAKE_SOURCE_DIR}/cmake/wasm32-wasi.cmake"
             -DCMAKE_BUILD_TYPE=Release "-DWGML_WEB_DIST=${WGML_WEB_DIST}" "-DWGML_WERROR=${WGML_WERROR}"
  INSTALL_COMMAND ""
  BUILD_ALWAYS ON
  USES_TERMINAL_BUILD ON)
message(STATUS "wgml: browser build on: ${WGML_WEB_DIST}/wgml.wasm (sub-build in ${CMAKE_BINARY_DIR}/wasm)")
