# smxPackageTests.cmake - CTest checks of libsmx as a shipped artifact rather than of its results.
find_program(SMX_NM_EXECUTABLE NAMES nm REQUIRED)
add_test(NAME smx_exported_symbols
  COMMAND ${CMAKE_COMMAND} -DSMX_LIBRARY=$<TARGET_FILE:smx> -DSMX_NM=${SMX_NM_EXECUTABLE}
          -P ${CMAKE_CURRENT_LIST_DIR}/smxCheckExportedSymbols.cmake)

if(SMX_SANITIZE)
  # An uninstrumented consumer cannot load an ASan-instrumented libsmx (the runtime must come first).
  message(STATUS "smx: smx_install_consumer not registered in a SMX_SANITIZE build")
else()
  find_program(SMX_PKG_CONFIG_EXECUTABLE NAMES pkg-config REQUIRED)
  add_test(NAME smx_install_consumer
    COMMAND ${CMAKE_COMMAND} -DSMX_BUILD_DIR=${PROJECT_BINARY_DIR} -DSMX_SOURCE_DIR=${PROJECT_SOURCE_DIR}
            -DSMX_WORK_DIR=${PROJECT_BINARY_DIR}/install-consumer-test -DSMX_C_COMPILER=${CMAKE_C_COMPILER}
            -DSMX_PKG_CONFIG=${SMX_PKG_CONFIG_EXECUTABLE} -DSMX_CONFIG=$<CONFIG>
            -P ${CMAKE_CURRENT_LIST_DIR}/smxTestInstallConsumer.cmake)
  # It installs the whole build, so it must not overlap a test that rebuilds or reinstalls.
  set_tests_properties(smx_install_consumer PROPERTIES RUN_SERIAL ON)
endif()
