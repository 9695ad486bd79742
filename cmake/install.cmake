# install.cmake - what `cmake --install <build> [--prefix <prefix>]` puts where
# (native builds only; the browser build installs nothing):
#
#   bin/wgml                        the CLI, RUNPATH $ORIGIN/../lib
#   include/wgml.h                  the public API
#   lib/libwgml.a                   always
#   lib/libwgml.so.0                with -DBUILD_SHARED_LIBS=ON: libwgml.so.<version>,
#                                   its SONAME link libwgml.so.0 and libwgml.so; exports
#                                   only the functions of wgml.h; RUNPATH $ORIGIN
#   lib/libwebgpu_wrapper.so        with WebGPU: Dawn's library, which the others need
#   lib/pkgconfig/wgml.pc           pkg-config --cflags --libs wgml
#   lib/cmake/wgml/                 find_package(wgml) -> the imported target wgml::wgml
#                                   (the shared library when built, else the static one;
#                                   wgml::wgml_static is the static one in a shared build)
#   share/wgml/                     the shipped data: everything in models/
#   share/doc/wgml/LICENSE
#
# Dawn's npm library has no SONAME: programs link it as -L<libdir> -lwebgpu_wrapper
# and find it at run time through their RUNPATH, so wgml.pc and the CMake package
# give their users -Wl,-rpath,<libdir>.
include(CMakePackageConfigHelpers)

set(WGML_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/wgml")
# RUNPATHs of the installed binaries: the library folder, relative to them.
file(RELATIVE_PATH _wgml_bin_to_lib "${CMAKE_INSTALL_FULL_BINDIR}" "${CMAKE_INSTALL_FULL_LIBDIR}")
file(RELATIVE_PATH _wgml_bin_to_data "${CMAKE_INSTALL_FULL_BINDIR}" "${CMAKE_INSTALL_FULL_DATADIR}/wgml")

# ---- the libraries, the header, the CLI ---------------------------------------------
set_target_properties(wgml PROPERTIES PUBLIC_HEADER "${CMAKE_SOURCE_DIR}/include/wgml.h")
if(TARGET wgml_shared)
  set_target_properties(wgml PROPERTIES EXPORT_NAME wgml_static)
  set_target_properties(wgml_shared PROPERTIES EXPORT_NAME wgml INSTALL_RPATH "$ORIGIN")
  install(TARGETS wgml_shared EXPORT wgmlTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(TARGETS wgml EXPORT wgmlTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

if(TARGET wgml_cli)
  set_target_properties(wgml_cli PROPERTIES INSTALL_RPATH "$ORIGIN/${_wgml_bin_to_lib}")
  # Where the installed CLI finds its default model: the data folder of the
  # configured prefix, and the same relative to the executable's folder (for a
  # tree installed with --prefix elsewhere, or moved).
  target_compile_definitions(wgml_cli PRIVATE
    "WGML_INSTALL_DATADIR=\"${CMAKE_INSTALL_FULL_DATADIR}/wgml\""
    "WGML_INSTALL_DATADIR_FROM_BINDIR=\"${_wgml_bin_to_data}\"")
  install(TARGETS wgml_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# ---- Dawn ---------------------------------------------------------------------------
set(WGML_PC_DEPS "-lpthread -lz -lm")
if(WGML_HAVE_CURL)
  set(WGML_PC_DEPS "-lcurl -lcrypto ${WGML_PC_DEPS}")
endif()
set(WGML_CONFIG_DAWN_FILE "")
set(WGML_CONFIG_DAWN_NO_SONAME FALSE)
if(TARGET wgml_dawn)
  get_target_property(_wgml_dawn wgml_dawn IMPORTED_LOCATION)
  get_target_property(WGML_CONFIG_DAWN_NO_SONAME wgml_dawn IMPORTED_NO_SONAME)
  if(NOT WGML_CONFIG_DAWN_NO_SONAME)
    set(WGML_CONFIG_DAWN_NO_SONAME FALSE)
  endif()
  get_filename_component(_wgml_dawn_dir "${_wgml_dawn}" DIRECTORY)
  get_filename_component(WGML_CONFIG_DAWN_FILE "${_wgml_dawn}" NAME)
  # The library and, for a Dawn with a SONAME, its versioned names (symbolic links stay links).
  file(GLOB _wgml_dawn_files "${_wgml_dawn_dir}/${WGML_CONFIG_DAWN_FILE}*")
  install(FILES ${_wgml_dawn_files} DESTINATION ${CMAKE_INSTALL_LIBDIR}
    PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
  string(REGEX REPLACE "^lib(.*)[.]so.*$" "\\1" _wgml_dawn_name "${WGML_CONFIG_DAWN_FILE}")
  set(WGML_PC_DEPS "-l${_wgml_dawn_name} ${WGML_PC_DEPS}")
endif()

# ---- pkg-config ------------------------------------------------------------------------
# Written at install time, so that it names the prefix installed to (--prefix).
# libdir, includedir, datadir: relative to ${prefix} unless given absolute
foreach(_d LIBDIR INCLUDEDIR DATADIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_d}}")
    set(WGML_PC_${_d} "${CMAKE_INSTALL_${_d}}")
  else()
    set(WGML_PC_${_d} "\${prefix}/${CMAKE_INSTALL_${_d}}")
  endif()
endforeach()
# A shared libwgml needs only itself on the link line (Dawn and the rest are its
# own dependencies); the static one needs them all. Programs need the rpath to find
# libwgml.so.0 or Dawn's library at run time.
if(TARGET wgml_shared OR TARGET wgml_dawn)
  set(_wgml_pc_rpath "-Wl,-rpath,\${libdir} ")
else()
  set(_wgml_pc_rpath "")
endif()
if(TARGET wgml_shared)
  set(WGML_PC_LIBS "-L\${libdir} ${_wgml_pc_rpath}-lwgml")
  set(WGML_PC_LIBS_PRIVATE "${WGML_PC_DEPS}")
else()
  set(WGML_PC_LIBS "-L\${libdir} ${_wgml_pc_rpath}-lwgml ${WGML_PC_DEPS}")
  set(WGML_PC_LIBS_PRIVATE "")
endif()
set(WGML_PC_PREFIX "@WGML_PC_PREFIX@") # filled in at install time
configure_file("${CMAKE_SOURCE_DIR}/cmake/wgml.pc.in" "${CMAKE_BINARY_DIR}/generated/wgml.pc.in" @ONLY)
install(CODE "set(_wgml_pc_in \"${CMAKE_BINARY_DIR}/generated/wgml.pc.in\")
set(_wgml_pc_dir \"${CMAKE_INSTALL_LIBDIR}/pkgconfig\")")
install(CODE [[
  if(NOT IS_ABSOLUTE "${_wgml_pc_dir}")
    set(_wgml_pc_dir "${CMAKE_INSTALL_PREFIX}/${_wgml_pc_dir}")
  endif()
  set(_wgml_pc "$ENV{DESTDIR}${_wgml_pc_dir}/wgml.pc")
  file(READ "${_wgml_pc_in}" _wgml_pc_text)
  string(REPLACE "@WGML_PC_PREFIX@" "${CMAKE_INSTALL_PREFIX}" _wgml_pc_text "${_wgml_pc_text}")
  message(STATUS "Installing: ${_wgml_pc}")
  file(WRITE "${_wgml_pc}" "${_wgml_pc_text}")
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${_wgml_pc_dir}/wgml.pc")
]])

# ---- the CMake package ------------------------------------------------------------------
if(TARGET wgml_shared)
  set(WGML_CONFIG_SHARED TRUE)
else()
  set(WGML_CONFIG_SHARED FALSE)
endif()
configure_package_config_file("${CMAKE_SOURCE_DIR}/cmake/wgmlConfig.cmake.in"
  "${CMAKE_BINARY_DIR}/generated/wgmlConfig.cmake"
  INSTALL_DESTINATION "${WGML_CMAKE_DIR}"
  PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_DATADIR)
# 0.x: a new minor version may change the API.
write_basic_package_version_file("${CMAKE_BINARY_DIR}/generated/wgmlConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_BINARY_DIR}/generated/wgmlConfig.cmake" "${CMAKE_BINARY_DIR}/generated/wgmlConfigVersion.cmake"
  DESTINATION "${WGML_CMAKE_DIR}")
install(EXPORT wgmlTargets NAMESPACE wgml:: FILE wgmlTargets.cmake DESTINATION "${WGML_CMAKE_DIR}")

# ---- data ------------------------------------------------------------------------------
if(IS_DIRECTORY "${CMAKE_SOURCE_DIR}/models")
  install(DIRECTORY "${CMAKE_SOURCE_DIR}/models/" DESTINATION "${CMAKE_INSTALL_DATADIR}/wgml")
endif()
install(FILES "${CMAKE_SOURCE_DIR}/LICENSE" DESTINATION "${CMAKE_INSTALL_DOCDIR}")
