# Toolchain file: cross-build libgmp for aarch64 Linux on an x86-64 host, and
# run the tests under qemu-user.
#
#   cmake -S . -B build/arm64 -DCMAKE_TOOLCHAIN_FILE=.ci/aarch64-linux-gnu.cmake \
#         -DARM64_SYSROOT=$PWD/build-deps/arm64-sysroot
#   cmake --build build/arm64 && ctest --test-dir build/arm64
#
# Host packages: gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user.
# ARM64_SYSROOT is a folder into which the arm64 .debs of libcmocka0,
# libcmocka-dev and libatomic-ops-dev were unpacked with `dpkg -x` (the CI
# script fetches them with apt-get download into build-deps/, which git
# ignores). Unpacking, rather than installing them as a foreign
# architecture, leaves the host's dpkg state alone: libatomic-ops-dev is not
# Multi-Arch: same, so installing the arm64 one would remove the host's.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_ASM_COMPILER aarch64-linux-gnu-gcc)

set(ARM64_SYSROOT "$ENV{ARM64_SYSROOT}" CACHE PATH
  "Folder holding the unpacked arm64 cmocka and atomic_ops packages")
if(NOT ARM64_SYSROOT)
  message(FATAL_ERROR "aarch64 toolchain: set ARM64_SYSROOT to the folder "
    "the arm64 libcmocka/libatomic-ops .debs were unpacked into")
endif()
# CMake re-reads this file for every try_compile project, which does not see
# the cache; this hands the value on.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES ARM64_SYSROOT)

set(_gmp_arm64_libdir "${ARM64_SYSROOT}/usr/lib/aarch64-linux-gnu")

# Headers and libraries come from the cross libc and the sysroot; programs
# (pkg-config, qemu) from the host. Packages only from the sysroot, so the
# host's own CMake packages (its Boost, say) are never picked up.
set(CMAKE_FIND_ROOT_PATH "${ARM64_SYSROOT};/usr/aarch64-linux-gnu")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config reads only the sysroot's .pc files and prefixes the paths in
# them with the sysroot.
set(ENV{PKG_CONFIG_PATH} "")
set(ENV{PKG_CONFIG_LIBDIR}
  "${_gmp_arm64_libdir}/pkgconfig:${ARM64_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${ARM64_SYSROOT}")

# Tests run under qemu-aarch64 with the cross libc. LD_LIBRARY_PATH pins the
# guest to it (and to the sysroot's libcmocka): with a multiarch libc6:arm64
# also installed, the cross ld.so would otherwise load that libc through the
# host's ld.so.cache, and the mismatch hangs pthread_create.
if(NOT CMAKE_CROSSCOMPILING_EMULATOR)
  set(CMAKE_CROSSCOMPILING_EMULATOR
    "qemu-aarch64;-L;/usr/aarch64-linux-gnu;-E;LD_LIBRARY_PATH=${_gmp_arm64_libdir}:/usr/aarch64-linux-gnu/lib")
endif()
