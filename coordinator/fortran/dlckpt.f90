! dlckpt.f90 — module dlckpt: the Fortran binding of the application API
! (dlckpt/dlckpt.h), with the same names and meanings. Every function returns
! 0 on success and -1 on failure; dlckpt_last_error() then says what failed.
! Communicators are Fortran handles: pass MPI_COMM_WORLD with `use mpi` or
! mpif.h, and comm%MPI_VAL with `use mpi_f08`.
!
!   use dlckpt
!   ierr = dlckpt_init(MPI_COMM_WORLD)
!   ierr = dlckpt_set_encode_mode(DLCKPT_ENCODE_ASYNC)
!   ... write the checkpoint under /dlckpt/ with Fortran I/O ...
!   ierr = dlckpt_checkpoint()        ! returns once committed (async)
!   ierr = dlckpt_checkpoint_wait()   ! returns once protected
!   print *, dlckpt_protected_epoch()
!   ierr = dlckpt_finalize()
module dlckpt
  use, intrinsic :: iso_c_binding, only: c_int, c_long_long, c_ptr, c_char, c_associated, &
                                         c_f_pointer
  implicit none
  private

  integer, parameter, public :: DLCKPT_ENCODE_SYNC = 0
  integer, parameter, public :: DLCKPT_ENCODE_ASYNC = 1

  public :: dlckpt_init, dlckpt_checkpoint, dlckpt_set_encode_mode, dlckpt_checkpoint_wait
  public :: dlckpt_protected_epoch, dlckpt_restarted_epoch, dlckpt_finalize, dlckpt_last_error

  interface
    integer(c_int) function c_init_f(comm) bind(C, name="dlckpt_init_f")
      import :: c_int
      integer(c_int), value :: comm
    end function
    integer(c_int) function c_checkpoint() bind(C, name="dlckpt_checkpoint")
      import :: c_int
    end function
    integer(c_int) function c_set_encode_mode(mode) bind(C, name="dlckpt_set_encode_mode")
      import :: c_int
      integer(c_int), value :: mode
    end function
    integer(c_int) function c_checkpoint_wait() bind(C, name="dlckpt_checkpoint_wait")
      import :: c_int
    end function
    integer(c_long_long) function c_protected_epoch() bind(C, name="dlckpt_protected_epoch")
      import :: c_long_long
    end function
    integer(c_long_long) function c_restarted_epoch() bind(C, name="dlckpt_restarted_epoch")
      import :: c_long_long
    end function
    integer(c_int) function c_finalize() bind(C, name="dlckpt_finalize")
      import :: c_int
    end function
    type(c_ptr) function c_last_error() bind(C, name="dlckpt_last_error")
      import :: c_ptr
    end function
  end interface

contains

  integer function dlckpt_init(comm)
    integer, intent(in) :: comm
    dlckpt_init = int(c_init_f(int(comm, c_int)))
  end function

  integer function dlckpt_checkpoint()
    dlckpt_checkpoint = int(c_checkpoint())
  end function

  integer function dlckpt_set_encode_mode(mode)
    integer, intent(in) :: mode
    dlckpt_set_encode_mode = int(c_set_encode_mode(int(mode, c_int)))
  end function

  integer function dlckpt_checkpoint_wait()
    dlckpt_checkpoint_wait = int(c_checkpoint_wait())
  end function

  integer(c_long_long) function dlckpt_protected_epoch()
    dlckpt_protected_epoch = c_protected_epoch()
  end function

  integer(c_long_long) function dlckpt_restarted_epoch()
    dlckpt_restarted_epoch = c_restarted_epoch()
  end function

  integer function dlckpt_finalize()
    dlckpt_finalize = int(c_finalize())
  end function

  ! The message of the last failed call ("" if none).
  function dlckpt_last_error() result(msg)
    character(len=:), allocatable :: msg
    type(c_ptr) :: p
    character(kind=c_char), pointer :: chars(:)
    integer :: n
    p = c_last_error()
    msg = ""
    if (.not. c_associated(p)) return
    call c_f_pointer(p, chars, [4096])
    n = 0
    do while (n < 4096)
      if (chars(n + 1) == char(0)) exit
      n = n + 1
    end do
    allocate(character(len=n) :: msg)
    msg = transfer(chars(1:n), msg)
  end function
end module dlckpt
