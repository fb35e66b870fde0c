# cmake -DNM=<nm> -DSHARED=<libgmp.so> -DSTATIC=<libgmp.a>
#       -DHEADER=<gmp.h> -DEXPORT_TEST=<src/export_test.h>
#       -DTEST_STATIC=<libgmp_test.a> -P check_exports.cmake
#
# Symbol discipline (STYLE.md, Boundaries):
#  - libgmp.so exports exactly the functions gmp.h declares GMP_EXTERN:
#    nothing internal (gmp__*), nothing from elsewhere, none missing;
#    and gmp_hookrt_v1_, the one entry of libgmp-hook's private interface
#    (src/hookrt.h), which gmp.h does not declare: it is not API;
#  - every global symbol libgmp.a defines is ours (gmp_ or gmp__), so a
#    static link cannot collide with the program's own names;
#  - neither library defines any test hook: a name export_test.h declares
#    after its "test hooks" line, all of which the tests' copy
#    (libgmp_test.a) does define.
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
set(_private gmp_hookrt_v1_)
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
  if(s IN_LIST _private)
    continue()
  endif()
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

# Test hooks: the functions (a name followed by '(') and variables
# ("extern ... name", matched up to the name only, as above) declared
# after the marker line of export_test.h.
file(READ ${EXPORT_TEST} _et)
string(FIND "${_et}" "---- test hooks:" _at)
if(_at LESS 0)
  message(FATAL_ERROR "no \"---- test hooks:\" line in ${EXPORT_TEST}")
endif()
string(SUBSTRING "${_et}" ${_at} -1 _et)
string(REGEX MATCHALL "\n[a-z][^;{}]*[ *]gmp__[a-z0-9_]+\\(" _fns "${_et}")
string(REGEX MATCHALL "\nextern [^;{}(]*[ *]gmp__[a-z0-9_]+" _evs "${_et}")
set(hooks "")
foreach(d IN LISTS _fns _evs)
  string(REGEX REPLACE ".*[ *](gmp__[a-z0-9_]+)\\(?$" "\\1" n "${d}")
  list(APPEND hooks ${n})
endforeach()
list(LENGTH hooks _nh)
if(_nh LESS 10)
  message(FATAL_ERROR "found only ${_nh} test hooks in ${EXPORT_TEST}")
endif()
# nm without -g/-D: every defined symbol, local (hidden, in libgmp.so)
# ones included.
foreach(_lib ${STATIC} ${SHARED} ${TEST_STATIC})
  execute_process(COMMAND ${NM} --defined-only ${_lib}
    OUTPUT_VARIABLE _out RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${NM} failed on ${_lib}")
  endif()
  string(REGEX MATCHALL "[ \t]gmp__[a-z0-9_]+\n" _defs "${_out}")
  string(REGEX REPLACE "[ \t\n]" "" _defs "${_defs}")
  get_filename_component(_name ${_lib} NAME)
  foreach(h IN LISTS hooks)
    if(_lib STREQUAL TEST_STATIC)
      if(NOT h IN_LIST _defs)
        list(APPEND bad "${_name} lacks the test hook ${h}")
      endif()
    elseif(h IN_LIST _defs)
      list(APPEND bad "${_name} defines the test hook ${h}")
    endif()
  endforeach()
endforeach()

list(LENGTH exported _ne)
if(bad)
  list(JOIN bad "\n  " _msg)
  message(FATAL_ERROR "symbol discipline:\n  ${_msg}")
endif()
foreach(p IN LISTS _private)
  if(NOT p IN_LIST exported)
    list(APPEND bad "libgmp.so does not export ${p} (libgmp-hook needs it)")
  endif()
endforeach()
if(bad)
  list(JOIN bad "\n  " _msg)
  message(FATAL_ERROR "symbol discipline:\n  ${_msg}")
endif()
message("libgmp.so exports the functions gmp.h declares and the hook "
  "library's private entry (${_ne} in all), and nothing else; libgmp.a "
  "defines only gmp_ and gmp__ globals; neither has any of the ${_nh} "
  "test hooks, which libgmp_test.a has")
