# smxCheckExportedSymbols.cmake - fails unless every symbol libsmx defines for the dynamic linker is smx*.
# Run as: cmake -DSMX_LIBRARY=<libsmx.so> -DSMX_NM=<nm> -P smxCheckExportedSymbols.cmake
# A stray export (a std:: template instance, an fmt or spdlog function) would become part of the ABI by accident.
foreach(required SMX_LIBRARY SMX_NM)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "pass -D${required}=...")
  endif()
endforeach()

execute_process(COMMAND ${SMX_NM} -D --defined-only ${SMX_LIBRARY}
  OUTPUT_VARIABLE nm_output ERROR_VARIABLE nm_error RESULT_VARIABLE nm_result)
if(NOT nm_result EQUAL 0)
  message(FATAL_ERROR "${SMX_NM} -D --defined-only ${SMX_LIBRARY} failed (${nm_result}): ${nm_error}")
endif()

string(REPLACE "\n" ";" nm_lines "${nm_output}")
set(smx_symbols "")
set(foreign_symbols "")
foreach(line IN LISTS nm_lines)
  # "<address> <type> <name>[@version]"; ABS entries name the version node, not code or data.
  if(line MATCHES "^[0-9a-fA-F]* +([A-Za-z]) +([^ @]+)")
    set(type "${CMAKE_MATCH_1}")
    set(name "${CMAKE_MATCH_2}")
    if(type STREQUAL "A")
      continue()
    elseif(name MATCHES "^smx")
      list(APPEND smx_symbols "${name}")
    else()
      list(APPEND foreign_symbols "${line}")
    endif()
  endif()
endforeach()

list(LENGTH smx_symbols smx_count)
if(foreign_symbols)
  list(JOIN foreign_symbols "\n  " foreign_text)
  message(FATAL_ERROR "${SMX_LIBRARY} exports symbols outside the smx* API:\n  ${foreign_text}")
endif()
if(smx_count EQUAL 0)
  message(FATAL_ERROR "${SMX_LIBRARY} exports no smx* symbol at all: is this the right file?")
endif()
message(STATUS "${SMX_LIBRARY}: ${smx_count} exported symbols, all smx*")
