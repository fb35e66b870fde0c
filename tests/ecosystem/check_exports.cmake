# cmake -DNM=<nm> -DSHARED=<libgmp.so> -DSTATIC=<libgmp.a>
#       -DHEADER=<gmp.h> -P check_exports.cmake
#
# Symbol discipline (STYLE.md, Boundaries):
#  - libgmp.so exports exactly the functions gmp.h declares GMP_EXTERN:
#    nothing internal (gmp__*), nothing from elsewhere, none missing;
#  - every global symbol libgmp.a defines is ours (gmp_ or gmp__), so a
#    static link cannot collide with the program's own names.
# The linker's own markers (_init, _fini, _end, ...) are not ours and
# are let through.
cmake_minimum_required(VERSION 3.16)
set(_linker_markers _init _fini _end _edata __bss_start _etext __end__
  _bss_end__ __bss_start__ __bss_end__ __end__ _ITM_deregisterTMCloneTable
  _ITM_registerTMCloneTable __gmon_start__)
set(_sanitizer_re "^(__asan_|__odr_asan|__tsan_|__ubsan_|__sancov_)")

file(READ ${HEADER} _h)
# Functions (a name followed by '(') and variables (GMP_EXTERN extern ...;
# matched up to the name only: a ';' would split a CMake list).
string(REGEX MATCHALL "GMP_EXTERN[^;]*[ *](gmp_[a-z0-9_]+)\\(" _decls "${_h}")
string(REGEX MATCHALL "GMP_EXTERN extern[^;(]*[ *]gmp_[a-z0-9_]+" _vars "${_h}")
set(declared "")
foreach(d IN LISTS _decls _vars)
  string(REGEX REPLACE ".*[ *](gmp_[a-z0-9_]+)\\(?$" "\\1" n "${d}")
  list(APPEND declared ${n})
endforeach()
list(REMOVE_DUPLICATES declared)
list(LENGTH declared _nd)
if(_nd LESS 20)
  message(FATAL_ERROR "found only ${_nd} GMP_EXTERN declarations in ${HEADER}")
endif()

set(bad "")
execute_process(COMMAND ${NM} -D --defined-only ${SHARED}
  OUTPUT_VARIABLE _out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D failed on ${SHARED}")
endif()
string(REPLACE "\n" ";" _lines "${_out}")
set(exported "")
foreach(l IN LISTS _lines)
  if(NOT l MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^ @]+)")
    continue()
  endif()
  set(s ${CMAKE_MATCH_1})
  if(s IN_LIST _linker_markers OR s MATCHES "${_sanitizer_re}")
    continue()
  endif()
  list(APPEND exported ${s})
  if(NOT s MATCHES "^gmp_[a-z0-9_]+$" OR s MATCHES "^gmp__")
    list(APPEND bad "libgmp.so exports ${s}: not a public gmp_ name")
  elseif(NOT s IN_LIST declared)
    list(APPEND bad "libgmp.so exports ${s}, which gmp.h does not declare")
  endif()
endforeach()
foreach(d IN LISTS declared)
  if(NOT d IN_LIST exported)
    list(APPEND bad "gmp.h declares ${d}, which libgmp.so does not export")
  endif()
endforeach()

execute_process(COMMAND ${NM} -g --defined-only ${STATIC}
  OUTPUT_VARIABLE _out RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} failed on ${STATIC}")
endif()
string(REPLACE "\n" ";" _lines "${_out}")
foreach(l IN LISTS _lines)
  if(NOT l MATCHES "^[0-9a-fA-F]* *[A-Za-z] ([^ ]+)$")
    continue()
  endif()
  set(s ${CMAKE_MATCH_1})
  if(s MATCHES "${_sanitizer_re}" OR s MATCHES "^gmp_")
    continue()
  endif()
  list(APPEND bad "libgmp.a defines the global ${s}: not in the gmp_ namespace")
endforeach()

list(LENGTH exported _ne)
if(bad)
  list(JOIN bad "\n  " _msg)
  message(FATAL_ERROR "symbol discipline:\n  ${_msg}")
endif()
message("libgmp.so exports the ${_ne} functions gmp.h declares, and "
  "nothing else; libgmp.a defines only gmp_ and gmp__ globals")
