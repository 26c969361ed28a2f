# For the link checks (check_*.cmake, run with cmake -P): what `nm` or `readelf` says of a
# binary. binary_tool(OUT nm|readelf ARGS...) sets OUT to the tool's output, or stops with
# FATAL_ERROR naming the command when the tool fails.
find_program(NM nm REQUIRED)
find_program(READELF readelf REQUIRED)

function(binary_tool out tool)
  string(TOUPPER ${tool} program)
  execute_process(COMMAND ${${program}} ${ARGN} OUTPUT_VARIABLE text ERROR_VARIABLE err
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " args)
    message(FATAL_ERROR "${tool} ${args} failed: ${err}")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()
