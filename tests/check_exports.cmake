# Checks that a shared library exports only kw_* symbols, every function keywatch.h
# declares, and that its SONAME follows the rule of keywatch.h (major.minor while 0.x).
# Usage: cmake -DLIB=path -DHEADER=keywatch.h -DEXPECTED_SONAME=libkeywatch.so.N
#              -DVERSION=MAJOR.MINOR.PATCH -P this-file
include(${CMAKE_CURRENT_LIST_DIR}/binary_tools.cmake)

binary_tool(nm_out nm -D --defined-only ${LIB})

string(REPLACE "\n" ";" lines "${nm_out}")
set(kw_count 0)
set(foreign "")
foreach(line IN LISTS lines)
  if(line STREQUAL "")
    continue()
  endif()
  # "<address> <type> <name>[@@version]"
  string(REGEX REPLACE "^[0-9a-fA-F]* *[A-Za-z] " "" name "${line}")
  string(REGEX REPLACE "@.*$" "" name "${name}")
  # The version node itself (type A, e.g. KEYWATCH_0) is not a symbol of the API.
  if(line MATCHES " A ")
    continue()
  endif()
  if(name MATCHES "^kw_")
    math(EXPR kw_count "${kw_count} + 1")
  else()
    list(APPEND foreign "${name}")
  endif()
endforeach()

if(foreign)
  message(FATAL_ERROR "${LIB} exports symbols outside the kw_ namespace: ${foreign}")
endif()
# Every function the header declares must be exported.
file(READ ${HEADER} header)
string(REGEX MATCHALL "KW_API[^;(]*[ *](kw_[a-z0-9_]+)\\(" decls "${header}")
set(missing "")
set(declared 0)
foreach(decl IN LISTS decls)
  string(REGEX MATCH "(kw_[a-z0-9_]+)\\($" _ "${decl}")
  set(fn "${CMAKE_MATCH_1}")
  math(EXPR declared "${declared} + 1")
  if(NOT nm_out MATCHES " ${fn}(@|\n|$)")
    list(APPEND missing "${fn}")
  endif()
endforeach()
if(declared LESS 20)
  message(FATAL_ERROR "found only ${declared} KW_API declarations in ${HEADER}")
endif()
if(missing)
  message(FATAL_ERROR "${LIB} does not export these functions of keywatch.h: ${missing}")
endif()

binary_tool(dyn readelf -d ${LIB})
string(REGEX MATCH "Library soname: \\[([^]]*)\\]" _ "${dyn}")
set(soname "${CMAKE_MATCH_1}")
if(NOT soname STREQUAL EXPECTED_SONAME)
  message(FATAL_ERROR "SONAME of ${LIB} is '${soname}', expected '${EXPECTED_SONAME}'")
endif()
# The rule of keywatch.h: libkeywatch.so.0.MINOR while the major version is 0, then
# libkeywatch.so.MAJOR. VERSION is the project version (MAJOR.MINOR.PATCH).
string(REGEX MATCH "^([0-9]+)\\.([0-9]+)\\." _ "${VERSION}")
if(CMAKE_MATCH_1 STREQUAL "0")
  set(rule_soname "libkeywatch.so.0.${CMAKE_MATCH_2}")
else()
  set(rule_soname "libkeywatch.so.${CMAKE_MATCH_1}")
endif()
if(NOT soname STREQUAL rule_soname)
  message(FATAL_ERROR "SONAME '${soname}' breaks the rule of keywatch.h for version ${VERSION}: "
                      "expected '${rule_soname}' (major.minor while the major version is 0)")
endif()
message(STATUS "${LIB}: ${kw_count} kw_* symbols exported, SONAME ${soname}")
