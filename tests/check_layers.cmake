# The folders include each other only downwards (README, "Layout"):
#   - core/<layer>/ includes from core/ only its own layer and those listed for it below;
#   - nothing in core/, capi/ or include/ includes cli/, bindings/ or handlers/ (the library
#     is below every surface; its installed contracts are include/'s headers);
#   - nothing in bindings/ includes cli/ (the Python package needs neither the CLI nor its
#     dependencies: it uses the C API, bindings/src/capi_seam.h).
# Usage: cmake -DROOT=<source dir> -P this-file

cmake_policy(SET CMP0057 NEW)  # if(IN_LIST)

set(layers base redis queue config client sweeper engine format plugins)
set(below_base "")
set(below_redis base)
set(below_queue base)
set(below_config base redis queue)
set(below_client base redis queue config)
set(below_sweeper base redis queue)
set(below_engine base redis queue config sweeper)
set(below_format base)
set(below_plugins base config client engine format)

# The project-rooted includes ("core/redis/url.h", <cli/...>) of ROOT/source, as a list.
function(includes_of source out_var)
  file(STRINGS ${ROOT}/${source} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
  set(found "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]*)[\">].*$" "\\1" path "${line}")
    list(APPEND found "${path}")
  endforeach()
  set(${out_var} "${found}" PARENT_SCOPE)
endfunction()

set(found "")
foreach(layer IN LISTS layers)
  file(GLOB_RECURSE sources RELATIVE ${ROOT} ${ROOT}/core/${layer}/*.h ${ROOT}/core/${layer}/*.cpp)
  foreach(source IN LISTS sources)
    includes_of(${source} paths)
    foreach(path IN LISTS paths)
      if(path MATCHES "^core/([^/]+)/")
        set(to ${CMAKE_MATCH_1})
        if(NOT to STREQUAL layer AND NOT to IN_LIST below_${layer})
          string(APPEND found "\n  ${source} includes ${path}: core/${layer}/ may include "
                              "only core/${layer}/ and (${below_${layer}})")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()
file(GLOB_RECURSE core_dirs LIST_DIRECTORIES true RELATIVE ${ROOT} ${ROOT}/core/*)
foreach(dir IN LISTS core_dirs)
  if(IS_DIRECTORY ${ROOT}/${dir} AND dir MATCHES "^core/([^/]+)$")
    if(NOT CMAKE_MATCH_1 IN_LIST layers)
      string(APPEND found "\n  ${dir}/ is no layer of this check: add it to `layers` with what "
                          "it may include")
    endif()
  endif()
endforeach()

function(refuse_includes folders prefixes why)
  set(report "${found}")
  foreach(folder IN LISTS folders)
    file(GLOB_RECURSE sources RELATIVE ${ROOT} ${ROOT}/${folder}/*.h ${ROOT}/${folder}/*.hpp
         ${ROOT}/${folder}/*.c ${ROOT}/${folder}/*.cpp)
    foreach(source IN LISTS sources)
      includes_of(${source} paths)
      foreach(path IN LISTS paths)
        foreach(prefix IN LISTS prefixes)
          string(FIND "${path}" "${prefix}" at)
          if(at EQUAL 0)
            string(APPEND report "\n  ${source} includes ${path}: ${why}")
          endif()
        endforeach()
      endforeach()
    endforeach()
  endforeach()
  set(found "${report}" PARENT_SCOPE)
endfunction()

refuse_includes("core;capi;include" "cli/;bindings/;handlers/"
                "the library includes nothing of the surfaces above it")
refuse_includes("bindings" "cli/" "the Python package uses the C API, not the CLI")

if(found)
  message(FATAL_ERROR "includes against the layers:${found}")
endif()
