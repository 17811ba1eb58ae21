# smxTestInstallConsumer.cmake - installs the current build into a scratch prefix and uses it from outside:
#   1. cmake --install <build> --prefix <work>/prefix
#   2. examples/consumer configured with find_package(smx) via CMAKE_PREFIX_PATH, built and run;
#   3. the same main.c compiled with `cc $(pkg-config --cflags --libs smx)` and run;
#   4. the C example in README.md compiled the same way and run, so the documented example stays correct.
# Run as: cmake -DSMX_BUILD_DIR= -DSMX_SOURCE_DIR= -DSMX_WORK_DIR= -DSMX_C_COMPILER= -DSMX_PKG_CONFIG= [-DSMX_CONFIG=] -P ...
foreach(required SMX_BUILD_DIR SMX_SOURCE_DIR SMX_WORK_DIR SMX_C_COMPILER SMX_PKG_CONFIG)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "pass -D${required}=...")
  endif()
endforeach()

# Runs a command, failing the test with its output when it fails.
function(smx_run step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT result EQUAL 0)
    list(JOIN ARGN " " command_text)
    message(FATAL_ERROR "${step} failed (${result}):\n  ${command_text}\n${output}")
  endif()
  message(STATUS "${step}: ok")
  set(smx_run_output "${output}" PARENT_SCOPE)
endfunction()

set(prefix ${SMX_WORK_DIR}/prefix)
file(REMOVE_RECURSE ${SMX_WORK_DIR})
file(MAKE_DIRECTORY ${SMX_WORK_DIR})

set(install_config "")
if(SMX_CONFIG)
  set(install_config --config ${SMX_CONFIG})
endif()
smx_run("install into ${prefix}" ${CMAKE_COMMAND} --install ${SMX_BUILD_DIR} --prefix ${prefix} ${install_config})

file(GLOB_RECURSE installed_configs ${prefix}/*/smxConfig.cmake)
file(GLOB_RECURSE installed_pcs ${prefix}/*/pkgconfig/smx.pc)
if(NOT installed_configs OR NOT installed_pcs)
  message(FATAL_ERROR "the install lacks smxConfig.cmake or smx.pc under ${prefix}")
endif()
list(GET installed_pcs 0 installed_pc)
get_filename_component(pkgconfig_dir ${installed_pc} DIRECTORY)
get_filename_component(libdir ${pkgconfig_dir} DIRECTORY)

# The exported target must be usable without spdlog/fmt: they are built into libsmx, not interface deps.
file(GLOB_RECURSE installed_targets ${prefix}/*/smxTargets.cmake)
file(READ ${installed_targets} targets_text)
if(targets_text MATCHES "spdlog|fmt::")
  message(FATAL_ERROR "${installed_targets} mentions spdlog or fmt: consumers would have to find them")
endif()

# 2. CMake consumer through find_package(smx).
set(consumer_build ${SMX_WORK_DIR}/consumer-cmake)
smx_run("configure the consumer with find_package(smx)" ${CMAKE_COMMAND} -S ${SMX_SOURCE_DIR}/examples/consumer
        -B ${consumer_build} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${SMX_C_COMPILER} -DCMAKE_BUILD_TYPE=Release)
smx_run("build the consumer" ${CMAKE_COMMAND} --build ${consumer_build})
find_program(consumer_exe smx_consumer PATHS ${consumer_build} ${consumer_build}/Release NO_DEFAULT_PATH REQUIRED)
smx_run("run the CMake-built consumer" ${consumer_exe})
message(STATUS "${smx_run_output}")

# 3. and 4. Plain cc with the flags pkg-config gives; the loader finds libsmx through LD_LIBRARY_PATH.
set(ENV{PKG_CONFIG_PATH} ${pkgconfig_dir})
execute_process(COMMAND ${SMX_PKG_CONFIG} --cflags --libs smx RESULT_VARIABLE pc_result
                OUTPUT_VARIABLE pc_flags ERROR_VARIABLE pc_error OUTPUT_STRIP_TRAILING_WHITESPACE)
if(NOT pc_result EQUAL 0)
  message(FATAL_ERROR "pkg-config --cflags --libs smx failed: ${pc_error}")
endif()
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
set(ENV{LD_LIBRARY_PATH} "${libdir}:$ENV{LD_LIBRARY_PATH}")

file(READ ${SMX_SOURCE_DIR}/README.md readme_text)
if(NOT readme_text MATCHES "```c\n([^`]*)```")
  message(FATAL_ERROR "README.md has no ```c code block to check")
endif()
file(WRITE ${SMX_WORK_DIR}/readme_example.c "${CMAKE_MATCH_1}")

foreach(program consumer readme_example)
  if(program STREQUAL "consumer")
    set(source ${SMX_SOURCE_DIR}/examples/consumer/main.c)
  else()
    set(source ${SMX_WORK_DIR}/readme_example.c)
  endif()
  set(exe ${SMX_WORK_DIR}/${program}-pkgconfig)
  smx_run("cc ${program} with pkg-config flags" ${SMX_C_COMPILER} -std=c99 -Wall -Wextra -Werror ${source}
          -o ${exe} ${pc_flags} -lm)
  smx_run("run the pkg-config-built ${program}" ${exe})
endforeach()
