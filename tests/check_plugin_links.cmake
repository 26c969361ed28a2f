# Checks that each plugin in PLUGINS (a comma-separated list of .so files) needs no keywatch library
# (readelf -d NEEDED: no libkeywatch, nor hiredis, which only keywatch would bring), refers
# to no kw_*
# symbol it would take from the host (nm -D undefined), and exports kw_handler_entry.
# Usage: cmake -DPLUGINS="a.so,b.so" -P this-file
string(REPLACE "," ";" PLUGINS "${PLUGINS}")
include(${CMAKE_CURRENT_LIST_DIR}/binary_tools.cmake)
foreach(plugin IN LISTS PLUGINS)
  binary_tool(dyn readelf -d ${plugin})
  string(REGEX MATCHALL "Shared library: \\[[^]]*\\]" needed "${dyn}")
  foreach(lib IN LISTS needed)
    if(lib MATCHES "keywatch|hiredis")
      message(FATAL_ERROR "${plugin} needs ${lib}: a plugin links nothing of keywatch")
    endif()
  endforeach()
  binary_tool(undef nm -D --undefined-only ${plugin})
  if(undef MATCHES "kw_")
    message(FATAL_ERROR "${plugin} refers to keywatch symbols:\n${undef}")
  endif()
  binary_tool(defined nm -D --defined-only ${plugin})
  if(NOT defined MATCHES " T kw_handler_entry")
    message(FATAL_ERROR "${plugin} does not export kw_handler_entry:\n${defined}")
  endif()
  message(STATUS "${plugin}: ${needed}")
endforeach()
