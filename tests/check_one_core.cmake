# Checks that each binary in BINARIES (a comma-separated list) holds one copy of the engine:
# either it needs libkeywatch.so (readelf -d NEEDED) or it defines core's objects (linked
# from keywatch_internal), never both. Two copies in one process means two of every static
# (SlotTags::instance, the plugin registry) and two engines' worth of code.
# Core's names: what `nm -C --defined-only CORE` (the keywatch_internal archive) shows as
# strong global definitions (T D B R) in namespace keywatch or of the C API (kw_*); weak
# (W V) inline copies never count. A binary's names: any case, as hidden symbols are local
# once linked.
# Usage: cmake -DBINARIES="a,b" -DCORE=libkeywatch_internal.a -P this-file
string(REPLACE "," ";" BINARIES "${BINARIES}")
include(${CMAKE_CURRENT_LIST_DIR}/binary_tools.cmake)

# The names of `nm -C --defined-only` lines whose type matches `types`, of core's kinds.
function(core_names file types out)
  binary_tool(listing nm -C --defined-only ${file})
  string(REGEX MATCHALL "\n[0-9a-f]* [${types}] (keywatch::|kw_)[^\n]*" lines "\n${listing}")
  set(names "")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^\n[0-9a-f]* . " "" name "${line}")
    list(APPEND names "${name}")
  endforeach()
  list(REMOVE_DUPLICATES names)
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

core_names(${CORE} "TDBR" core)
list(LENGTH core core_count)
if(core_count LESS 100)
  message(FATAL_ERROR "${CORE} defines only ${core_count} of core's names: is it the engine?")
endif()

foreach(binary IN LISTS BINARIES)
  binary_tool(dyn readelf -d ${binary})
  string(REGEX MATCH "Shared library: \\[libkeywatch\\.so[^]]*\\]" library "${dyn}")
  string(REGEX REPLACE "^Shared library: \\[(.*)\\]$" "\\1" library "${library}")
  core_names(${binary} "TtDdBbRr" defined)
  set(held "")
  foreach(name IN LISTS defined)
    list(FIND core "${name}" at)
    if(at GREATER -1)
      list(APPEND held "${name}")
    endif()
  endforeach()
  list(LENGTH held held_count)
  if(library AND held_count GREATER 0)
    list(SUBLIST held 0 5 example)
    list(JOIN example "\n  " example)
    message(SEND_ERROR "${binary} needs ${library} and also holds ${held_count} of core's "
                       "objects, e.g.\n  ${example}\nlink keywatch_internal or keywatch, never both")
  else()
    if(NOT library)
      set(library "no libkeywatch")
    endif()
    message(STATUS "${binary}: ${held_count} of core's names, needs ${library}")
  endif()
endforeach()
