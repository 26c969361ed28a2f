# Tests read an engine statistic only through stat_reaches / stats_reach (tests/wait.h),
# which wait until the value comes: a counter moves when a reply reaches the engine's
# thread, which can be after the test saw the effect in Redis (docs/testing.md, "Waiting,
# not timing"). This check fails on any other kw_engine_stat( call in the C and C++ test
# sources, except on a line that checks a refusal (KW_ERR_INVALID_ARG: nothing is read) or
# says why it may read directly ("direct stat read: <why>").
# Usage: cmake -DROOT=<source dir> -P this-file
set(dirs tests cli/tests)
set(found "")
foreach(dir IN LISTS dirs)
  file(GLOB_RECURSE sources RELATIVE ${ROOT} ${ROOT}/${dir}/*.cpp ${ROOT}/${dir}/*.h
       ${ROOT}/${dir}/*.c)
  foreach(source IN LISTS sources)
    if(source STREQUAL "tests/wait.h")
      continue()
    endif()
    file(STRINGS ${ROOT}/${source} lines REGEX "kw_engine_stat\\(")
    foreach(line IN LISTS lines)
      if(line MATCHES "KW_ERR_INVALID_ARG" OR line MATCHES "direct stat read:")
        continue()
      endif()
      string(STRIP "${line}" line)
      string(APPEND found "\n  ${source}: ${line}")
    endforeach()
  endforeach()
endforeach()
if(found)
  message(FATAL_ERROR "statistics read without waiting (use stat_reaches or stats_reach from "
                      "tests/wait.h, which wait for the value):${found}")
endif()
