! app_common.f90 — Fortran interface to the helpers of app_common.h (restart
! agreement, checksums, files), plus waits and reductions that do not spin,
! written with mpi_f08. Collective routines take the communicator of the
! calling application. The dlckpt hooks are module dlckpt_hooks
! (dlckpt_hooks.f90), which uses this one.
module app_common
  use, intrinsic :: iso_c_binding
  use mpi_f08
  implicit none
  private

  public :: app_now, app_sleep_ms, app_hash_bytes, app_checksum_block
  public :: agree_restart, checksum_combine, hex16, mkdir_p, make_durable, open_status
  public :: errno_text, c_string, f_string
  public :: waitall, barrier, max_double, any_rank

  interface
    real(c_double) function app_now() bind(C)
      import :: c_double
    end function
    subroutine app_sleep_ms(ms) bind(C)
      import :: c_int
      integer(c_int), value :: ms
    end subroutine
    subroutine app_sleep_us(us) bind(C)
      import :: c_int
      integer(c_int), value :: us
    end subroutine
    ! app_waitall on Fortran handles (dlckpt's one sleeping wait).
    subroutine app_waitall_f(count, reqs) bind(C)
      import :: c_int
      integer(c_int), value :: count
      integer(c_int), intent(inout) :: reqs(*)
    end subroutine
    ! Returns uint64_t; Fortran holds the bits in a signed 64-bit integer.
    integer(c_int64_t) function app_hash_bytes(data, len, seed) bind(C)
      import :: c_int64_t, c_ptr, c_size_t
      type(c_ptr), value :: data
      integer(c_size_t), value :: len
      integer(c_int64_t), value :: seed
    end function
    integer(c_int64_t) function app_checksum_block(first, field, origin, global, count, stride) &
        bind(C)
      import :: c_int64_t, c_ptr, c_int, c_long_long
      type(c_ptr), value :: first
      integer(c_int), value :: field
      integer(c_long_long), intent(in) :: origin(3), global(3), count(3), stride(3)
    end function
    integer(c_long_long) function app_agree_restart_f(held, comm, newest, lacking, first_lacking) &
        bind(C)
      import :: c_long_long, c_int
      integer(c_long_long), intent(in) :: held(2)
      integer(c_int), value :: comm
      integer(c_long_long), intent(out) :: newest
      integer(c_int), intent(out) :: lacking, first_lacking
    end function
    integer(c_int64_t) function app_checksum_combine_f(local, comm) bind(C)
      import :: c_int64_t, c_int
      integer(c_int64_t), value :: local
      integer(c_int), value :: comm
    end function
    subroutine app_format_hex(value, out) bind(C)
      import :: c_int64_t, c_char
      integer(c_int64_t), value :: value
      character(kind=c_char), intent(out) :: out(17)
    end subroutine
    integer(c_int) function app_mkdir_p(path) bind(C)
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: path(*)
    end function
    integer(c_int) function app_make_durable(path) bind(C)
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: path(*)
    end function
    integer(c_int) function app_open_status(path) bind(C)
      import :: c_int, c_char
      character(kind=c_char), intent(in) :: path(*)
    end function
    type(c_ptr) function strerror(errnum) bind(C)
      import :: c_ptr, c_int
      integer(c_int), value :: errnum
    end function
    integer(c_size_t) function strlen(s) bind(C)
      import :: c_size_t, c_ptr
      type(c_ptr), value :: s
    end function
  end interface

contains

  ! A NUL-terminated copy of s (trailing blanks removed) for C.
  function c_string(s) result(out)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=:), allocatable :: out
    out = trim(s) // c_null_char
  end function

  ! A Fortran copy of a NUL-terminated C string.
  function f_string(p) result(out)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: out
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(p)) then
      out = ''
      return
    end if
    n = int(strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: out)
    do i = 1, n
      out(i:i) = chars(i)
    end do
  end function

  ! See app_agree_restart in app_common.h.
  integer(c_long_long) function agree_restart(held, comm, newest, lacking, first_lacking)
    integer(c_long_long), intent(in) :: held(2)
    type(MPI_Comm), intent(in) :: comm
    integer(c_long_long), intent(out) :: newest
    integer, intent(out) :: lacking, first_lacking
    integer(c_int) :: l, f
    agree_restart = app_agree_restart_f(held, int(comm%MPI_VAL, c_int), newest, l, f)
    lacking = int(l)
    first_lacking = int(f)
  end function

  integer(c_int64_t) function checksum_combine(local, comm)
    integer(c_int64_t), intent(in) :: local
    type(MPI_Comm), intent(in) :: comm
    checksum_combine = app_checksum_combine_f(local, int(comm%MPI_VAL, c_int))
  end function

  ! 16 lower-case hex digits of the 64 bits of v.
  function hex16(v) result(out)
    integer(c_int64_t), intent(in) :: v
    character(len=16) :: out
    character(kind=c_char) :: buf(17)
    integer :: i
    call app_format_hex(v, buf)
    do i = 1, 16
      out(i:i) = buf(i)
    end do
  end function

  ! mkdir -p; returns '' or an error message naming the path.
  function mkdir_p(path) result(err)
    character(len=*), intent(in) :: path
    character(len=:), allocatable :: err
    err = path_error(app_mkdir_p(c_string(path)), 'cannot create checkpoint directory ', path)
  end function

  ! fsync of a closed file and its directory; returns '' or an error message
  ! naming the path.
  function make_durable(path) result(err)
    character(len=*), intent(in) :: path
    character(len=:), allocatable :: err
    err = path_error(app_make_durable(c_string(path)), 'cannot fsync ', path)
  end function

  ! '' if rc (of a C call that sets errno) is 0, else what // path // ': ' //
  ! the text of errno. Call it on the C call's result, before anything else
  ! can change errno.
  function path_error(rc, what, path) result(err)
    integer(c_int), intent(in) :: rc
    character(len=*), intent(in) :: what, path
    character(len=:), allocatable :: err
    integer(c_int) :: e
    err = ''
    if (rc /= 0) then
      e = errno()
      err = what // trim(path) // ': ' // f_string(strerror(e))
    end if
  end function

  ! 0 if path opens for reading, else open()'s errno (ENOENT = 2: missing).
  integer function open_status(path)
    character(len=*), intent(in) :: path
    open_status = int(app_open_status(c_string(path)))
  end function

  ! The text of an errno value.
  function errno_text(e) result(text)
    integer, intent(in) :: e
    character(len=:), allocatable :: text
    text = f_string(strerror(int(e, c_int)))
  end function

  integer(c_int) function errno()
    interface
      type(c_ptr) function errno_location() bind(C, name='__errno_location')
        import :: c_ptr
      end function
    end interface
    integer(c_int), pointer :: e
    call c_f_pointer(errno_location(), e)
    errno = e
  end function

  ! Completes every request without busy-polling (app_waitall in C).
  subroutine waitall(reqs)
    type(MPI_Request), intent(inout) :: reqs(:)
    integer(c_int) :: handles(size(reqs))
    handles = int(reqs%MPI_VAL, c_int)
    call app_waitall_f(int(size(reqs), c_int), handles)
    reqs%MPI_VAL = handles
  end subroutine

  subroutine barrier(comm)
    type(MPI_Comm), intent(in) :: comm
    type(MPI_Request) :: r(1)
    call MPI_Ibarrier(comm, r(1))
    call waitall(r)
  end subroutine

  real(c_double) function max_double(v, comm)
    real(c_double), intent(in) :: v
    type(MPI_Comm), intent(in) :: comm
    real(c_double), asynchronous :: sendbuf(1), recvbuf(1)
    type(MPI_Request) :: r(1)
    sendbuf(1) = v
    call MPI_Iallreduce(sendbuf, recvbuf, 1, MPI_DOUBLE_PRECISION, MPI_MAX, comm, r(1))
    call waitall(r)
    max_double = recvbuf(1)
  end function

  ! True on every rank if flag is true on any rank of comm.
  logical function any_rank(flag, comm)
    logical, intent(in) :: flag
    type(MPI_Comm), intent(in) :: comm
    any_rank = max_double(merge(1d0, 0d0, flag), comm) > 0d0
  end function
end module app_common
