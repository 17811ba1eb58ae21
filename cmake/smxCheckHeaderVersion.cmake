# smxCheckHeaderVersion.cmake - fails the configure step when project(VERSION) and the
# SMX_VERSION_* macros of include/smx/smx_version.h disagree.
#
# The header stays hand-written (not generated) so it reads the same in the source tree, in an install and
# to bindings that parse it; this check keeps the two version sources from drifting apart.
function(smx_check_header_version header)
  file(STRINGS "${header}" version_lines REGEX "^#define SMX_VERSION_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(part MAJOR MINOR PATCH)
    set(header_${part} "")
    foreach(line IN LISTS version_lines)
      if(line MATCHES "^#define SMX_VERSION_${part} +([0-9]+)")
        set(header_${part} "${CMAKE_MATCH_1}")
      endif()
    endforeach()
    if(header_${part} STREQUAL "")
      message(FATAL_ERROR "smx: ${header} has no '#define SMX_VERSION_${part} <number>'")
    endif()
  endforeach()
  set(header_version "${header_MAJOR}.${header_MINOR}.${header_PATCH}")
  if(NOT header_version VERSION_EQUAL PROJECT_VERSION)
    message(FATAL_ERROR "smx: project(VERSION ${PROJECT_VERSION}) in CMakeLists.txt differs from "
                        "SMX_VERSION ${header_version} in ${header}; change both together")
  endif()
endfunction()
