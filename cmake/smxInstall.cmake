# smxInstall.cmake - what `cmake --install` puts under the prefix:
#   lib/libsmx.so{,.MAJOR,.MAJOR.MINOR.PATCH}, include/smx/*.h,
#   lib/cmake/smx/smx{Config,ConfigVersion,Targets}.cmake (find_package(smx) -> smx::smx),
#   lib/pkgconfig/smx.pc (pkg-config --cflags --libs smx).
include(CMakePackageConfigHelpers)

set(SMX_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/smx)

install(TARGETS smx EXPORT smxTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT smx_dev COMPONENT smx_runtime
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/smx DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT smx_dev FILES_MATCHING PATTERN "*.h")

install(EXPORT smxTargets NAMESPACE smx:: DESTINATION ${SMX_INSTALL_CMAKEDIR} COMPONENT smx_dev)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/smxConfig.cmake.in
  ${PROJECT_BINARY_DIR}/smxConfig.cmake INSTALL_DESTINATION ${SMX_INSTALL_CMAKEDIR})
# The C ABI only breaks with the major version (the SOVERSION), so any same-major release satisfies a request.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/smxConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/smxConfig.cmake ${PROJECT_BINARY_DIR}/smxConfigVersion.cmake
  DESTINATION ${SMX_INSTALL_CMAKEDIR} COMPONENT smx_dev)

# smx.pc is written at install time: `cmake --install --prefix <p>` chooses the prefix after configuring,
# and the file must name the prefix the library actually lands in.
set(SMX_PC_BUILD_FILE ${PROJECT_BINARY_DIR}/pkgconfig/smx.pc)
install(CODE "
  set(SMX_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(SMX_PC_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(SMX_PC_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  foreach(dir_var SMX_PC_LIBDIR SMX_PC_INCLUDEDIR)
    if(NOT IS_ABSOLUTE \"\${\${dir_var}}\")
      set(\${dir_var} \"\\\${prefix}/\${\${dir_var}}\")
    endif()
  endforeach()
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  set(PROJECT_DESCRIPTION \"${PROJECT_DESCRIPTION}\")
  configure_file(\"${CMAKE_CURRENT_LIST_DIR}/smx.pc.in\" \"${SMX_PC_BUILD_FILE}\" @ONLY)
" COMPONENT smx_dev)
install(FILES ${SMX_PC_BUILD_FILE} DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT smx_dev)
