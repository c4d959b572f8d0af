! Fortran arrays through module dlckpt: every rank protects its iteration
! counter (region 0), a 2-D real(8) field (region 1, c_loc of an allocatable
! TARGET array, bytes from size and storage_size) and an integer(8) array (region 2, bytes
! as a default integer), checkpoints every iteration and, after a restart,
! gets them back with dlckpt_recover. The field diffuses with its ring
! neighbours' edges. Rank 0 prints "restarted from iteration K" after a
! restart and, last, "checksum: <hex>" of every rank's arrays (the same with
! or without failures).
!
!   mem_app_f [--iters N] [--sleep-ms S]
program mem_app_f
  use, intrinsic :: iso_c_binding, only: c_loc, c_sizeof, c_int
  use mpi
  use dlckpt
  implicit none
  integer, parameter :: nx = 64, ny = 48
  integer, target :: it
  real(8), allocatable, target :: field(:, :)
  integer(8), allocatable, target :: counts(:)
  real(8) :: edge(nx)
  integer :: ierr, rank, nranks, iters, sleep_ms, i, j, left, right
  integer(8) :: h, total
  character(len=32) :: arg
  interface
    integer(c_int) function usleep(us) bind(C, name="usleep")
      import :: c_int
      integer(c_int), value :: us
    end function
  end interface

  iters = 10
  sleep_ms = 50
  i = 1
  do while (i < command_argument_count())
    call get_command_argument(i, arg)
    if (arg == "--iters") then
      call get_command_argument(i + 1, arg)
      read(arg, *) iters
    else if (arg == "--sleep-ms") then
      call get_command_argument(i + 1, arg)
      read(arg, *) sleep_ms
    end if
    i = i + 2
  end do

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  if (dlckpt_init(MPI_COMM_WORLD) /= 0) call fail("dlckpt_init")
  allocate(field(nx, ny), counts(ny))
  it = 0
  do j = 1, ny
    do i = 1, nx
      field(i, j) = real(mod(rank * 7919 + i * 31 + j * 17, 1000), 8)
    end do
  end do
  counts = 0
  if (dlckpt_protect(0, c_loc(it), c_sizeof(it)) /= 0) call fail("dlckpt_protect")
  if (dlckpt_protect(1, c_loc(field), size(field, kind=8) * storage_size(field) / 8) /= 0) call fail("dlckpt_protect")
  if (dlckpt_protect(2, c_loc(counts), size(counts) * 8) /= 0) call fail("dlckpt_protect")
  if (dlckpt_restarted_epoch() > 0) then
    if (dlckpt_region_size(1) /= nx * ny * 8) call fail("dlckpt_region_size")
    if (dlckpt_recover() /= 0) call fail("dlckpt_recover")
    if (rank == 0 .and. it > 0) print '(a,i0)', "restarted from iteration ", it
  end if

  right = mod(rank + 1, nranks)
  left = mod(rank + nranks - 1, nranks)
  do while (it < iters)
    call MPI_Sendrecv(field(:, ny), nx, MPI_DOUBLE_PRECISION, right, 0, edge, nx, MPI_DOUBLE_PRECISION, left, 0, &
                      MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    field(:, 1) = 0.5d0 * field(:, 1) + 0.5d0 * edge
    do j = 2, ny
      field(:, j) = 0.25d0 * field(:, j - 1) + 0.75d0 * field(:, j)
    end do
    do j = 1, ny
      counts(j) = mod(counts(j) * 3 + int(field(1 + mod(it, nx), j), 8), 1000000007_8)
    end do
    it = it + 1
    if (usleep(int(sleep_ms * 1000, c_int)) /= 0) continue
    if (dlckpt_checkpoint() /= 0) call fail("dlckpt_checkpoint")
  end do

  ! The checksum: the arrays' bits, mixed per rank, XORed over ranks.
  h = int(rank, 8)
  do j = 1, ny
    do i = 1, nx
      h = ieor(ishftc(h, 5), transfer(field(i, j), h))
    end do
    h = ieor(ishftc(h, 7), counts(j))
  end do
  call MPI_Reduce(h, total, 1, MPI_INTEGER8, MPI_BXOR, 0, MPI_COMM_WORLD, ierr)
  if (dlckpt_finalize() /= 0) call fail("dlckpt_finalize")
  if (rank == 0) print '(a,z16.16)', "checksum: ", total
  call MPI_Finalize(ierr)
contains
  subroutine fail(what)
    character(len=*), intent(in) :: what
    integer :: e
    print '(a,i0,a,a,a,a)', "mem_app_f rank ", rank, ": ", what, ": ", dlckpt_last_error()
    call MPI_Abort(MPI_COMM_WORLD, 1, e)
  end subroutine
end program
