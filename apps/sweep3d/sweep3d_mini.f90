! sweep3d-mini — a small relative of ASCI Sweep3D: one-group, time-independent
! discrete-ordinates (S_N) neutral-particle transport on a 3-D Cartesian grid.
!
! Physics and numerics. Source iteration: each iteration builds the
! scattering source from the previous flux moments (isotropic plus linearly
! anisotropic, P1, scattering), then sweeps every discrete direction of a
! level-symmetric S4 or S6 quadrature (3 or 6 directions per octant, all eight
! octants) through the grid with the diamond-difference cell balance and a
! set-to-zero flux fixup, accumulating the new scalar flux and its three first
! angular moments. Boundaries are vacuum. The medium is a scatterer
! (sigma_t 1, sigma_s 0.8) with an absorbing block (sigma_t 2, sigma_s 0.2) and
! a cubic source region. The flux is non-negative by construction (checked).
!
! Parallelism. KBA wavefront: the i and j dimensions are split over a 2-D
! process grid, k is kept whole and cut into blocks of --mk planes, the
! directions of an octant into blocks of --mmi angles. For each octant, angle
! block and k block a rank receives its inflow faces from the upstream i and
! j neighbours, sweeps the block, and sends the outflow faces downstream, so
! the ranks work as a pipeline along the diagonal of the process grid. Each
! cell's arithmetic, including the order in which directions add into its
! moments, is independent of the decomposition and blocking.
!
! Checkpoints (Fortran unformatted sequential I/O): every --ckpt-every
! iterations each rank writes <dir>/sweep3d-mini.<rank>.<slot>.ckpt holding a
! text header record, an integer header record, the flux and moment arrays
! and their source counterparts, and a trailer with a content hash.
module sweep3d
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: output_unit, error_unit, int64, iostat_end
  use mpi_f08
  use app_common
  use dlckpt_hooks
  implicit none

  character(len=*), parameter :: app = 'sweep3d-mini'
  integer(int64), parameter :: ckpt_magic = 5785792106485274451_int64  ! 'SWP3DCKP' as little-endian bytes
  integer(int64), parameter :: ckpt_version = 1
  integer(int64), parameter :: hash_seed = 3559026163360036723_int64  ! 'sweep3d1'
  integer, parameter :: nhdr = 16
  integer, parameter :: enoent = 2  ! Linux errno
  real(c_double), parameter :: dx = 0.5d0, dy = 0.5d0, dz = 0.5d0
  real(c_double), parameter :: aniso = 0.2d0  ! P1 coefficient g: sigma_s1 = g sigma_s

  ! Options.
  integer :: it = 16, jt = 16, kt = 32, sn = 6, mk = 4, mmi = 3
  integer(int64) :: iters = 10, ckpt_every = 1, print_every = 0
  integer :: slots = 0, sleep_ms = 0
  character(len=4096) :: ckpt_dir = '/dlckpt/sweep3d-mini'

  ! Process grid.
  type(MPI_Comm) :: cart
  integer :: rank, nprocs, npe_i, npe_j, ci, cj, west, east, south, north

  ! Quadrature: mm directions per octant, weights summing to 1 over the sphere.
  integer :: mm
  real(c_double), allocatable :: mu(:), eta(:), xi(:), w(:)

  ! State: scalar flux, its first moments, and the matching sources.
  real(c_double), allocatable, target :: flux(:,:,:), fluxm(:,:,:,:)
  real(c_double), allocatable, target :: src(:,:,:), srcm(:,:,:,:)
  ! Materials (recomputed from options, not checkpointed) and scratch.
  real(c_double), allocatable :: sigt(:,:,:), sigs(:,:,:), qext(:,:,:), flux_old(:,:,:)
  real(c_double), allocatable, asynchronous :: phiib(:,:,:), phijb(:,:,:)
  real(c_double), allocatable :: phikb(:,:,:)

contains

  function itoa(v) result(s)
    integer(int64), intent(in) :: v
    character(len=:), allocatable :: s
    character(len=24) :: buf
    write(buf, '(i0)') v
    s = trim(buf)
  end function

  function i2a(v) result(s)
    integer, intent(in) :: v
    character(len=:), allocatable :: s
    s = itoa(int(v, int64))
  end function

  subroutine say(line)
    character(len=*), intent(in) :: line
    if (rank == 0) then
      write(output_unit, '(a)') line
      flush(output_unit)
    end if
  end subroutine

  subroutine complain(line)
    character(len=*), intent(in) :: line
    write(error_unit, '(a)') app // ': rank ' // i2a(rank) // ': ' // line
    flush(error_unit)
  end subroutine

  subroutine usage(unit)
    integer, intent(in) :: unit
    write(unit, '(a)') &
      'usage: sweep3d-mini [options]', &
      'S_N discrete-ordinates transport (source iteration, diamond difference, KBA', &
      'wavefront over a 2-D process grid) with checkpoint/restart through Fortran I/O.', &
      '', &
      '  --nx N            cells per rank along i (default 16)', &
      '  --ny N            cells per rank along j (default 16)', &
      '  --nz N            cells along k, not decomposed (default 32)', &
      '                    checkpoint payload per rank = nx * ny * nz * 64 bytes', &
      '  --sn 4|6          level-symmetric quadrature order (default 6)', &
      '  --mk N            k planes per pipeline block, divides --nz (default 4)', &
      '  --mmi N           angles per pipeline block, divides sn(sn+2)/8 (default 3)', &
      '  --iters N         source iterations of the whole run (default 10)', &
      '  --ckpt-every N    checkpoint every N iterations; 0 = never (default 1)', &
      '  --ckpt-dir DIR    checkpoint directory (default /dlckpt/sweep3d-mini);', &
      '                    use a disk path such as /tmp/s for runs without dlckpt', &
      '  --ckpt-slots 1|2  files kept per rank: 2 alternate (default without dlckpt),', &
      '                    1 is rewritten in place (default with dlckpt)', &
      '  --sleep-ms MS     sleep MS milliseconds per iteration (compute padding)', &
      '  --print-every N   progress line every N iterations (default iters/10)', &
      '  --help            this text', &
      '', &
      'On start the run resumes from the newest checkpoint iteration that every', &
      'rank holds intact. The last line of output is ''checksum: <16 hex digits>''.'
  end subroutine

  logical function parse_int(name, text, lo, hi, out)
    character(len=*), intent(in) :: name, text
    integer(int64), intent(in) :: lo, hi
    integer(int64), intent(out) :: out
    integer :: ios
    parse_int = .false.
    out = 0
    if (len_trim(text) > 0 .and. len_trim(text) <= 18 .and. verify(trim(text), '0123456789') == 0) then
      read(text, *, iostat=ios) out
      if (ios == 0 .and. out >= lo .and. out <= hi) parse_int = .true.
    end if
    if (.not. parse_int .and. rank == 0) write(error_unit, '(a)') app // ': --' // name // &
        ': expected an integer in [' // itoa(lo) // ', ' // itoa(hi) // '], got ''' // trim(text) // ''''
  end function

  ! Returns 0 to run, 1 after --help, -1 on a usage error (message printed).
  integer function parse_options()
    character(len=4096) :: arg, key, val
    integer :: i, n, eq
    integer(int64) :: v
    logical :: ok
    parse_options = 0
    n = command_argument_count()
    i = 1
    do while (i <= n)
      call get_command_argument(i, arg)
      i = i + 1
      if (arg == '--help') then
        if (rank == 0) call usage(output_unit)
        parse_options = 1
        return
      end if
      eq = index(arg, '=')
      if (arg(1:2) /= '--') then
        if (rank == 0) write(error_unit, '(a)') app // ': unexpected argument ''' // trim(arg) // ''''
        parse_options = -1
        return
      end if
      if (eq > 0) then
        key = arg(3:eq-1)
        val = arg(eq+1:)
      else
        key = arg(3:)
        if (index(' nx ny nz sn mk mmi iters ckpt-every ckpt-dir ckpt-slots sleep-ms print-every ', &
                  ' ' // trim(key) // ' ') == 0) then
          if (rank == 0) then
            write(error_unit, '(a)') app // ': unknown option ''' // trim(arg) // ''''
            call usage(error_unit)
          end if
          parse_options = -1
          return
        end if
        if (i > n) then
          if (rank == 0) write(error_unit, '(a)') app // ': option --' // trim(key) // ' needs a value'
          parse_options = -1
          return
        end if
        call get_command_argument(i, val)
        i = i + 1
      end if
      ok = .true.
      select case (trim(key))
      case ('nx')
        ok = parse_int('nx', val, 1_int64, 1048576_int64, v); it = int(v)
      case ('ny')
        ok = parse_int('ny', val, 1_int64, 1048576_int64, v); jt = int(v)
      case ('nz')
        ok = parse_int('nz', val, 1_int64, 1048576_int64, v); kt = int(v)
      case ('sn')
        ok = parse_int('sn', val, 4_int64, 6_int64, v); sn = int(v)
        if (ok .and. sn /= 4 .and. sn /= 6) then
          ok = .false.
          if (rank == 0) write(error_unit, '(a)') app // ': --sn: expected 4 or 6'
        end if
      case ('mk')
        ok = parse_int('mk', val, 1_int64, 1048576_int64, v); mk = int(v)
      case ('mmi')
        ok = parse_int('mmi', val, 1_int64, 6_int64, v); mmi = int(v)
      case ('iters')
        ok = parse_int('iters', val, 0_int64, 4611686018427387903_int64, iters)
      case ('ckpt-every')
        ok = parse_int('ckpt-every', val, 0_int64, 4611686018427387903_int64, ckpt_every)
      case ('ckpt-dir')
        ckpt_dir = val
      case ('ckpt-slots')
        ok = parse_int('ckpt-slots', val, 1_int64, 2_int64, v); slots = int(v)
      case ('sleep-ms')
        ok = parse_int('sleep-ms', val, 0_int64, 3600000_int64, v); sleep_ms = int(v)
      case ('print-every')
        ok = parse_int('print-every', val, 0_int64, 4611686018427387903_int64, print_every)
      case default
        if (rank == 0) then
          write(error_unit, '(a)') app // ': unknown option ''' // trim(arg) // ''''
          call usage(error_unit)
        end if
        ok = .false.
      end select
      if (.not. ok) then
        parse_options = -1
        return
      end if
    end do
    mm = sn * (sn + 2) / 8
    if (mod(kt, mk) /= 0 .or. mod(mm, mmi) /= 0) then
      if (rank == 0) write(error_unit, '(a)') app // ': --mk must divide --nz and --mmi must divide ' &
          // i2a(mm) // ' (the angles per octant of S' // i2a(sn) // ')'
      parse_options = -1
      return
    end if
    ! Keeps every record below 2 GiB (3 moments x 8 bytes x 2^26 cells = 1.5 GiB), so
    ! no record is split into subrecords and the file size is as computed.
    if (int(it, int64) * jt * kt > 2_int64**26) then
      if (rank == 0) write(error_unit, '(a)') app // ': --nx * --ny * --nz must not exceed 2^26 cells'
      parse_options = -1
      return
    end if
    if (slots == 0) slots = int(app_default_slots())
    if (print_every == 0) print_every = max(1_int64, iters / 10)
  end function

  ! Level-symmetric S4 / S6 directions of the first octant. mu(m)^2 + eta(m)^2
  ! + xi(m)^2 = 1; the cosines come from mu_i^2 = mu_1^2 + (i-1) * 2 (1 - 3 mu_1^2)
  ! / (N - 2); the S6 point weights are fixed by the even moment condition
  ! sum w mu^4 = 1/5 over the octant. Weights are divided by 8 so that they sum
  ! to 1 over the sphere (flux moments are angular averages).
  subroutine make_quadrature()
    real(c_double) :: c(3), d, w1, w2
    integer :: idx(3, 6), m
    allocate(mu(mm), eta(mm), xi(mm), w(mm))
    if (sn == 4) then
      c(1) = 0.3500212d0
      c(2) = sqrt(c(1)**2 + 2d0 * (1d0 - 3d0 * c(1)**2) / 2d0)
      idx(:, 1:3) = reshape([1, 1, 2, 1, 2, 1, 2, 1, 1], [3, 3])
      w(:) = 1d0 / 3d0
    else
      c(1) = 0.2666355d0
      d = 2d0 * (1d0 - 3d0 * c(1)**2) / 4d0
      c(2) = sqrt(c(1)**2 + d)
      c(3) = sqrt(c(1)**2 + 2d0 * d)
      idx = reshape([1, 1, 3, 1, 3, 1, 3, 1, 1, 1, 2, 2, 2, 1, 2, 2, 2, 1], [3, 6])
      ! 3 w1 + 3 w2 = 1 and w1 (2 c1^4 + c3^4) + w2 (c1^4 + 2 c2^4) = 1/5.
      w1 = (0.2d0 - (c(1)**4 + 2d0 * c(2)**4) / 3d0) / &
           ((2d0 * c(1)**4 + c(3)**4) - (c(1)**4 + 2d0 * c(2)**4))
      w2 = 1d0 / 3d0 - w1
      w(1:3) = w1
      w(4:6) = w2
    end if
    do m = 1, mm
      mu(m) = c(idx(1, m))
      eta(m) = c(idx(2, m))
      xi(m) = c(idx(3, m))
    end do
    ! Normalise each direction to unit length (the tabulated mu_1 has 7 digits).
    do m = 1, mm
      d = sqrt(mu(m)**2 + eta(m)**2 + xi(m)**2)
      mu(m) = mu(m) / d
      eta(m) = eta(m) / d
      xi(m) = xi(m) / d
    end do
    w = w / sum(w) / 8d0
  end subroutine

  subroutine setup()
    integer :: dims(2), coords(2), i, j, k
    real(c_double) :: gx, gy, gz
    logical :: periods(2)
    call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
    dims = 0
    call MPI_Dims_create(nprocs, 2, dims)
    periods = .false.
    ! reorder = .false.: a rank keeps its number, which names its checkpoint files.
    call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .false., cart)
    call MPI_Comm_rank(cart, rank)
    call MPI_Cart_coords(cart, rank, 2, coords)
    npe_i = dims(1)
    npe_j = dims(2)
    ci = coords(1)
    cj = coords(2)
    call MPI_Cart_shift(cart, 0, 1, west, east)
    call MPI_Cart_shift(cart, 1, 1, south, north)
    call make_quadrature()
    allocate(flux(it, jt, kt), fluxm(it, jt, kt, 3), src(it, jt, kt), srcm(it, jt, kt, 3))
    allocate(sigt(it, jt, kt), sigs(it, jt, kt), qext(it, jt, kt), flux_old(it, jt, kt))
    allocate(phiib(jt, mk, mmi), phijb(it, mk, mmi), phikb(it, jt, mmi))
    flux = 0
    fluxm = 0
    src = 0
    srcm = 0
    do k = 1, kt
      gz = (k - 0.5d0) / kt
      do j = 1, jt
        gy = (cj * jt + j - 0.5d0) / (npe_j * jt)
        do i = 1, it
          gx = (ci * it + i - 0.5d0) / (npe_i * it)
          if (gx > 0.6d0 .and. gy > 0.6d0) then
            sigt(i, j, k) = 2.0d0
            sigs(i, j, k) = 0.2d0
          else
            sigt(i, j, k) = 1.0d0
            sigs(i, j, k) = 0.8d0
          end if
          if (gx >= 0.25d0 .and. gx <= 0.5d0 .and. gy >= 0.25d0 .and. gy <= 0.5d0 .and. &
              gz >= 0.25d0 .and. gz <= 0.5d0) then
            qext(i, j, k) = 1.0d0
          else
            qext(i, j, k) = 0.0d0
          end if
        end do
      end do
    end do
  end subroutine

  ! Sweeps angles m0+1..m0+mmi of the octant with signs (sx, sy, sz) through
  ! the k planes of block kb (in sweep order), using and updating the face
  ! buffers, and adds the directions into the flux moments.
  subroutine sweep_block(sx, sy, sz, m0, kb)
    integer, intent(in) :: sx, sy, sz, m0, kb
    integer :: mi, m, kk, k, j, i, ibeg, iend, jbeg, jend, pass, d
    ! Per face direction d (1: i, 2: j, 3: k): the coefficient, the inflow,
    ! the outflow, and whether diamond difference still applies.
    real(c_double) :: c(3), pin(3), po(3)
    real(c_double) :: q, psi, wm, wmx, wmy, wmz, smu, seta, sxi, num, den
    logical :: act(3)
    ibeg = merge(1, it, sx > 0)
    iend = merge(it, 1, sx > 0)
    jbeg = merge(1, jt, sy > 0)
    jend = merge(jt, 1, sy > 0)
    do mi = 1, mmi
      m = m0 + mi
      c(1) = 2d0 * mu(m) / dx
      c(2) = 2d0 * eta(m) / dy
      c(3) = 2d0 * xi(m) / dz
      smu = sx * mu(m)
      seta = sy * eta(m)
      sxi = sz * xi(m)
      wm = w(m)
      wmx = w(m) * smu
      wmy = w(m) * seta
      wmz = w(m) * sxi
      do kk = 1, mk
        if (sz > 0) then
          k = (kb - 1) * mk + kk
        else
          k = kt - (kb - 1) * mk - kk + 1
        end if
        do j = jbeg, jend, sy
          pin(1) = phiib(j, kk, mi)
          do i = ibeg, iend, sx
            q = src(i, j, k) + smu * srcm(i, j, k, 1) + seta * srcm(i, j, k, 2) &
                + sxi * srcm(i, j, k, 3)
            pin(2) = phijb(i, kk, mi)
            pin(3) = phikb(i, j, mi)
            psi = (q + c(1) * pin(1) + c(2) * pin(2) + c(3) * pin(3)) &
                  / (sigt(i, j, k) + c(1) + c(2) + c(3))
            po = 2d0 * psi - pin
            if (any(po < 0d0)) then
              ! Set-to-zero fixup: a negative outflow is set to 0 and the cell
              ! balance re-solved without diamond difference on that face.
              act = .true.
              do pass = 1, 3
                where (po < 0d0) act = .false.
                num = q
                den = sigt(i, j, k)
                do d = 1, 3
                  if (act(d)) then
                    num = num + c(d) * pin(d)
                    den = den + c(d)
                  else
                    num = num + 0.5d0 * c(d) * pin(d)
                  end if
                end do
                psi = num / den
                po = merge(2d0 * psi - pin, 0d0, act)
                if (all(po >= 0d0)) exit
              end do
              po = max(po, 0d0)
            end if
            flux(i, j, k) = flux(i, j, k) + wm * psi
            fluxm(i, j, k, 1) = fluxm(i, j, k, 1) + wmx * psi
            fluxm(i, j, k, 2) = fluxm(i, j, k, 2) + wmy * psi
            fluxm(i, j, k, 3) = fluxm(i, j, k, 3) + wmz * psi
            pin(1) = po(1)
            phijb(i, kk, mi) = po(2)
            phikb(i, j, mi) = po(3)
          end do
          phiib(j, kk, mi) = pin(1)
        end do
      end do
    end do
  end subroutine

  ! One source iteration. Returns this rank's max relative change of the flux.
  real(c_double) function source_iteration()
    integer :: iq, sx, sy, sz, mo, kb, up_i, down_i, up_j, down_j, d
    type(MPI_Request) :: req(2)
    src = sigs * flux + qext
    do d = 1, 3
      srcm(:, :, :, d) = 3d0 * aniso * sigs * fluxm(:, :, :, d)
    end do
    flux_old = flux
    flux = 0
    fluxm = 0
    do iq = 1, 8
      sx = merge(1, -1, btest(iq - 1, 0))
      sy = merge(1, -1, btest(iq - 1, 1))
      sz = merge(1, -1, btest(iq - 1, 2))
      up_i = merge(west, east, sx > 0)
      down_i = merge(east, west, sx > 0)
      up_j = merge(south, north, sy > 0)
      down_j = merge(north, south, sy > 0)
      do mo = 0, mm / mmi - 1
        phikb = 0  ! vacuum on the k boundary where the sweep enters
        do kb = 1, kt / mk
          ! Inflow faces: vacuum at the global boundary (MPI_PROC_NULL leaves
          ! the buffer untouched), else the upstream neighbour's outflow.
          phiib = 0
          phijb = 0
          call MPI_Irecv(phiib, size(phiib), MPI_DOUBLE_PRECISION, up_i, 1, cart, req(1))
          call MPI_Irecv(phijb, size(phijb), MPI_DOUBLE_PRECISION, up_j, 2, cart, req(2))
          call waitall(req)
          call MPI_F_sync_reg(phiib)
          call MPI_F_sync_reg(phijb)
          call sweep_block(sx, sy, sz, mo * mmi, kb)
          call MPI_Isend(phiib, size(phiib), MPI_DOUBLE_PRECISION, down_i, 1, cart, req(1))
          call MPI_Isend(phijb, size(phijb), MPI_DOUBLE_PRECISION, down_j, 2, cart, req(2))
          call waitall(req)
        end do
      end do
    end do
    source_iteration = maxval(abs(flux - flux_old) / max(flux, 1d-30))
  end function

  ! ---- checkpoint files -------------------------------------------------------

  function ckpt_path(r, slot) result(path)
    integer, intent(in) :: r, slot
    character(len=:), allocatable :: path
    path = trim(ckpt_dir) // '/' // app // '.' // i2a(r) // '.' // i2a(slot) // '.ckpt'
  end function

  integer(int64) function payload_hash()
    integer(c_size_t) :: n
    integer(int64) :: h
    n = int(size(flux), c_size_t) * 8
    h = app_hash_bytes(c_loc(flux), n, hash_seed)
    h = app_hash_bytes(c_loc(fluxm), 3 * n, h)
    h = app_hash_bytes(c_loc(src), n, h)
    payload_hash = app_hash_bytes(c_loc(srcm), 3 * n, h)
  end function

  function header_ints(iteration) result(h)
    integer(int64), intent(in) :: iteration
    integer(int64) :: h(nhdr)
    h = 0
    h(1:12) = [ckpt_magic, ckpt_version, int(rank, int64), int(nprocs, int64), int(npe_i, int64), &
               int(npe_j, int64), int(it, int64), int(jt, int64), int(kt, int64), int(sn, int64), &
               iteration, 4_int64]
  end function

  ! Bytes of one checkpoint file: each sequential record carries a 4-byte
  ! length marker at either end.
  integer(int64) function ckpt_file_bytes()
    integer(int64) :: n
    n = int(it, int64) * jt * kt * 8
    ckpt_file_bytes = (128 + 8) + (nhdr * 8 + 8) + 2 * (n + 8) + 2 * (3 * n + 8) + (2 * 8 + 8)
  end function

  ! Writes the state as of `iteration` into `slot`. A failure ends the job:
  ! the other ranks would otherwise wait for this one forever.
  subroutine ckpt_write(slot, iteration, durable)
    integer, intent(in) :: slot
    integer(int64), intent(in) :: iteration
    logical, intent(in) :: durable
    character(len=:), allocatable :: path, err
    character(len=128) :: text
    character(len=512) :: msg
    integer :: u, ios
    integer(int64) :: hash
    path = ckpt_path(rank, slot)
    hash = payload_hash()
    write(text, '(a,i0,a,i0,a,i0,a,i0,a,i0,a,i0,a,i0,a,i0)') 'sweep3d-mini checkpoint v1 rank ', &
        rank, ' nprocs ', nprocs, ' grid ', npe_i, 'x', npe_j, ' cells ', it, 'x', jt, 'x', kt, &
        ' iter ', iteration
    msg = ''
    open(newunit=u, file=path, status='replace', action='write', access='sequential', &
         form='unformatted', iostat=ios, iomsg=msg)
    if (ios == 0) write(u, iostat=ios, iomsg=msg) text
    if (ios == 0) write(u, iostat=ios, iomsg=msg) header_ints(iteration)
    if (ios == 0) write(u, iostat=ios, iomsg=msg) flux
    if (ios == 0) write(u, iostat=ios, iomsg=msg) fluxm
    if (ios == 0) write(u, iostat=ios, iomsg=msg) src
    if (ios == 0) write(u, iostat=ios, iomsg=msg) srcm
    if (ios == 0) write(u, iostat=ios, iomsg=msg) [hash, iteration]
    if (ios == 0) then
      close(u, iostat=ios, iomsg=msg)
    else
      close(u)
    end if
    if (ios /= 0) then
      call complain('cannot write checkpoint ' // path // ': ' // trim(msg))
      call MPI_Abort(MPI_COMM_WORLD, 2)
    end if
    if (durable) then
      err = make_durable(path)
      if (len(err) > 0) then
        call complain(err)
        call MPI_Abort(MPI_COMM_WORLD, 2)
      end if
    end if
  end subroutine

  ! Reads `slot` into the state arrays. Returns 0 (ok, iteration set),
  ! 1 (missing), 2 (damaged) or 3 (written by another configuration), with the
  ! reason in msg. The state is undefined after a failure.
  integer function ckpt_read(slot, iteration, msg)
    integer, intent(in) :: slot
    integer(int64), intent(out) :: iteration
    character(len=:), allocatable, intent(out) :: msg
    character(len=:), allocatable :: path
    character(len=128) :: text
    character(len=512) :: iomsg
    integer(int64) :: h(nhdr), want(nhdr), trailer(2)
    integer :: u, ios, e
    iteration = -1
    msg = ''
    path = ckpt_path(rank, slot)
    e = open_status(path)
    if (e == enoent) then
      ckpt_read = 1
      return
    else if (e /= 0) then
      msg = path // ' cannot be opened: ' // errno_text(e)
      ckpt_read = 2
      return
    end if
    iomsg = ''
    open(newunit=u, file=path, status='old', action='read', access='sequential', &
         form='unformatted', iostat=ios, iomsg=iomsg)
    if (ios /= 0) then
      msg = path // ' cannot be opened: ' // trim(iomsg)
      ckpt_read = 2
      return
    end if
    ckpt_read = 2
    read(u, iostat=ios, iomsg=iomsg) text
    if (ios == 0) read(u, iostat=ios, iomsg=iomsg) h
    if (ios /= 0) then
      msg = path // ' is damaged: its header is unreadable (' // trim(iomsg) // ')'
    else if (h(1) /= ckpt_magic .or. h(2) /= ckpt_version .or. h(11) < 0) then
      msg = path // ' is damaged: bad magic number or version in its header'
    else
      want = header_ints(h(11))
      if (any(h /= want)) then
        msg = path // ' was written by rank ' // itoa(h(3)) // ' of ' // itoa(h(4)) // &
            ' (process grid ' // itoa(h(5)) // 'x' // itoa(h(6)) // ', ' // itoa(h(7)) // 'x' // &
            itoa(h(8)) // 'x' // itoa(h(9)) // ' cells per rank, S' // itoa(h(10)) // &
            '); this run is rank ' // i2a(rank) // ' of ' // i2a(nprocs) // ' (grid ' // &
            i2a(npe_i) // 'x' // i2a(npe_j) // ', ' // i2a(it) // 'x' // i2a(jt) // 'x' // &
            i2a(kt) // ', S' // i2a(sn) // '). Rerun with the same process count and sizes, ' // &
            'or use an empty --ckpt-dir'
        ckpt_read = 3
      else
        read(u, iostat=ios, iomsg=iomsg) flux
        if (ios == 0) read(u, iostat=ios, iomsg=iomsg) fluxm
        if (ios == 0) read(u, iostat=ios, iomsg=iomsg) src
        if (ios == 0) read(u, iostat=ios, iomsg=iomsg) srcm
        if (ios == 0) read(u, iostat=ios, iomsg=iomsg) trailer
        if (ios /= 0) then
          msg = path // ' is damaged (truncated or corrupt): ' // trim(iomsg)
        else if (trailer(2) /= h(11)) then
          msg = path // ' is damaged: trailer iteration differs from the header'
        else if (trailer(1) /= payload_hash()) then
          msg = path // ' is damaged: content hash does not match its trailer'
        else
          read(u, iostat=ios) trailer
          if (ios /= iostat_end) then
            msg = path // ' is damaged: unexpected records after the trailer'
          else
            iteration = h(11)
            ckpt_read = 0
          end if
        end if
      end if
    end if
    close(u)
  end function

  ! Finds the checkpoint to resume from and loads it. Returns the iteration
  ! (0 for a fresh start) or -1 if the run must stop (message printed); sets
  ! last_slot to the slot holding the loaded checkpoint.
  integer(int64) function restart(last_slot)
    integer, intent(out) :: last_slot
    integer(int64) :: held(2), it_read, chosen, newest, epoch
    integer :: s, r, loaded, lacking, first_lacking
    logical :: mismatch
    character(len=:), allocatable :: msg
    held = -1
    mismatch = .false.
    loaded = -1
    do s = 0, 1
      r = ckpt_read(s, it_read, msg)
      if (r == 0) then
        held(s + 1) = it_read
        loaded = s
      else
        if (r /= 1) loaded = -1
        if (r == 2) call complain('checkpoint ' // msg // '; not using it')
        if (r == 3) then
          call complain('checkpoint ' // msg)
          mismatch = .true.
        end if
      end if
    end do
    restart = -1
    if (any_rank(mismatch, cart)) return
    chosen = agree_restart(held, cart, newest, lacking, first_lacking)
    if (newest >= 0 .and. chosen /= newest) call say('restart: iteration ' // itoa(newest) // &
        ' is not intact on ' // i2a(lacking) // ' rank(s) (first: rank ' // i2a(first_lacking) // ')')
    if (chosen > iters) then
      if (rank == 0) write(error_unit, '(a)') app // ': checkpoint iteration ' // itoa(chosen) // &
          ' in ' // trim(ckpt_dir) // ' is past --iters ' // itoa(iters)
      return
    end if
    epoch = app_dlckpt_restarted_epoch()
    if (chosen < 0 .and. epoch > 0) then
      if (rank == 0) write(error_unit, '(a)') app // ': dlckpt restored epoch ' // itoa(epoch) // &
          ' but no checkpoint in ' // trim(ckpt_dir) // ' is intact on every rank'
      return
    end if
    if (chosen < 0) then
      flux = 0
      fluxm = 0
      src = 0
      srcm = 0
      last_slot = 1
      if (newest >= 0) then
        call say('restart: no iteration is checkpointed intact on every rank; starting from scratch')
      else
        call say('fresh start: no checkpoint in ' // trim(ckpt_dir))
      end if
      restart = 0
      return
    end if
    s = merge(0, 1, held(1) == chosen)
    if (loaded /= s) then
      r = ckpt_read(s, it_read, msg)
      if (r /= 0 .or. it_read /= chosen) then
        call complain('checkpoint changed while restarting: ' // msg)
        call MPI_Abort(MPI_COMM_WORLD, 2)
      end if
    end if
    last_slot = s
    call say('restarted from iteration ' // itoa(chosen) // ' (' // trim(ckpt_dir) // ')')
    if (epoch > 0) call say('dlckpt: restarted epoch ' // itoa(epoch))
    restart = chosen
  end function

  integer(int64) function state_checksum()
    integer(c_long_long) :: origin(3), global(3), count(3), stride(3)
    integer(int64) :: local
    integer :: d
    origin = [int(ci, c_long_long) * it, int(cj, c_long_long) * jt, 0_c_long_long]
    global = [int(npe_i, c_long_long) * it, int(npe_j, c_long_long) * jt, int(kt, c_long_long)]
    count = [int(it, c_long_long), int(jt, c_long_long), int(kt, c_long_long)]
    stride = [1_c_long_long, int(it, c_long_long), int(it, c_long_long) * jt]
    ! Sum mod 2^64 of per-field digests: integer overflow wraps (two's complement).
    local = app_checksum_block(c_loc(flux), 0_c_int, origin, global, count, stride)
    local = wrap_add(local, app_checksum_block(c_loc(src), 4_c_int, origin, global, count, stride))
    do d = 1, 3
      local = wrap_add(local, app_checksum_block(c_loc(fluxm(1, 1, 1, d)), int(d, c_int), origin, &
                                                 global, count, stride))
      local = wrap_add(local, app_checksum_block(c_loc(srcm(1, 1, 1, d)), int(4 + d, c_int), &
                                                 origin, global, count, stride))
    end do
    state_checksum = checksum_combine(local, cart)
  end function

  ! a + b mod 2^64 without signed overflow: add the two 32-bit halves.
  integer(int64) function wrap_add(a, b)
    integer(int64), intent(in) :: a, b
    integer(int64), parameter :: lo_mask = 4294967295_int64
    integer(int64) :: lo, hi
    lo = iand(a, lo_mask) + iand(b, lo_mask)
    hi = iand(shiftr(a, 32) + shiftr(b, 32) + shiftr(lo, 32), lo_mask)
    wrap_add = ior(shiftl(hi, 32), iand(lo, lo_mask))
  end function
end module sweep3d

program sweep3d_mini
  use sweep3d
  implicit none
  integer :: prc, last_slot, slot
  integer(int64) :: start, iter
  logical :: checkpointing, durable, report
  real(c_double) :: change, t0, c0, elapsed, fmin, fmax
  character(len=:), allocatable :: err
  character(len=32) :: buf

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  prc = parse_options()
  if (prc /= 0) then
    call MPI_Finalize()
    if (prc > 0) stop
    stop 1, quiet=.true.
  end if
  if (dlckpt_init(MPI_COMM_WORLD) /= 0) then
    call complain(dlckpt_last_error())
    call MPI_Abort(MPI_COMM_WORLD, 3)
  end if
  call setup()

  checkpointing = ckpt_every > 0
  durable = app_dlckpt_linked() == 0
  call say('sweep3d-mini: ' // i2a(nprocs) // ' ranks (' // i2a(npe_i) // 'x' // i2a(npe_j) // &
      '), ' // i2a(it) // 'x' // i2a(jt) // 'x' // i2a(kt) // ' cells per rank, global ' // &
      i2a(npe_i * it) // 'x' // i2a(npe_j * jt) // 'x' // i2a(kt) // ', S' // i2a(sn) // ' (' // &
      i2a(8 * mm) // ' directions), blocks mk=' // i2a(mk) // ' mmi=' // i2a(mmi) // ', ' // &
      itoa(iters) // ' iterations')
  if (checkpointing) then
    buf = ''
    if (app_dlckpt_linked() /= 0) buf = ', dlckpt linked'
    call say('checkpoint: every ' // itoa(ckpt_every) // ' iterations to ' // trim(ckpt_dir) // &
        ', ' // i2a(slots) // ' slot(s) per rank' // trim(buf))
  else
    call say('checkpoint: disabled')
  end if
  call say('checkpoint bytes per rank: ' // itoa(ckpt_file_bytes()))

  start = 0
  last_slot = 1
  if (checkpointing) then
    err = mkdir_p(ckpt_dir)
    if (len(err) > 0 .and. durable) call complain(err // ' (choose another with --ckpt-dir)')
    if (any_rank(len(err) > 0 .and. durable, cart)) then
      call MPI_Finalize()
      stop 2, quiet=.true.
    end if
    start = restart(last_slot)
    if (start < 0) then
      call MPI_Finalize()
      stop 2, quiet=.true.
    end if
  end if

  t0 = app_now()
  change = 0
  do iter = start + 1, iters
    change = source_iteration()
    call app_sleep_ms(int(sleep_ms, c_int))
    report = mod(iter, print_every) == 0 .or. iter == iters
    if (report) then
      change = max_double(change, cart)
      write(buf, '(es12.6)') change
      call say('iter ' // itoa(iter) // ' max flux change ' // trim(adjustl(buf)))
    end if
    ! Nested: Fortran's .and. need not short-circuit, and mod(iter, 0) traps.
    if (checkpointing) then
      if (mod(iter, ckpt_every) == 0) then
        c0 = app_now()
        slot = merge(0, 1 - last_slot, slots == 1)
        call ckpt_write(slot, iter, durable)
        call checkpoint_commit(cart, app)
        last_slot = slot
        write(buf, '(f12.3)') app_now() - c0
        call say('checkpoint: iteration ' // itoa(iter) // ' complete (slot ' // i2a(slot) // ', ' // &
            trim(adjustl(buf)) // ' s)')
      end if
    end if
  end do
  elapsed = app_now() - t0

  ! Sanity: the flux is non-negative everywhere (fixup and P1 bound g <= 1/3).
  fmin = -max_double(-minval(flux), cart)
  fmax = max_double(maxval(flux), cart)
  write(buf, '(es12.5)') fmin
  err = 'flux: min ' // trim(adjustl(buf))
  write(buf, '(es12.5)') fmax
  call say(err // ' max ' // trim(adjustl(buf)))
  if (fmin < 0) then
    call say('sweep3d-mini: error: negative scalar flux')
    call MPI_Finalize()
    stop 4, quiet=.true.
  end if
  write(buf, '(f12.3)') elapsed
  call say('compute: ' // itoa(iters - start) // ' iterations in ' // trim(adjustl(buf)) // ' s')
  call say('checksum: ' // hex16(state_checksum()))
  prc = 0
  if (app_dlckpt_finalize() /= 0) then
    call complain(dlckpt_last_error())
    prc = 3
  end if
  call MPI_Finalize()
  if (prc /= 0) stop 3, quiet=.true.
end program sweep3d_mini
