# Checks that each plugin in PLUGINS (a comma-separated list of .so files) needs no keywatch library
# (readelf -d NEEDED: no libkeywatch, nor hiredis, which only keywatch would bring), refers
# to no kw_*
# symbol it would take from the host (nm -D undefined), and exports kw_handler_entry.
# Usage: cmake -DPLUGINS="a.so,b.so" -P this-file
string(REPLACE "," ";" PLUGINS "${PLUGINS}")
find_program(READELF readelf REQUIRED)
find_program(NM nm REQUIRED)
foreach(plugin IN LISTS PLUGINS)
  execute_process(COMMAND ${READELF} -d ${plugin} OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf -d failed on ${plugin}")
  endif()
  string(REGEX MATCHALL "Shared library: \\[[^]]*\\]" needed "${dyn}")
  foreach(lib IN LISTS needed)
    if(lib MATCHES "keywatch|hiredis")
      message(FATAL_ERROR "${plugin} needs ${lib}: a plugin links nothing of keywatch")
    endif()
  endforeach()
  execute_process(COMMAND ${NM} -D --undefined-only ${plugin} OUTPUT_VARIABLE undef)
  if(undef MATCHES "kw_")
    message(FATAL_ERROR "${plugin} refers to keywatch symbols:\n${undef}")
  endif()
  execute_process(COMMAND ${NM} -D --defined-only ${plugin} OUTPUT_VARIABLE defined)
  if(NOT defined MATCHES " T kw_handler_entry")
    message(FATAL_ERROR "${plugin} does not export kw_handler_entry:\n${defined}")
  endif()
  message(STATUS "${plugin}: ${needed}")
endforeach()
