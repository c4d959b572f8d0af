# cmake/package.cmake: CPack settings. From the build directory,
#   cpack -G DEB
# makes dlckpt_<version>_<arch>.deb with everything `cmake --install` installs,
# under /usr. Installed that way, `bash /usr/share/dlckpt/demo.sh /usr` runs the
# demo against the installed tools.
set(CPACK_PACKAGE_NAME dlckpt)
set(CPACK_PACKAGE_VENDOR "dlckpt")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "diskless checkpointing for MPI applications")
set(CPACK_PACKAGE_DESCRIPTION
  "dlckpt keeps the checkpoint files of an MPI application in memory (memfs), computes XOR or Reed-Solomon parity onto spare nodes, and rebuilds and relaunches after a node loss (dlckpt-run). Includes the application API, the SCR API (libdlckpt_scr), the static I/O wrappers and the LD_PRELOAD library, a CMake package and pkg-config files.")
set(CPACK_PACKAGE_CONTACT "dlckpt maintainers <dlckpt@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES TRUE)  # no debug info in the package
set(CPACK_GENERATOR DEB)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
# Run time: the MPI dlckpt was built with (its launcher and libmpi: MPICH or
# Open MPI, cmake/mpi.cmake), ISA-L, LZ4 and FUSE 3 (dlckpt-fuse), the GCC
# runtimes. Building applications against the package also needs the -dev
# packages and the MPI compiler wrappers, recommended.
if(DLCKPT_MPI_FLAVOR STREQUAL "openmpi")
  set(_dlckpt_deb_mpi "openmpi-bin, libopenmpi3")
  set(_dlckpt_deb_mpi_dev "libopenmpi-dev")
else()
  set(_dlckpt_deb_mpi "mpich, libmpich12")
  set(_dlckpt_deb_mpi_dev "libmpich-dev")
endif()
set(CPACK_DEBIAN_PACKAGE_DEPENDS
  "libc6 (>= 2.36), libstdc++6, libgcc-s1, libgfortran5, ${_dlckpt_deb_mpi}, libisal2, liblz4-1, libfuse3-3, fuse3")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "${_dlckpt_deb_mpi_dev}, libisal-dev, liblz4-dev, pkg-config, gfortran, g++")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "cmake")
include(CPack)
