! dlckpt_hooks.f90 — Fortran interface to the dlckpt hooks of dlckpt_hooks.h
! (optional calls into the dlckpt application API). Uses module app_common,
! never the other way round.
module dlckpt_hooks
  use, intrinsic :: iso_c_binding
  use mpi_f08
  use app_common, only: c_string, f_string
  implicit none
  private

  public :: app_dlckpt_linked, app_dlckpt_restarted_epoch, app_dlckpt_finalize
  public :: app_default_slots, dlckpt_init, dlckpt_last_error, checkpoint_commit

  interface
    integer(c_int) function app_dlckpt_linked() bind(C)
      import :: c_int
    end function
    integer(c_long_long) function app_dlckpt_restarted_epoch() bind(C)
      import :: c_long_long
    end function
    integer(c_int) function app_dlckpt_finalize() bind(C)
      import :: c_int
    end function
    integer(c_int) function app_default_slots() bind(C)
      import :: c_int
    end function
    integer(c_int) function app_dlckpt_init_f(comm) bind(C)
      import :: c_int
      integer(c_int), value :: comm
    end function
    type(c_ptr) function app_dlckpt_last_error() bind(C)
      import :: c_ptr
    end function
    subroutine app_checkpoint_commit_f(comm, app) bind(C)
      import :: c_int, c_char
      integer(c_int), value :: comm
      character(kind=c_char), intent(in) :: app(*)
    end subroutine
  end interface

contains

  integer function dlckpt_init(comm)
    type(MPI_Comm), intent(in) :: comm
    dlckpt_init = int(app_dlckpt_init_f(int(comm%MPI_VAL, c_int)))
  end function

  function dlckpt_last_error() result(msg)
    character(len=:), allocatable :: msg
    msg = f_string(app_dlckpt_last_error())
  end function

  ! See app_checkpoint_commit in dlckpt_hooks.h.
  subroutine checkpoint_commit(comm, app)
    type(MPI_Comm), intent(in) :: comm
    character(len=*), intent(in) :: app
    call app_checkpoint_commit_f(int(comm%MPI_VAL, c_int), c_string(app))
  end subroutine
end module dlckpt_hooks
