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
!
! Memory regions (arrays) are passed by address and size in bytes; the array
! needs the TARGET (or POINTER) attribute for c_loc, and must stay allocated
! while protected (dlckpt/dlckpt.h, "Memory regions"):
!   use, intrinsic :: iso_c_binding, only: c_loc
!   real(8), allocatable, target :: u(:)
!   ierr = dlckpt_protect(1, c_loc(u), size(u, kind=8) * storage_size(u) / 8)  ! bytes: kind 4 or 8
!   if (dlckpt_restarted_epoch() > 0) ierr = dlckpt_recover()
!   ierr = dlckpt_checkpoint()
module dlckpt
  use, intrinsic :: iso_c_binding, only: c_int, c_long_long, c_ptr, c_char, c_associated, &
                                         c_f_pointer, c_size_t
  implicit none
  private

  integer, parameter, public :: DLCKPT_ENCODE_SYNC = 0
  integer, parameter, public :: DLCKPT_ENCODE_ASYNC = 1

  public :: dlckpt_init, dlckpt_checkpoint, dlckpt_set_encode_mode, dlckpt_checkpoint_wait
  public :: dlckpt_protected_epoch, dlckpt_restarted_epoch, dlckpt_finalize, dlckpt_last_error
  public :: dlckpt_protect, dlckpt_unprotect, dlckpt_recover, dlckpt_recover_region, dlckpt_region_size

  ! dlckpt_protect(id, ptr, bytes): bytes of 4- or 8-byte integer kind (a
  ! negative size fails with EINVAL).
  interface dlckpt_protect
    module procedure protect_i4, protect_i8
  end interface

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
    integer(c_int) function c_protect(id, ptr, bytes) bind(C, name="dlckpt_protect")
      import :: c_int, c_ptr, c_size_t
      integer(c_int), value :: id
      type(c_ptr), value :: ptr
      integer(c_size_t), value :: bytes
    end function
    ! The C functions themselves (integer(c_int) is the default integer).
    integer(c_int) function dlckpt_unprotect(id) bind(C, name="dlckpt_unprotect")
      import :: c_int
      integer(c_int), value :: id
    end function
    integer(c_int) function dlckpt_recover() bind(C, name="dlckpt_recover")
      import :: c_int
    end function
    integer(c_int) function dlckpt_recover_region(id) bind(C, name="dlckpt_recover_region")
      import :: c_int
      integer(c_int), value :: id
    end function
    integer(c_long_long) function dlckpt_region_size(id) bind(C, name="dlckpt_region_size")
      import :: c_int, c_long_long
      integer(c_int), value :: id
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

  integer function protect_i4(id, ptr, bytes)
    integer, intent(in) :: id
    type(c_ptr), intent(in) :: ptr
    integer(kind=4), intent(in) :: bytes
    protect_i4 = protect_i8(id, ptr, int(bytes, 8))
  end function

  integer function protect_i8(id, ptr, bytes)
    integer, intent(in) :: id
    type(c_ptr), intent(in) :: ptr
    integer(kind=8), intent(in) :: bytes
    protect_i8 = int(c_protect(int(id, c_int), ptr, int(bytes, c_size_t)))
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
