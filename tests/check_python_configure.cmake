# The Python package builds without the CLI: setup.py configures with KW_BUILD_CLI=OFF, and
# neither CLI11 nor toml++ (the CLI's dependencies) may be needed then. Configures only (no
# build), into a fresh scratch directory, with those two packages made unfindable.
# Usage: cmake -DSOURCE=<source dir> -DBINARY=<scratch dir> -DGENERATOR=<generator>
#              -DCXX=<C++ compiler> -DC=<C compiler> -P this-file

file(REMOVE_RECURSE ${BINARY})
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${BINARY} -G ${GENERATOR}
          -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_C_COMPILER=${C} --no-warn-unused-cli
          -DKW_BUILD_PYTHON=ON -DKW_BUILD_CLI=OFF -DKW_BUILD_TESTS=OFF -DKW_BUILD_BENCH=OFF
          -DKW_BUILD_EXAMPLES=OFF -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON
          -DCMAKE_DISABLE_FIND_PACKAGE_tomlplusplus=ON
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE out)
file(REMOVE_RECURSE ${BINARY})
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake -DKW_BUILD_PYTHON=ON -DKW_BUILD_CLI=OFF (without CLI11 and toml++) "
                      "does not configure: the Python package must need nothing of the CLI "
                      "(bindings/ uses the C API only):\n${out}")
endif()
