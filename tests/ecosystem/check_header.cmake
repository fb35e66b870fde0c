# cmake -DCC=<compiler> -DLANG=c|c++ -DSTD=<-std value> -DSRC=<file>
#       -DINCLUDE=<dir> -DLIB=<libgmp> -DOUT=<exe> [-DFLAGS=<a;b>]
#       [-DEMULATOR=<a;b>] -P check_header.cmake
#
# Compiles SRC (which includes gmp.h) as LANG/STD with every warning an
# error and -pedantic, links it with LIB, and runs it.
cmake_minimum_required(VERSION 3.16)
get_filename_component(_libdir "${LIB}" DIRECTORY)
set(_x ${CC} -x ${LANG} -std=${STD} -Wall -Wextra -Werror -pedantic
  ${FLAGS} -I${INCLUDE} ${SRC} -x none ${LIB} -Wl,-rpath,${_libdir} -pthread -o ${OUT})
string(REPLACE ";" " " _shown "${_x}")
message("$ ${_shown}")
execute_process(COMMAND ${_x} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gmp.h does not compile cleanly as ${LANG} ${STD}")
endif()
execute_process(COMMAND ${EMULATOR} ${OUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the ${LANG} ${STD} program failed (${rc})")
endif()
