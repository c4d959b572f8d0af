# cmake/install.cmake: what `cmake --install build --prefix P` puts under P, and
# the exported CMake package `find_package(dlckpt CONFIG)`.
#
# Included from the top-level CMakeLists.txt after every module's directory, so
# it can name their targets (install(TARGETS) of targets made elsewhere needs
# CMake >= 3.13). Every install rule of the project lives here; the modules'
# own CMakeLists.txt files hold none.
#
# Layout (GNUInstallDirs; LIBDIR is usually `lib`):
#   bin/                    dlckpt-* tools (dlckpt-ior among them), the
#                           dlckpt-cc/-cxx/-f90 compiler wrappers and the
#                           *-dlckpt demo applications
#   LIBDIR/                 libdlckpt_api.a and the static archives it needs,
#                           libdlckpt_intercept.a, libdlckpt_api.so,
#                           libdlckpt_preload.so, libdlckpt_scr.so and
#                           its SCR names libscr.so, libscrf.so (links),
#                           libdlckpt_veloc.so (the VeloC API)
#   LIBDIR/cmake/dlckpt/    dlckptConfig.cmake, dlckptConfigVersion.cmake,
#                           dlckptTargets*.cmake
#   LIBDIR/pkgconfig/       dlckpt.pc (API + static wrappers), dlckpt-scr.pc,
#                           scr.pc (the same under SCR's name, -lscr),
#                           dlckpt-veloc.pc
#   include/dlckpt/...      public headers (dlckpt/dlckpt.h, the modules'
#                           dlckpt/<module>/*.h), include/scr.h, include/scrf.h
#                           (SCR's Fortran include file), include/veloc.h
#   share/dlckpt/           dlckpt.flags (mpicc @file recipe for this prefix),
#                           demo.sh
#   share/man/man1/         a man page per tool and compiler wrapper (help2man)
#   lib/python3/dist-packages/dlckpt/  the Python package (DLCKPT_INSTALL_PYTHONDIR)
#   share/dlckpt/python/    its examples, heat.py and heat_regions.py
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DLCKPT_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/dlckpt)

# --- The exported targets: the API, the interception archive, the shared
# libraries, and every project library they link (their transitive closure,
# computed here so that a new dependency in a module is exported too).

# _dlckpt_link_deps(OUT target): the project targets `target` links in its
# interface (for a static library that includes its private dependencies,
# which CMake records as $<LINK_ONLY:...>).
function(_dlckpt_link_deps out target)
  set(deps "")
  get_target_property(libs ${target} INTERFACE_LINK_LIBRARIES)
  if(libs)
    foreach(lib IN LISTS libs)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" lib "${lib}")
      if(lib MATCHES "^\\$<" OR NOT TARGET "${lib}")
        continue()
      endif()
      get_target_property(real "${lib}" ALIASED_TARGET)
      if(real)
        set(lib ${real})
      endif()
      get_target_property(imported "${lib}" IMPORTED)
      if(NOT imported)
        list(APPEND deps ${lib})
      endif()
    endforeach()
  endif()
  set(${out} ${deps} PARENT_SCOPE)
endfunction()

# _dlckpt_closure(OUT roots...): the roots and every project target they link,
# dependents before their dependencies (a valid static link order).
function(_dlckpt_closure out)
  set(order "")
  set(visited "")
  set(stack ${ARGN})
  # Iterative depth-first post-order: a target is emitted once all its
  # dependencies are.
  macro(_visit t)
    if(NOT "${t}" IN_LIST visited)
      list(APPEND visited ${t})
      _dlckpt_link_deps(_deps_${t} ${t})
      foreach(d IN LISTS _deps_${t})
        _visit(${d})
      endforeach()
      list(APPEND order ${t})
    endif()
  endmacro()
  foreach(t IN LISTS stack)
    _visit(${t})
  endforeach()
  list(REVERSE order)
  set(${out} ${order} PARENT_SCOPE)
endfunction()

set(_dlckpt_roots dlckpt_api dlckpt_api_headers dlckpt_intercept dlckpt_intercept_headers)
foreach(t dlckpt_api_shared dlckpt_preload dlckpt_scr dlckpt_scr_shared dlckpt_fortran dlckpt_veloc)
  if(TARGET ${t})
    list(APPEND _dlckpt_roots ${t})
  endif()
endforeach()
_dlckpt_closure(DLCKPT_EXPORTED_TARGETS ${_dlckpt_roots})
# The static link order of the API for the flags file and dlckpt.pc.
_dlckpt_closure(DLCKPT_API_LINK_ORDER dlckpt_api)

set(_dlckpt_header_dirs "")
foreach(t IN LISTS DLCKPT_EXPORTED_TARGETS)
  # dlckpt_checkpoint -> dlckpt::checkpoint; the interception archive is
  # dlckpt::intercept_archive, since dlckpt::intercept (dlckptConfig.cmake)
  # is the archive linked whole plus the link options it needs.
  string(REGEX REPLACE "^dlckpt_" "" name ${t})
  if(t STREQUAL "dlckpt_intercept")
    set(name intercept_archive)
  endif()
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${name})
  # Include directories in the source or build tree hold for the build only;
  # installed, every header is under include/.
  get_target_property(dirs ${t} INTERFACE_INCLUDE_DIRECTORIES)
  if(dirs)
    set(wrapped "")
    foreach(d IN LISTS dirs)
      if(d MATCHES "^\\$<")
        list(APPEND wrapped "${d}")
      else()
        list(APPEND wrapped "$<BUILD_INTERFACE:${d}>")
        list(APPEND _dlckpt_header_dirs ${d})
      endif()
    endforeach()
    list(APPEND wrapped "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
    set_target_properties(${t} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${wrapped}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _dlckpt_header_dirs)

install(TARGETS ${DLCKPT_EXPORTED_TARGETS} EXPORT dlckptTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  OBJECTS DESTINATION ${CMAKE_INSTALL_LIBDIR}/dlckpt-objects  # should a module link an OBJECT library
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT dlckptTargets NAMESPACE dlckpt:: DESTINATION ${DLCKPT_INSTALL_CMAKEDIR})

# Public headers: every include/ root of an exported target (the modules'
# include/dlckpt/<module>/ trees, the generated dlckpt/base/version.h).
foreach(d IN LISTS _dlckpt_header_dirs)
  if(IS_DIRECTORY "${d}")
    install(DIRECTORY "${d}/" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
            FILES_MATCHING PATTERN "*.h")
  endif()
endforeach()

# The Fortran module of the API (module dlckpt, coordinator/fortran/dlckpt.f90)
# beside the C headers, so that -I<prefix>/include finds both.
if(TARGET dlckpt_fortran)
  get_target_property(_dlckpt_moddir dlckpt_fortran Fortran_MODULE_DIRECTORY)
  install(FILES ${_dlckpt_moddir}/dlckpt.mod DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endif()

# --- Tools and demo applications.
set(_dlckpt_programs "")
# dlckpt-ior (bench/ior, built with DLCKPT_BUILD_BENCH): IOR's command line
# and output, the tool bench/README.md compares file systems with.
foreach(t dlckpt-run dlckpt-codec dlckpt-store dlckpt-plan dlckpt-heartbeat dlckpt-fuse dlckpt-ctl
          dlckpt-ior heat2d-dlckpt sppm-mini-dlckpt sweep3d-mini-dlckpt)
  if(TARGET ${t})
    list(APPEND _dlckpt_programs ${t})
  endif()
endforeach()
install(TARGETS ${_dlckpt_programs} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# --- Man pages of the user-facing tools, rendered from their --help and
# --version by help2man (build/man/man1/, installed under share/man/man1).
# Without help2man (Debian: help2man) there are none, and the build says so.
find_program(DLCKPT_HELP2MAN help2man)
set(_dlckpt_man_names
  "dlckpt-run=run an MPI application with diskless checkpoints and recover it from node failures"
  "dlckpt-codec=the codec service: erasure-codes checkpoints onto spare nodes and rebuilds lost ones"
  "dlckpt-store=inspect, fill and remove memfs checkpoint stores"
  "dlckpt-plan=choose spares per group and the checkpoint interval for a machine"
  "dlckpt-heartbeat=send or watch dlckpt's node heartbeats"
  "dlckpt-fuse=mount a memfs checkpoint store with FUSE"
  "dlckpt-ctl=checkpoint and control dlckpt-fuse mounts"
  "dlckpt-ior=an MPI I/O benchmark with IOR's command line and output, for /dlckpt and other file systems")
if(DLCKPT_HELP2MAN)
  set(_dlckpt_man_dir ${PROJECT_BINARY_DIR}/man/man1)
  set(_dlckpt_mans "")
  foreach(entry IN LISTS _dlckpt_man_names)
    string(REGEX REPLACE "=.*" "" tool "${entry}")
    string(REGEX REPLACE "^[^=]*=" "" what "${entry}")
    if(TARGET ${tool})
      add_custom_command(OUTPUT ${_dlckpt_man_dir}/${tool}.1
        COMMAND ${CMAKE_COMMAND} -E make_directory ${_dlckpt_man_dir}
        COMMAND ${DLCKPT_HELP2MAN} --no-info --no-discard-stderr --section=1 --source=dlckpt
                --name=${what} --output=${_dlckpt_man_dir}/${tool}.1 $<TARGET_FILE:${tool}>
        DEPENDS ${tool}
        COMMENT "man page of ${tool}"
        VERBATIM)
      list(APPEND _dlckpt_mans ${_dlckpt_man_dir}/${tool}.1)
    endif()
  endforeach()
  # The compiler wrappers (configured below; dlckpt-cxx and dlckpt-f90 are
  # links to dlckpt-cc in the build tree, which takes its name from $0). Their
  # --version goes on to the compiler's, whose copyright is not ours: the man
  # page gets dlckpt's version line alone.
  foreach(entry "dlckpt-cc=compile and link an MPI C program with dlckpt (mpicc wrapper)"
                "dlckpt-cxx=compile and link an MPI C++ program with dlckpt (mpicxx wrapper)"
                "dlckpt-f90=compile and link an MPI Fortran program with dlckpt (mpif90 wrapper)")
    string(REGEX REPLACE "=.*" "" tool "${entry}")
    string(REGEX REPLACE "^[^=]*=" "" what "${entry}")
    add_custom_command(OUTPUT ${_dlckpt_man_dir}/${tool}.1
      COMMAND ${CMAKE_COMMAND} -E make_directory ${_dlckpt_man_dir}
      COMMAND ${DLCKPT_HELP2MAN} --no-info --section=1 --source=dlckpt
              --version-string=${tool}\ ${PROJECT_VERSION}
              --name=${what} --output=${_dlckpt_man_dir}/${tool}.1 ${PROJECT_BINARY_DIR}/wrappers/${tool}
      DEPENDS ${PROJECT_BINARY_DIR}/wrappers/dlckpt-cc ${CMAKE_CURRENT_LIST_DIR}/dlckpt-cc.in
      COMMENT "man page of ${tool}"
      VERBATIM)
    list(APPEND _dlckpt_mans ${_dlckpt_man_dir}/${tool}.1)
  endforeach()
  add_custom_target(dlckpt_man_pages ALL DEPENDS ${_dlckpt_mans})
  install(FILES ${_dlckpt_mans} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
else()
  message(STATUS "help2man not found: no man pages (apt-get install help2man)")
endif()

# --- Recipes without CMake. The libraries of the static recipe, in link
# order, as paths relative to the prefix; the --wrap flags.
set(DLCKPT_STATIC_LIBS "")
foreach(t IN LISTS DLCKPT_API_LINK_ORDER)
  get_target_property(type ${t} TYPE)
  if(type STREQUAL "STATIC_LIBRARY")
    string(APPEND DLCKPT_STATIC_LIBS " \${libdir}/lib${t}.a")
  endif()
endforeach()
string(JOIN " " DLCKPT_WRAP_TEXT ${DLCKPT_INTERCEPT_WRAP_FLAGS})
# Link flags of the static wrappers that follow the API's archives:
# libintercept whole (its entry points must be in the link before
# libstdc++.a / libgfortran.a need them), then what it needs.
set(DLCKPT_STATIC_TAIL "-Wl,--whole-archive \${libdir}/libdlckpt_intercept.a -Wl,--no-whole-archive \${libdir}/libdlckpt_memfs.a \${libdir}/libdlckpt_base.a -lisal -llz4 -Wl,-Bstatic -lstdc++ -Wl,-Bdynamic -lm -lpthread -lrt")
set(DLCKPT_STATIC_HEAD "${DLCKPT_WRAP_TEXT} -Wl,--export-dynamic-symbol=dlckpt_intercept_static_marker -static-libstdc++ -static-libgfortran")

# pkg-config: relocatable (prefix from the .pc file's own directory).
file(RELATIVE_PATH DLCKPT_PC_TO_PREFIX
     "/prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/prefix")
string(REGEX REPLACE "/$" "" DLCKPT_PC_TO_PREFIX "${DLCKPT_PC_TO_PREFIX}")
configure_file(${CMAKE_CURRENT_LIST_DIR}/dlckpt.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/dlckpt.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/dlckpt-scr.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/dlckpt-scr.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/scr.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/scr.pc @ONLY)
configure_file(${CMAKE_CURRENT_LIST_DIR}/dlckpt-veloc.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/dlckpt-veloc.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/dlckpt.pc ${PROJECT_BINARY_DIR}/pkgconfig/dlckpt-scr.pc
              ${PROJECT_BINARY_DIR}/pkgconfig/scr.pc ${PROJECT_BINARY_DIR}/pkgconfig/dlckpt-veloc.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# SCR's library names, so that an SCR makefile's -lscr -lscrf links
# libdlckpt_scr unchanged: libscr.so and libscrf.so, relative symbolic links
# to libdlckpt_scr.so (the Fortran binding is in the same library).
if(TARGET dlckpt_scr)
  install(CODE "
    set(_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}\")
    foreach(_name libscr.so libscrf.so)
      file(CREATE_LINK libdlckpt_scr.so \"\${_dir}/\${_name}\" SYMBOLIC)
      message(STATUS \"Installing: \${_dir}/\${_name} -> libdlckpt_scr.so\")
    endforeach()
  ")
endif()

# Compiler wrappers dlckpt-cc / dlckpt-cxx / dlckpt-f90 (relocatable: they
# find the prefix from their own path) around mpicc / mpicxx / mpif90.
# Executable in the build tree too: help2man runs it for the man pages.
configure_file(${CMAKE_CURRENT_LIST_DIR}/dlckpt-cc.in ${PROJECT_BINARY_DIR}/wrappers/dlckpt-cc @ONLY
  FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
foreach(w dlckpt-cxx dlckpt-f90)
  file(CREATE_LINK dlckpt-cc ${PROJECT_BINARY_DIR}/wrappers/${w} SYMBOLIC)
endforeach()
foreach(w dlckpt-cc dlckpt-cxx dlckpt-f90)
  install(PROGRAMS ${PROJECT_BINARY_DIR}/wrappers/dlckpt-cc DESTINATION ${CMAKE_INSTALL_BINDIR}
          RENAME ${w})
endforeach()

# share/dlckpt/dlckpt.flags: the same recipe as one GCC @file, for this
# prefix, written at install time (so `--prefix P` and CPack's /usr both get
# their own paths, never the build tree's). GCC reads the paths of an @file
# as they stand, relative to the compiler's working directory, so the file
# cannot follow a moved prefix: `P/bin/dlckpt-cc --flags` prints the recipe
# for wherever P is now (and notes a stale dlckpt.flags).
set(_flags_text "-I\${prefix}/${CMAKE_INSTALL_INCLUDEDIR} ${DLCKPT_STATIC_HEAD}${DLCKPT_STATIC_LIBS} ${DLCKPT_STATIC_TAIL}")
string(REPLACE "\${libdir}" "\${prefix}/${CMAKE_INSTALL_LIBDIR}" _flags_text "${_flags_text}")
install(CODE "
  set(prefix \"\${CMAKE_INSTALL_PREFIX}\")
  set(_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/dlckpt\")
  file(MAKE_DIRECTORY \"\${_dir}\")
  file(WRITE \"\${_dir}/dlckpt.flags\" \"${_flags_text}\\n\")
  message(STATUS \"Installing: \${_dir}/dlckpt.flags\")
")
install(PROGRAMS ${PROJECT_SOURCE_DIR}/apps/demo.sh DESTINATION ${CMAKE_INSTALL_DATADIR}/dlckpt)

# --- The Python package (python/dlckpt) in DLCKPT_INSTALL_PYTHONDIR, the
# directory Debian's python3 reads for /usr (`lib/python3/dist-packages`,
# not version-specific, so the .deb serves every Python 3). Under another
# prefix P, PYTHONPATH=P/lib/python3/dist-packages (Debian's python3 reads
# /usr/local/lib/python3.X/dist-packages for /usr/local: set
# -DDLCKPT_INSTALL_PYTHONDIR=lib/python3.11/dist-packages to land there). Its
# _build.py names the library directory relative to the package, so the
# prefix may move. The example goes to share/dlckpt/python/.
set(DLCKPT_INSTALL_PYTHONDIR "lib/python3/dist-packages" CACHE STRING
    "where the dlckpt Python package is installed, relative to the prefix")
file(RELATIVE_PATH DLCKPT_PYTHON_LIBDIR "/prefix/${DLCKPT_INSTALL_PYTHONDIR}/dlckpt"
     "/prefix/${CMAKE_INSTALL_LIBDIR}")
configure_file(${PROJECT_SOURCE_DIR}/python/dlckpt/_build.py.in
               ${PROJECT_BINARY_DIR}/python-install/_build.py @ONLY)
install(FILES ${PROJECT_SOURCE_DIR}/python/dlckpt/__init__.py ${PROJECT_BINARY_DIR}/python-install/_build.py
        DESTINATION ${DLCKPT_INSTALL_PYTHONDIR}/dlckpt)
install(FILES ${PROJECT_SOURCE_DIR}/python/examples/heat.py
              ${PROJECT_SOURCE_DIR}/python/examples/heat_regions.py DESTINATION ${CMAKE_INSTALL_DATADIR}/dlckpt/python)

# --- The CMake package.
string(REPLACE ";" " " DLCKPT_WRAP_LIST "${DLCKPT_INTERCEPT_WRAP_FLAGS}")
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/dlckptConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/dlckptConfig.cmake
  INSTALL_DESTINATION ${DLCKPT_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/cmake/dlckptConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/cmake/dlckptConfig.cmake
              ${PROJECT_BINARY_DIR}/cmake/dlckptConfigVersion.cmake
        DESTINATION ${DLCKPT_INSTALL_CMAKEDIR})
