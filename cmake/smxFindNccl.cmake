# smxFindNccl.cmake - where NCCL's header and library are, for libsmx_nccl: NCCL_ROOT (a cache or environment
# variable) first, then the CUDA toolkit's folders, the system's, and the pip package nvidia-nccl-cu* of the Python
# found on the PATH (site-packages/nvidia/nccl/{include,lib}, whose library has only its versioned name).
# Sets SMX_NCCL_FOUND, SMX_NCCL_INCLUDE_DIR and SMX_NCCL_LIBRARY.
function(smx_find_nccl)
  set(hints)
  foreach(root "${NCCL_ROOT}" "$ENV{NCCL_ROOT}")
    if(root)
      list(APPEND hints "${root}")
    endif()
  endforeach()
  if(CUDAToolkit_LIBRARY_ROOT)
    list(APPEND hints "${CUDAToolkit_LIBRARY_ROOT}")
  endif()
  find_program(SMX_PYTHON NAMES python3 python)
  if(SMX_PYTHON)
    execute_process(COMMAND "${SMX_PYTHON}" -c "import nvidia.nccl as n; print(list(n.__path__)[0])"
                    OUTPUT_VARIABLE pip_nccl OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
    if(NOT failed AND pip_nccl)
      list(APPEND hints "${pip_nccl}")
    endif()
  endif()
  find_path(SMX_NCCL_INCLUDE_DIR nccl.h HINTS ${hints} ${CUDAToolkit_INCLUDE_DIRS} PATH_SUFFIXES include)
  find_library(SMX_NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${hints} ${CUDAToolkit_LIBRARY_DIR}
               PATH_SUFFIXES lib lib64)
  if(SMX_NCCL_INCLUDE_DIR AND SMX_NCCL_LIBRARY)
    set(SMX_NCCL_FOUND TRUE PARENT_SCOPE)
    message(STATUS "smx: NCCL ${SMX_NCCL_LIBRARY} (headers ${SMX_NCCL_INCLUDE_DIR})")
  else()
    set(SMX_NCCL_FOUND FALSE PARENT_SCOPE)
  endif()
endfunction()
