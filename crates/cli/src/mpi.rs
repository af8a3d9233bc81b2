//! The MPI transport (feature `mpi`): a [`Communicator`] over
//! `MPI_COMM_WORLD`, and what makes a rank's crash end the job with one
//! line naming the rank and exit code 2.

use autobatch::shard::Communicator as Shard;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

/// The most bytes in one MPI message (MPI counts are 32-bit): longer
/// messages go in pieces.
const PIECE: usize = 1 << 30;

/// This process's rank of the job `mpirun` (or `srun`) started.
pub struct Mpi {
    world: SimpleCommunicator,
    // Finalizes MPI when dropped: the last field, dropped last.
    _universe: Universe,
}

impl Mpi {
    /// Initializes MPI; `None` if it cannot be (reported by the caller).
    pub fn start() -> Option<Mpi> {
        // Only the main thread talks to MPI; the run's threads compute.
        let (universe, _) = mpi::initialize_with_threading(mpi::Threading::Funneled)?;
        Some(Mpi {
            world: universe.world(),
            _universe: universe,
        })
    }
}

impl Shard for Mpi {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }
    fn size(&self) -> usize {
        self.world.size() as usize
    }
    fn send(&self, to: usize, bytes: &[u8]) {
        let process = self.world.process_at_rank(to as i32);
        process.send(&(bytes.len() as u64));
        for piece in bytes.chunks(PIECE) {
            process.send(piece);
        }
    }
    fn receive(&self, from: usize) -> Vec<u8> {
        let process = self.world.process_at_rank(from as i32);
        let (len, _) = process.receive::<u64>();
        let mut bytes = vec![0_u8; len as usize];
        for piece in bytes.chunks_mut(PIECE) {
            process.receive_into(piece);
        }
        bytes
    }
    /// MPI's own broadcast (a tree, not the root sending to every rank).
    fn broadcast(&self, bytes: Option<Vec<u8>>) -> Vec<u8> {
        let root = self.world.process_at_rank(0);
        let mut bytes = bytes.unwrap_or_default();
        let mut len = bytes.len() as u64;
        root.broadcast_into(&mut len);
        bytes.resize(len as usize, 0);
        for piece in bytes.chunks_mut(PIECE) {
            root.broadcast_into(piece);
        }
        bytes
    }
}

/// The message a crashing rank writes, made before any crash (a signal
/// handler may not allocate).
static mut CRASH_LINE: [u8; 160] = [0; 160];
static mut CRASH_LEN: usize = 0;

/// Makes a fatal signal (a crash, an abort: Rust aborts on a failed
/// allocation) write one `error: rank R: ...` line and exit with code 2,
/// which `mpirun` passes on as the job's, stopping the other ranks.
pub fn exit_2_on_crash(rank: usize) {
    let line = format!(
        "error: rank {rank}: the process crashed (a fatal signal: out of memory, or a bug in autobatch)\n"
    );
    let bytes = line.as_bytes();
    let len = bytes.len().min(160);
    // SAFETY: written once, before the handlers that read it are installed.
    unsafe {
        let buffer = &mut *std::ptr::addr_of_mut!(CRASH_LINE);
        buffer[..len].copy_from_slice(&bytes[..len]);
        CRASH_LEN = len;
    }
    extern "C" fn on_fatal_signal(_: libc::c_int) {
        // SAFETY: only async-signal-safe calls, on a buffer written before.
        unsafe {
            let buffer = &*std::ptr::addr_of!(CRASH_LINE);
            libc::write(2, buffer.as_ptr().cast(), CRASH_LEN);
            libc::_exit(2);
        }
    }
    for signal in [
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGILL,
        libc::SIGFPE,
        libc::SIGABRT,
    ] {
        // SAFETY: installs a handler that only writes and exits; on the
        // alternate signal stack Rust gives its threads, so that a stack
        // overflow reaches it too.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_fatal_signal as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_ONSTACK;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}
