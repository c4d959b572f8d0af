# The MPI dlckpt is built with, and the launcher bound to it at build time.
#
# DLCKPT_MPI names the implementation: mpich (the default) or openmpi. On
# Debian both can be installed side by side; /usr/bin/mpicc and mpiexec are
# alternatives that point to whichever has the higher priority (Open MPI once
# it is installed), so the build looks for the implementation's own names
# (mpicc.mpich, mpiexec.mpich; mpicc.openmpi, mpirun.openmpi) first. "auto"
# takes what FindMPI finds first in PATH.
#
# Results (cache and normal variables):
#   DLCKPT_MPI_FLAVOR   mpich or openmpi, from the launcher's --version
#   DLCKPT_MPIEXEC      absolute path of the launcher, not an alternatives link:
#                       dlckpt-run's default --mpiexec, the tests' and benches'
#   DLCKPT_MPICC_BOUND, DLCKPT_MPICXX_BOUND, DLCKPT_MPIF90_BOUND: its wrappers
#   DLCKPT_MPI_BIN_DIR  a directory of the build tree with mpiexec, mpirun,
#                       mpicc, mpicxx, mpif90 and mpifort bound to that MPI,
#                       and mpiexec-local (`-n N PROGRAM ...` on this machine,
#                       the same words for either MPI); every test runs with
#                       it first in PATH.

set(DLCKPT_MPI "mpich" CACHE STRING "MPI to build with: mpich (default), openmpi, or auto (FindMPI's first)")
set_property(CACHE DLCKPT_MPI PROPERTY STRINGS mpich openmpi auto)

if(DLCKPT_MPI STREQUAL "mpich")
  set(_dlckpt_mpi_suffix mpich)
  set(_dlckpt_mpi_launchers mpiexec.mpich mpirun.mpich mpiexec.hydra)
elseif(DLCKPT_MPI STREQUAL "openmpi")
  set(_dlckpt_mpi_suffix openmpi)
  set(_dlckpt_mpi_launchers mpirun.openmpi mpiexec.openmpi orterun)
elseif(NOT DLCKPT_MPI STREQUAL "auto")
  message(FATAL_ERROR "DLCKPT_MPI='${DLCKPT_MPI}': want mpich, openmpi or auto")
endif()

if(DEFINED _dlckpt_mpi_suffix)
  set(_wrappers_C mpicc)
  set(_wrappers_CXX mpicxx mpic++)
  set(_wrappers_Fortran mpifort mpif90)
  foreach(lang C CXX Fortran)
    if(NOT MPI_${lang}_COMPILER)
      set(_names "")
      foreach(w IN LISTS _wrappers_${lang})
        list(APPEND _names ${w}.${_dlckpt_mpi_suffix})
      endforeach()
      find_program(DLCKPT_MPI_${lang}_WRAPPER NAMES ${_names})
      if(DLCKPT_MPI_${lang}_WRAPPER)
        set(MPI_${lang}_COMPILER ${DLCKPT_MPI_${lang}_WRAPPER} CACHE FILEPATH "MPI ${lang} compiler wrapper")
      endif()
    endif()
  endforeach()
  if(NOT MPIEXEC_EXECUTABLE)
    find_program(DLCKPT_MPI_LAUNCHER NAMES ${_dlckpt_mpi_launchers})
    if(DLCKPT_MPI_LAUNCHER)
      set(MPIEXEC_EXECUTABLE ${DLCKPT_MPI_LAUNCHER} CACHE FILEPATH "MPI launcher")
    endif()
  endif()
  if(NOT MPI_C_COMPILER OR NOT MPIEXEC_EXECUTABLE)
    message(STATUS "dlckpt: no ${_dlckpt_mpi_suffix}-suffixed MPI wrappers or launcher; "
                   "taking what FindMPI finds and checking it is ${DLCKPT_MPI}")
  endif()
endif()

find_package(MPI REQUIRED COMPONENTS C CXX Fortran)

# _dlckpt_unalias(VAR PATH): PATH with links followed while its name is a
# bare name (mpiexec, mpicc, ...) or it lies in /etc/alternatives: the program
# an alternatives link points to today, under its own (suffixed) name. Open
# MPI's wrappers read their name, so the links are not followed further.
function(_dlckpt_unalias var path)
  foreach(i RANGE 8)
    get_filename_component(_n "${path}" NAME)
    if(NOT (_n MATCHES "^(mpiexec|mpirun|mpicc|mpicxx|mpic\\+\\+|mpiCC|mpif77|mpif90|mpifort)$" OR
            path MATCHES "^/etc/alternatives/") OR NOT IS_SYMLINK "${path}")
      break()
    endif()
    file(READ_SYMLINK "${path}" _t)
    if(NOT IS_ABSOLUTE "${_t}")
      get_filename_component(_d "${path}" DIRECTORY)
      set(_t "${_d}/${_t}")
    endif()
    set(path "${_t}")
  endforeach()
  set(${var} "${path}" PARENT_SCOPE)
endfunction()

_dlckpt_unalias(DLCKPT_MPIEXEC "${MPIEXEC_EXECUTABLE}")

execute_process(COMMAND "${DLCKPT_MPIEXEC}" --version OUTPUT_VARIABLE _dlckpt_mpiexec_version
                ERROR_VARIABLE _dlckpt_mpiexec_version TIMEOUT 30)
if(_dlckpt_mpiexec_version MATCHES "HYDRA")
  set(DLCKPT_MPI_FLAVOR mpich)
elseif(_dlckpt_mpiexec_version MATCHES "Open MPI|OpenRTE|open-mpi")
  set(DLCKPT_MPI_FLAVOR openmpi)
else()
  message(FATAL_ERROR "dlckpt: cannot tell which MPI ${DLCKPT_MPIEXEC} launches ('--version' printed: "
                      "${_dlckpt_mpiexec_version}); dlckpt supports MPICH (Hydra) and Open MPI. Set "
                      "MPIEXEC_EXECUTABLE and MPI_C_COMPILER, or -DDLCKPT_MPI=mpich|openmpi.")
endif()
if(NOT DLCKPT_MPI STREQUAL "auto" AND NOT DLCKPT_MPI STREQUAL DLCKPT_MPI_FLAVOR)
  message(FATAL_ERROR "dlckpt: -DDLCKPT_MPI=${DLCKPT_MPI} but ${DLCKPT_MPIEXEC} is ${DLCKPT_MPI_FLAVOR}'s launcher; "
                      "install the ${DLCKPT_MPI} development package (Debian: libmpich-dev or libopenmpi-dev) or "
                      "set MPIEXEC_EXECUTABLE and MPI_C_COMPILER to its programs")
endif()

# The library MPI_C links, to check against: mpich's libmpich, Open MPI's libmpi.
if(MPI_C_LIBRARIES MATCHES "mpich")
  set(_dlckpt_lib_flavor mpich)
elseif(MPI_C_LIBRARIES MATCHES "openmpi|libmpi\\.so")
  set(_dlckpt_lib_flavor openmpi)
endif()
if(DEFINED _dlckpt_lib_flavor AND NOT _dlckpt_lib_flavor STREQUAL DLCKPT_MPI_FLAVOR)
  message(FATAL_ERROR "dlckpt: the MPI C library (${MPI_C_LIBRARIES}) is ${_dlckpt_lib_flavor}'s but the launcher "
                      "${DLCKPT_MPIEXEC} is ${DLCKPT_MPI_FLAVOR}'s; -DDLCKPT_MPI=mpich|openmpi picks both")
endif()
message(STATUS "dlckpt: MPI ${DLCKPT_MPI_FLAVOR}, launcher ${DLCKPT_MPIEXEC}, C wrapper ${MPI_C_COMPILER}")

# Bound names for the tests (which run `mpiexec`, `mpicc`, ... from PATH).
set(DLCKPT_MPI_BIN_DIR ${PROJECT_BINARY_DIR}/mpi-bin)
file(MAKE_DIRECTORY ${DLCKPT_MPI_BIN_DIR})
# What the launcher scripts do before they start the launcher. Open MPI's
# mpirun refuses root unless two variables give the documented consent, and
# refuses more ranks than cores (tests run many ranks on one machine) unless
# told to oversubscribe; both are set here only when the caller left them unset.
if(DLCKPT_MPI_FLAVOR STREQUAL "openmpi")
  set(_dlckpt_launcher_prelude
"if [ \"$(id -u)\" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=\"\${OMPI_ALLOW_RUN_AS_ROOT:-1}\" OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=\"\${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}\"
fi
export OMPI_MCA_rmaps_base_oversubscribe=\"\${OMPI_MCA_rmaps_base_oversubscribe:-1}\"
")
else()
  set(_dlckpt_launcher_prelude "")
endif()
# Scripts, not links: Hydra finds hydra_pmi_proxy beside the path it was
# started as, and Open MPI's wrappers read their own name.
function(_dlckpt_bind_program name target)
  file(REMOVE ${DLCKPT_MPI_BIN_DIR}/${name})
  set(_prelude "")
  if(name MATCHES "^mpi(exec|run)")
    set(_prelude "${_dlckpt_launcher_prelude}")
  endif()
  set(_args "\"$@\"")
  if(name STREQUAL "mpiexec-local")
    # `mpiexec-local -n N PROGRAM ARGS...`: N ranks on this machine, in either
    # MPI (Hydra's local launch is -launcher fork; mpirun's is its default).
    if(DLCKPT_MPI_FLAVOR STREQUAL "mpich")
      set(_args "-launcher fork \"$@\"")
    endif()
  endif()
  file(WRITE ${DLCKPT_MPI_BIN_DIR}/${name}
       "#!/bin/sh\n# ${name} of the MPI dlckpt was built with (cmake/mpi.cmake)\n${_prelude}exec '${target}' ${_args}\n")
  file(CHMOD ${DLCKPT_MPI_BIN_DIR}/${name} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
       GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endfunction()
_dlckpt_bind_program(mpiexec "${DLCKPT_MPIEXEC}")
_dlckpt_bind_program(mpirun "${DLCKPT_MPIEXEC}")
_dlckpt_bind_program(mpiexec-local "${DLCKPT_MPIEXEC}")
foreach(pair "mpicc;C" "mpicxx;CXX" "mpif90;Fortran" "mpifort;Fortran")
  list(GET pair 0 _name)
  list(GET pair 1 _lang)
  if(MPI_${_lang}_COMPILER)
    _dlckpt_unalias(_w "${MPI_${_lang}_COMPILER}")
    _dlckpt_bind_program(${_name} "${_w}")
    set(DLCKPT_MPI_${_lang}_BOUND "${_w}")
  endif()
endforeach()
# The wrappers dlckpt-cc/-cxx/-f90 and the installed CMake package default to.
set(DLCKPT_MPICC_BOUND "${DLCKPT_MPI_C_BOUND}")
set(DLCKPT_MPICXX_BOUND "${DLCKPT_MPI_CXX_BOUND}")
set(DLCKPT_MPIF90_BOUND "${DLCKPT_MPI_Fortran_BOUND}")
