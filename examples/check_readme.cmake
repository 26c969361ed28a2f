# cmake -DREADME=... -DEXAMPLE=... -P check_readme.cmake
# Fails when the README's C quick start (its ```c block) differs from the example file
# (from its #define line on), so the two cannot drift apart.
file(READ "${README}" readme)
file(READ "${EXAMPLE}" example)
string(FIND "${readme}" "```c\n" start)
if(start EQUAL -1)
  message(FATAL_ERROR "${README} has no ```c block")
endif()
math(EXPR start "${start} + 5")
string(SUBSTRING "${readme}" ${start} -1 rest)
string(FIND "${rest}" "```" end)
string(SUBSTRING "${rest}" 0 ${end} block)
string(FIND "${example}" "#define _POSIX_C_SOURCE" body_start)
string(SUBSTRING "${example}" ${body_start} -1 body)
if(NOT block STREQUAL body)
  message(FATAL_ERROR "The C quick start in ${README} differs from ${EXAMPLE}: "
                      "copy the example (from its #define line) into the README")
endif()
message(STATUS "README quick start matches ${EXAMPLE}")
