# wasm32-wasi.cmake - CMake toolchain for the browser build of wgml: clang (14 or
# later) targeting wasm32-wasi with Debian's wasi-libc (/usr/include/wasm32-wasi,
# /usr/lib/wasm32-wasi) and compiler-rt builtins (libclang-rt-14-dev-wasm32).
#
#   cmake -S . -B build-wasm -G Ninja -DCMAKE_TOOLCHAIN_FILE=cmake/wasm32-wasi.cmake
#   ninja -C build-wasm          # -> web/dist/wgml.wasm (see cmake/web.cmake)
#
# WASM SIMD128 is on for every file (-msimd128): the CPU kernels use it.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR wasm32)
set(WGML_WASM ON CACHE BOOL "Build for WebAssembly (the browser)" FORCE)

find_program(WGML_WASM_CC NAMES clang-14 clang-15 clang-16 clang REQUIRED)
find_program(WGML_WASM_AR NAMES llvm-ar-14 llvm-ar-15 llvm-ar-16 llvm-ar REQUIRED)
find_program(WGML_WASM_RANLIB NAMES llvm-ranlib-14 llvm-ranlib-15 llvm-ranlib-16 llvm-ranlib REQUIRED)
set(CMAKE_C_COMPILER "${WGML_WASM_CC}")
set(CMAKE_C_COMPILER_TARGET wasm32-wasi)
set(CMAKE_AR "${WGML_WASM_AR}" CACHE FILEPATH "" FORCE)
set(CMAKE_RANLIB "${WGML_WASM_RANLIB}" CACHE FILEPATH "" FORCE)
set(CMAKE_C_FLAGS_INIT "-msimd128")
# Checks compile a static library: linking a wasm executable needs exports.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(WGML_WEBGPU OFF CACHE STRING "No Dawn in the browser build: src/gpu/web.c instead" FORCE)
set(WGML_BUILD_TESTS OFF CACHE BOOL "" FORCE)
