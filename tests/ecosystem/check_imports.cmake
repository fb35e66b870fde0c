# cmake -DNM=<nm> -DREADELF=<readelf> -DSHARED=<libgmp.so>
#       -DHOOK=<libgmp-hook.so> -DSANITIZE=<GMP_SANITIZE> -P check_imports.cmake
#
# The hook library and libgmp stay out of each other's way (design.md §32):
#  - libgmp.so imports no symbol that libgmp-hook.so defines: the
#    runtime's own system calls go to the kernel (src/sys.h), never
#    through the hooks (where its close would recurse). Not in a
#    sanitizer build, whose runtime calls libc on purpose, so that the
#    sanitizers' interceptors see them (the hooks let those through);
#  - libgmp-hook.so defines only libc's names: no gmp_ or gmp__ symbol,
#    so no copy of the runtime, nothing of its own in the program's
#    namespace;
#  - libgmp-hook.so needs libgmp.so (DT_NEEDED), whose runtime it drives.
cmake_minimum_required(VERSION 3.16)

function(dynsyms out lib mode)
  execute_process(COMMAND ${NM} -D ${mode} ${lib}
    OUTPUT_VARIABLE _out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} -D failed on ${lib}")
  endif()
  string(REPLACE "\n" ";" _lines "${_out}")
  set(syms "")
  foreach(l IN LISTS _lines)
    if(l MATCHES "^[0-9a-fA-F ]* [A-Za-z] ([^ @]+)")
      list(APPEND syms ${CMAKE_MATCH_1})
    endif()
  endforeach()
  set(${out} "${syms}" PARENT_SCOPE)
endfunction()

dynsyms(hook_defs ${HOOK} --defined-only)
dynsyms(gmp_undefs ${SHARED} --undefined-only)

set(bad "")
list(LENGTH hook_defs _nh)
if(_nh LESS 40)
  list(APPEND bad "libgmp-hook.so defines only ${_nh} symbols")
endif()
set(_markers _init _fini _end _edata __bss_start)
foreach(s IN LISTS hook_defs)
  if(s MATCHES "^gmp_" OR s MATCHES "^hk_")
    list(APPEND bad "libgmp-hook.so defines ${s}, which is not libc's")
  endif()
endforeach()

if(SANITIZE)
  message("imports of libgmp.so not checked: a sanitizer build "
    "(${SANITIZE}) calls libc on purpose (src/sys.h)")
else()
  foreach(s IN LISTS gmp_undefs)
    if(s IN_LIST hook_defs AND NOT s IN_LIST _markers)
      list(APPEND bad "libgmp.so imports ${s}, which libgmp-hook.so "
        "defines: call it through src/sys.h")
    endif()
  endforeach()
endif()

execute_process(COMMAND ${READELF} -d ${HOOK}
  OUTPUT_VARIABLE _dyn RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR NOT _dyn MATCHES "NEEDED[^\n]*\\[libgmp\\.so\\.")
  list(APPEND bad "libgmp-hook.so does not need libgmp.so (DT_NEEDED)")
endif()
if(NOT _dyn MATCHES "SONAME[^\n]*\\[libgmp-hook\\.so\\.0\\]")
  list(APPEND bad "libgmp-hook.so's SONAME is not libgmp-hook.so.0")
endif()

if(bad)
  list(JOIN bad "\n  " _msg)
  message(FATAL_ERROR "hook library boundaries:\n  ${_msg}")
endif()
message("libgmp-hook.so defines ${_nh} libc names and nothing else, needs "
  "libgmp.so, and libgmp.so imports none of them")
