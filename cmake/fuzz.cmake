# Fuzz targets (libFuzzer), see docs/fuzzing.md:
#   cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DWGML_FUZZ=ON
# builds build-fuzz/fuzz/fuzz_{gguf,llama2c,tokenizer,model_load,pth,chat_template,g2p,kokoro_config,cli,serve,
# whisper_bin,tiktoken,grammar,json_schema,safetensors,hf,hf_tokenizer,hub,image} against the
# library sources compiled again with coverage instrumentation and ASan+UBSan,
# and wgml_fuzz_seeds (the seed-corpus writer) against the regular library.
# The instrumented library is built with FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
# (the usual convention), which skips checks a fuzzer cannot get past: the CRC
# of a checkpoint's pickle (src/format/pth.c).
option(WGML_FUZZ "Build the libFuzzer targets in fuzz/ (needs clang)" OFF)
option(WGML_FUZZ_TOKENIZER "Build fuzz_tokenizer (needs the src/text/tokenizer.h implementation)" ON)

if(WGML_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "WGML_FUZZ needs clang for libFuzzer: configure with -DCMAKE_C_COMPILER=clang")
  endif()
  set(WGML_FUZZ_SANITIZERS address,undefined)
  set(WGML_FUZZ_COMPILE_FLAGS -g -O1 -fno-omit-frame-pointer -fno-sanitize-recover=undefined
      -fsanitize=fuzzer-no-link,${WGML_FUZZ_SANITIZERS})

  # The library once more, instrumented.
  add_library(wgml_fuzzlib STATIC ${WGML_LIB_SOURCES})
  target_include_directories(wgml_fuzzlib PUBLIC ${CMAKE_SOURCE_DIR}/include PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_compile_options(wgml_fuzzlib PRIVATE ${WGML_FUZZ_COMPILE_FLAGS})
  target_compile_definitions(wgml_fuzzlib PRIVATE FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
  find_package(ZLIB REQUIRED)
  target_compile_definitions(wgml_fuzzlib PRIVATE WGML_HAVE_ZLIB=1)
  target_link_libraries(wgml_fuzzlib PUBLIC Threads::Threads ZLIB::ZLIB m)

  set(WGML_FUZZ_TARGETS gguf llama2c model_load pth chat_template g2p whisper_bin tiktoken grammar json_schema safetensors hf
      hf_tokenizer hub)
  if(WGML_FUZZ_TOKENIZER)
    list(APPEND WGML_FUZZ_TARGETS tokenizer)
  endif()
  foreach(t ${WGML_FUZZ_TARGETS})
    add_executable(fuzz_${t} ${CMAKE_SOURCE_DIR}/fuzz/fuzz_${t}.c)
    target_include_directories(fuzz_${t} PRIVATE ${CMAKE_SOURCE_DIR}/src)
    target_compile_options(fuzz_${t} PRIVATE ${WGML_FUZZ_COMPILE_FLAGS})
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer,${WGML_FUZZ_SANITIZERS})
    target_link_libraries(fuzz_${t} PRIVATE wgml_fuzzlib)
    set_target_properties(fuzz_${t} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
  endforeach()

  # The command line's file-handling subcommands (tools/wgml, without main.c).
  set(WGML_FUZZ_CLI_SOURCES cli_util.c cli_opts.c cmd_run.c cmd_info.c cmd_tokenize.c cmd_convert.c cmd_quantize.c)
  list(TRANSFORM WGML_FUZZ_CLI_SOURCES PREPEND ${CMAKE_SOURCE_DIR}/tools/wgml/)
  # cmd_convert.c reads Kokoro's config.json: kokoro_config_json.c (json-c), as in the CLI
  add_executable(fuzz_cli ${CMAKE_SOURCE_DIR}/fuzz/fuzz_cli.c ${WGML_FUZZ_CLI_SOURCES}
                 ${CMAKE_SOURCE_DIR}/src/model/kokoro/kokoro_config_json.c)
  target_include_directories(fuzz_cli PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tools/wgml)
  target_compile_options(fuzz_cli PRIVATE ${WGML_FUZZ_COMPILE_FLAGS})
  target_link_options(fuzz_cli PRIVATE -fsanitize=fuzzer,${WGML_FUZZ_SANITIZERS})
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(JSONC REQUIRED IMPORTED_TARGET json-c)
  target_link_libraries(fuzz_cli PRIVATE wgml_fuzzlib PkgConfig::JSONC)
  set_target_properties(fuzz_cli PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)

  # Kokoro's config.json reader (json-c, not in libwgml) and the key list it sizes.
  add_executable(fuzz_kokoro_config ${CMAKE_SOURCE_DIR}/fuzz/fuzz_kokoro_config.c
                 ${CMAKE_SOURCE_DIR}/src/model/kokoro/kokoro_config_json.c)
  target_include_directories(fuzz_kokoro_config PRIVATE ${CMAKE_SOURCE_DIR}/src)
  target_compile_options(fuzz_kokoro_config PRIVATE ${WGML_FUZZ_COMPILE_FLAGS})
  target_link_options(fuzz_kokoro_config PRIVATE -fsanitize=fuzzer,${WGML_FUZZ_SANITIZERS})
  target_link_libraries(fuzz_kokoro_config PRIVATE wgml_fuzzlib PkgConfig::JSONC)
  set_target_properties(fuzz_kokoro_config PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)

  # The CLI's image reader (tools/wgml/image_file.c) decoding from memory, linked as the CLI links
  # it: libjpeg-turbo and libpng (Debian's, not instrumented); with the define the PNG CRCs and
  # Adler-32 are not checked, as a fuzzer cannot forge them.
  pkg_check_modules(LIBJPEG REQUIRED IMPORTED_TARGET libjpeg)
  pkg_check_modules(LIBPNG REQUIRED IMPORTED_TARGET libpng)
  add_executable(fuzz_image ${CMAKE_SOURCE_DIR}/fuzz/fuzz_image.c ${CMAKE_SOURCE_DIR}/tools/wgml/image_file.c)
  target_include_directories(fuzz_image PRIVATE ${CMAKE_SOURCE_DIR}/tools/wgml ${CMAKE_SOURCE_DIR}/include)
  target_compile_options(fuzz_image PRIVATE ${WGML_FUZZ_COMPILE_FLAGS})
  target_compile_definitions(fuzz_image PRIVATE FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
  target_link_options(fuzz_image PRIVATE -fsanitize=fuzzer,${WGML_FUZZ_SANITIZERS})
  target_link_libraries(fuzz_image PRIVATE PkgConfig::LIBJPEG PkgConfig::LIBPNG ZLIB::ZLIB)
  set_target_properties(fuzz_image PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)

  # The HTTP server (`wgml serve`: tools/wgml/serve_*.c), linked as the CLI links it: civetweb
  # (Debian's libcivetweb-dev, not instrumented), json-c, libsndfile (the audio uploads of
  # serve_transcribe.c, through audio_file.c) and libjpeg/libpng (the image inputs of serve_vision.c,
  # through image_file.c); none instrumented. Without civetweb it is left out.
  find_path(CIVETWEB_INCLUDE_DIR civetweb.h)
  find_library(CIVETWEB_LIBRARY civetweb)
  if(CIVETWEB_INCLUDE_DIR AND CIVETWEB_LIBRARY)
    # Every serve_*.c (globbed, as the CLI globs its sources, so a new endpoint file cannot be
    # missed here) and the helpers they call.
    file(GLOB WGML_FUZZ_SERVE_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/tools/wgml/serve_*.c)
    set(WGML_FUZZ_SERVE_HELPERS cli_util.c cli_json.c cli_transcript.c audio_file.c image_file.c)
    list(TRANSFORM WGML_FUZZ_SERVE_HELPERS PREPEND ${CMAKE_SOURCE_DIR}/tools/wgml/)
    list(APPEND WGML_FUZZ_SERVE_SOURCES ${WGML_FUZZ_SERVE_HELPERS})
    add_executable(fuzz_serve ${CMAKE_SOURCE_DIR}/fuzz/fuzz_serve.c ${WGML_FUZZ_SERVE_SOURCES})
    target_include_directories(fuzz_serve PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tools/wgml
                               ${CIVETWEB_INCLUDE_DIR})
    target_compile_options(fuzz_serve PRIVATE ${WGML_FUZZ_COMPILE_FLAGS})
    target_compile_definitions(fuzz_serve PRIVATE WGML_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
    target_link_options(fuzz_serve PRIVATE -fsanitize=fuzzer,${WGML_FUZZ_SANITIZERS})
    pkg_check_modules(SNDFILE REQUIRED IMPORTED_TARGET sndfile)
    target_link_libraries(fuzz_serve PRIVATE wgml_fuzzlib PkgConfig::JSONC PkgConfig::SNDFILE
                          PkgConfig::LIBJPEG PkgConfig::LIBPNG ${CIVETWEB_LIBRARY})
    set_target_properties(fuzz_serve PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
  else()
    message(STATUS "civetweb not found (apt install libcivetweb-dev): fuzz_serve is left out")
  endif()

  add_executable(wgml_fuzz_seeds ${CMAKE_SOURCE_DIR}/fuzz/make_seeds.c)
  target_include_directories(wgml_fuzz_seeds PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests/support)
  target_link_libraries(wgml_fuzz_seeds PRIVATE wgml)
  set_target_properties(wgml_fuzz_seeds PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fuzz)
endif()
