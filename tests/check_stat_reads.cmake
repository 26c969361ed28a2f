# Tests read an engine statistic only through a helper that waits until the value comes:
# stat_reaches / stats_reach (tests/wait.h) in C and C++, wait_stat (bindings/tests/
# conftest.py) or a wait_for / until predicate in Python. A counter moves when a reply
# reaches the engine's thread, which can be after the test saw the effect in Redis
# (docs/testing.md, "Waiting, not timing"). This check fails on any other read:
#   C and C++ (tests/, cli/tests/): kw_engine_stat( except on a line that checks a refusal
#     (KW_ERR_INVALID_ARG: nothing is read);
#   Python (bindings/tests/, cli/tests/): .stat( or .stats( except on a line holding
#     "wait_stat(", "until(" or "wait_for(" (a wait) or "def " (a definition).
# A line may also say why it reads directly: "direct stat read: <why>" (after stop()
# returned, a shape check, a refusal, a bound sampled at any moment).
# Usage: cmake -DROOT=<source dir> -P this-file

# The lines of ROOT/source matching regex and none of the exempt patterns, appended to
# the report in out_var. The file is split into lines by hand: a list from file(STRINGS)
# would join lines at an unbalanced [ or a trailing backslash.
function(report_reads source regex exempt out_var)
  file(READ ${ROOT}/${source} text)
  string(REPLACE "\\" "<kw-bs>" text "${text}")  # first: the others add none
  string(REPLACE "[" "<kw-lb>" text "${text}")
  string(REPLACE "]" "<kw-rb>" text "${text}")
  string(REPLACE ";" "<kw-sc>" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(found "${${out_var}}")
  set(number 0)
  foreach(line IN LISTS lines)  # empty lines included: number counts every line
    math(EXPR number "${number} + 1")
    if(NOT line MATCHES "${regex}")
      continue()
    endif()
    set(allowed FALSE)
    foreach(pattern IN LISTS exempt)
      string(FIND "${line}" "${pattern}" at)
      if(NOT at EQUAL -1)
        set(allowed TRUE)
      endif()
    endforeach()
    if(NOT allowed)
      string(STRIP "${line}" line)
      string(APPEND found "\n  ${source}:${number}: ${line}")
    endif()
  endforeach()
  string(REPLACE "<kw-sc>" ";" found "${found}")  # the report is a string, not a list
  string(REPLACE "<kw-rb>" "]" found "${found}")
  string(REPLACE "<kw-lb>" "[" found "${found}")
  string(REPLACE "<kw-bs>" "\\" found "${found}")
  set(${out_var} "${found}" PARENT_SCOPE)
endfunction()

set(found "")
file(GLOB_RECURSE c_sources RELATIVE ${ROOT} ${ROOT}/tests/*.cpp ${ROOT}/tests/*.h
     ${ROOT}/tests/*.c ${ROOT}/cli/tests/*.cpp ${ROOT}/cli/tests/*.h ${ROOT}/cli/tests/*.c)
list(REMOVE_ITEM c_sources tests/wait.h)  # the waiting helpers themselves
foreach(source IN LISTS c_sources)
  report_reads(${source} "kw_engine_stat\\(" "KW_ERR_INVALID_ARG;direct stat read:" found)
endforeach()

file(GLOB py_sources RELATIVE ${ROOT} ${ROOT}/bindings/tests/*.py)
file(GLOB_RECURSE cli_py_sources RELATIVE ${ROOT} ${ROOT}/cli/tests/*.py)
list(APPEND py_sources ${cli_py_sources})
list(REMOVE_ITEM py_sources bindings/tests/conftest.py)  # wait_stat itself
foreach(source IN LISTS py_sources)
  report_reads(${source} "\\.stats?\\(" "wait_stat(;until(;wait_for(;def ;direct stat read:"
               found)
endforeach()

if(found)
  message(FATAL_ERROR "statistics read without waiting (C and C++: stat_reaches or "
                      "stats_reach from tests/wait.h; Python: wait_stat from "
                      "bindings/tests/conftest.py, or await until(...) in asyncio tests; "
                      "each waits for the value):${found}")
endif()
